package runner

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/hookrelease"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// A runner's hook Secrets are deleted by one deletecollection as it ends, unless the
// controller knows there is none: its pod exited 0, it required a job container, this
// process saw its workflow pod (containerHooks), and the registry Secret that pod pulls
// with is gone. Anything short of that keeps the deletecollection, and a Secret the
// hook left is deleted.
func TestRemoveHookObjectsSecrets(t *testing.T) {
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.UID = "pool-uid"
	const name = "k8s-abcde"
	hns := v1alpha1.ContainerHookSlotNamespace(pool, 0)
	registry := hookrelease.SecretPrefix(name) + "aaaabbbb"
	runnerPod := func(phase corev1.PodPhase, requireJobContainer bool) *corev1.Pod {
		cm := pool.Spec.ContainerMode.DeepCopy()
		cm.RequireJobContainer = &requireJobContainer
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: map[string]string{v1alpha1.LabelPool: "k8s"}},
			Spec: corev1.PodSpec{ServiceAccountName: v1alpha1.ContainerHookSlotServiceAccountName("k8s", 0), Containers: []corev1.Container{
				{Name: v1alpha1.RunnerContainerName, Env: HookEnv(cm, hns)}}},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	workflowPod := func(ns string, pullSecrets ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hookrelease.WorkflowPodName(name),
			Labels: map[string]string{hookrelease.LabelRunnerPod: name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		for _, s := range pullSecrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
		return p
	}
	hookSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hns, Name: registry, Labels: map[string]string{hookrelease.LabelRunnerPod: name}}}
	otherSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hns, Name: hookrelease.SecretPrefix(name) + "ccccdddd",
		Labels: map[string]string{hookrelease.LabelRunnerPod: name}}}
	for _, tc := range []struct {
		name string
		// seen is the workflow pod containerHooks saw while the runner ran; nil: none.
		seen *corev1.Pod
		// restarted: a process other than the one that saw it ends the runner.
		restarted bool
		// exited: the runner pod exited 0 (finalize's exited path); else it failed.
		exited              bool
		requireJobContainer bool
		// left: the hook's registry Secret is still there; other: a Secret of the
		// runner's that its workflow pod does not name (job code with the token).
		left, other bool
		// regcred: a pull Secret of the namespace's own, not the hook's, is there.
		regcred bool
		wantDel bool
	}{
		{name: "exited 0, its workflow pod seen, its registry Secret gone", seen: workflowPod(hns, registry), exited: true, requireJobContainer: true},
		{name: "exited 0, its workflow pod seen with no registry Secret", seen: workflowPod(hns), exited: true, requireJobContainer: true},
		{name: "a pull Secret not the hook's is not the hook's to delete", seen: workflowPod(hns, "regcred", registry), exited: true, requireJobContainer: true, regcred: true},
		{name: "its registry Secret still there", seen: workflowPod(hns, registry), exited: true, requireJobContainer: true, left: true, wantDel: true},
		{name: "its workflow pod never seen (refused, or made and gone between relists)", exited: true, requireJobContainer: true, left: true, wantDel: true},
		{name: "seen by a process that has since restarted", seen: workflowPod(hns, registry), restarted: true, exited: true, requireJobContainer: true, left: true, wantDel: true},
		{name: "failed, killed or evicted: its hook may still have been at work", seen: workflowPod(hns, registry), requireJobContainer: true, wantDel: true},
		{name: "jobs without a job container ran next to the token", seen: workflowPod(hns, registry), exited: true, other: true, wantDel: true},
		{name: "seen in another namespace", seen: workflowPod("elsewhere", registry), exited: true, requireJobContainer: true, wantDel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rn := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, UID: "runner-uid"}, Spec: v1alpha1.RunnerSpec{PoolName: "k8s"},
				Status: v1alpha1.RunnerStatus{ContainerHook: &v1alpha1.RunnerContainerHook{Namespace: hns, ServiceAccount: v1alpha1.ContainerHookSlotServiceAccountName("k8s", 0)}}}
			objs := []ctrl.Object{pool.DeepCopy(), rn.DeepCopy(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hns, Name: "default"}}}
			if tc.seen != nil {
				objs = append(objs, tc.seen.DeepCopy())
			}
			if tc.left {
				objs = append(objs, hookSecret.DeepCopy())
			}
			if tc.other {
				objs = append(objs, otherSecret.DeepCopy())
			}
			if tc.regcred {
				objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hns, Name: "regcred"}})
			}
			var deletes int
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				DeleteAllOf: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.DeleteAllOfOption) error {
					deletes++
					return c.DeleteAllOf(ctx, obj, opts...)
				},
			}).Build()
			newReconciler := func() *Reconciler {
				return &Reconciler{Client: c, APIReader: c, Clock: clocktesting.NewFakeClock(time.Now()), Events: events.NewFakeRecorder(10)}
			}
			r := newReconciler()
			if tc.seen != nil {
				// The runner runs its job: containerHooks looks at its hook's pods.
				s := &scope{runner: rn.DeepCopy(), pool: pool, pod: runnerPod(corev1.PodRunning, tc.requireJobContainer)}
				if tc.seen.Namespace != hns {
					s.pod.Spec.Containers[0].Env = HookEnv(pool.Spec.ContainerMode, tc.seen.Namespace)
				}
				if _, _, err := r.containerHooks(ctx, s); err != nil {
					t.Fatal(err)
				}
				// Its cleanup_job deletes the workflow pod.
				if err := c.Delete(ctx, tc.seen.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			if tc.restarted {
				r = newReconciler()
			}
			var exited *corev1.Pod
			if tc.exited {
				exited = runnerPod(corev1.PodSucceeded, tc.requireJobContainer)
			}
			if err := r.removeHookObjects(ctx, rn, pool, exited); err != nil {
				t.Fatal(err)
			}
			if got := deletes == 1; got != tc.wantDel || deletes > 1 {
				t.Errorf("%d deletecollections of the hook's Secrets, want one: %v", deletes, tc.wantDel)
			}
			for _, secret := range []*corev1.Secret{hookSecret, otherSecret} {
				if err := c.Get(ctx, ctrl.ObjectKeyFromObject(secret), &corev1.Secret{}); !apierrors.IsNotFound(err) {
					t.Errorf("the runner's Secret %s: err %v, want it gone", secret.Name, err)
				}
			}
		})
	}
}
