package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// TestClaimHookSlot: a runner of a pool with isolation Runner gets a slot no live runner
// holds and no pod of the pool uses, the lowest free one reused before a new one is
// made; a new slot comes with its namespace (containerMode.namespace's Pod Security
// labels), the runner NetworkPolicy and the RoleBinding of that slot's ServiceAccount
// alone. Isolation Pool shares the pool's ServiceAccount and namespace.
func TestClaimHookSlot(t *testing.T) {
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.UID = "pool-uid"
	sharedPool := pool.DeepCopy()
	sharedPool.Spec.ContainerMode.Isolation = v1alpha1.IsolationPool
	base := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci-jobs", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "baseline", "team": "not-copied"}}}
	runner := func(name string) *v1alpha1.Runner {
		return &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name}, Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}}
	}
	slot := func(n int, holder string) *corev1.ServiceAccount { return slotServiceAccount(pool, n, holder) }
	podOf := func(name, sa string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: map[string]string{v1alpha1.LabelPool: "k8s"}},
			Spec: corev1.PodSpec{ServiceAccountName: sa}}
	}
	ns0, ns1 := v1alpha1.ContainerHookSlotNamespace(pool, 0), v1alpha1.ContainerHookSlotNamespace(pool, 1)
	terminating := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: slotLabels(pool, 0),
			DeletionTimestamp: ptr.To(metav1.Now()), Finalizers: []string{"kubernetes"}}}
	}
	for _, tc := range []struct {
		name     string
		pool     *v1alpha1.RunnerPool
		objs     []ctrl.Object
		watched  []string
		conflict string // a ServiceAccount whose claim another runner wins
		want     *v1alpha1.RunnerContainerHook
		wantDone bool
		// wantHolders: each slot ServiceAccount's runner afterwards.
		wantHolders map[string]string
		wantSlotNS  []string
		// wantRetry and wantMessage: a runner that waits.
		wantRetry   time.Duration
		wantMessage string
	}{
		{name: "first runner makes slot 0", objs: []ctrl.Object{base},
			want: &v1alpha1.RunnerContainerHook{Namespace: ns0, ServiceAccount: "k8s-container-hook-0"}, wantDone: true,
			wantHolders: map[string]string{"k8s-container-hook-0": "me"}, wantSlotNS: []string{ns0}},
		{name: "a slot whose runner is gone is reused", objs: []ctrl.Object{base, runner("b"), slot(0, "b"), slot(1, "gone"), slot(2, "gone")},
			want: &v1alpha1.RunnerContainerHook{Namespace: ns1, ServiceAccount: "k8s-container-hook-1"}, wantDone: true,
			wantHolders: map[string]string{"k8s-container-hook-0": "b", "k8s-container-hook-1": "me", "k8s-container-hook-2": "gone"}},
		{name: "a slot a pod still uses is not reused", objs: []ctrl.Object{base, slot(0, "gone"), podOf("gone", "k8s-container-hook-0")},
			want: &v1alpha1.RunnerContainerHook{Namespace: ns1, ServiceAccount: "k8s-container-hook-1"}, wantDone: true,
			wantHolders: map[string]string{"k8s-container-hook-0": "gone", "k8s-container-hook-1": "me"}, wantSlotNS: []string{ns1}},
		{name: "a claim lost to another runner moves on", objs: []ctrl.Object{base, runner("other"), slot(0, "gone"), slot(1, "gone")}, conflict: "k8s-container-hook-0",
			want: &v1alpha1.RunnerContainerHook{Namespace: ns1, ServiceAccount: "k8s-container-hook-1"}, wantDone: true,
			wantHolders: map[string]string{"k8s-container-hook-0": "other", "k8s-container-hook-1": "me"}},
		{name: "a slot claimed by an earlier pass is kept", objs: []ctrl.Object{base, runner("b"), slot(0, "b"), slot(1, "me")},
			want: &v1alpha1.RunnerContainerHook{Namespace: ns1, ServiceAccount: "k8s-container-hook-1"}, wantDone: true,
			wantHolders: map[string]string{"k8s-container-hook-0": "b", "k8s-container-hook-1": "me"}, wantSlotNS: []string{ns1}},
		{name: "a namespaced controller waits for a watched slot", objs: []ctrl.Object{base, runner("b"), slot(0, "b")}, watched: []string{"ci", ns0},
			wantHolders: map[string]string{"k8s-container-hook-0": "b"}, wantRetry: noFreeSlotRetry, wantMessage: "isolation: Pool"},
		{name: "a slot whose namespace is being deleted waits for it to go", objs: []ctrl.Object{base, terminating(ns0)},
			wantHolders: map[string]string{"k8s-container-hook-0": "me"}, wantRetry: slotTerminatingRetry, wantMessage: "to be deleted"},
		{name: "isolation Pool shares the pool's", pool: sharedPool, objs: []ctrl.Object{base},
			want: &v1alpha1.RunnerContainerHook{Namespace: "ci-jobs", ServiceAccount: "k8s-container-hook"}, wantDone: true,
			wantHolders: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pool
			if tc.pool != nil {
				p = tc.pool
			}
			scheme := runtime.NewScheme()
			for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
				if err := add(scheme); err != nil {
					t.Fatal(err)
				}
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(tc.objs, p.DeepCopy(), runner("me"))...).
				WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, patch ctrl.Patch, opts ...ctrl.PatchOption) error {
					if obj.GetName() == tc.conflict {
						// Runner "other" claims it first.
						won := &corev1.ServiceAccount{}
						if err := c.Get(ctx, ctrl.ObjectKeyFromObject(obj), won); err != nil {
							return err
						}
						won.Labels[v1alpha1.LabelRunner] = "other"
						if err := c.Update(ctx, won); err != nil {
							return err
						}
						return apierrors.NewConflict(schema.GroupResource{Resource: "serviceaccounts"}, obj.GetName(), nil)
					}
					return c.Patch(ctx, obj, patch, opts...)
				}}).Build()
			policy := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gantry-runners"}}
			r := &Reconciler{Client: c, APIReader: c, Clock: clock.RealClock{}, Events: events.NewFakeRecorder(10), WatchedNamespaces: tc.watched, HookNetworkPolicy: policy}
			s := &scope{runner: runner("me"), pool: p}
			res, done, err := r.claimHookSlot(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if done != tc.wantDone {
				t.Errorf("done = %v, want %v (result %+v, message %q)", done, tc.wantDone, res, s.runner.Status.Message)
			}
			if !done && (res != reconcile.Result{RequeueAfter: tc.wantRetry} || !strings.Contains(s.runner.Status.Message, tc.wantMessage)) {
				t.Errorf("waiting: result %+v, message %q; want a retry after %s and a message saying %q", res, s.runner.Status.Message, tc.wantRetry, tc.wantMessage)
			}
			if e := r.unwritten.get(s.runner); tc.want != nil && (e == nil || !cmp.Equal(tc.want, e.containerHook)) {
				t.Errorf("the claim is not remembered for the runner's first status write: %+v", e)
			}
			if diff := cmp.Diff(tc.want, s.runner.Status.ContainerHook); diff != "" {
				t.Errorf("status.containerHook (-want +got):\n%s", diff)
			}
			var sas corev1.ServiceAccountList
			if err := c.List(context.Background(), &sas, ctrl.InNamespace("ci")); err != nil {
				t.Fatal(err)
			}
			holders := map[string]string{}
			for _, sa := range sas.Items {
				holders[sa.Name] = sa.Labels[v1alpha1.LabelRunner]
			}
			if diff := cmp.Diff(tc.wantHolders, holders); diff != "" {
				t.Errorf("slot holders (-want +got):\n%s", diff)
			}
			for _, ns := range tc.wantSlotNS {
				checkSlotNamespace(t, c, p, ns, tc.want.ServiceAccount)
			}
		})
	}
}

// checkSlotNamespace checks a slot namespace made for ServiceAccount sa.
func checkSlotNamespace(t *testing.T, c ctrl.Client, pool *v1alpha1.RunnerPool, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	got := &corev1.Namespace{}
	if err := c.Get(ctx, ctrl.ObjectKey{Name: ns}, got); err != nil {
		t.Fatalf("slot namespace %s: %v", ns, err)
	}
	if got.Labels["pod-security.kubernetes.io/enforce"] != "baseline" || got.Labels["team"] != "" ||
		got.Labels[v1alpha1.LabelPool] != pool.Name || got.Labels[v1alpha1.LabelWorkflowPod] != v1alpha1.ContainerHookSlot {
		t.Errorf("namespace %s labels %v: want the pool's, the slot mark and only the Pod Security labels of ci-jobs", ns, got.Labels)
	}
	rb := &rbacv1.RoleBinding{}
	if err := c.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: HookSlotRoleBinding}, rb); err != nil {
		t.Fatalf("role binding in %s: %v", ns, err)
	}
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: pool.Namespace, Name: sa}}
	if diff := cmp.Diff(wantSubjects, rb.Subjects); diff != "" || rb.RoleRef.Name != ContainerHookClusterRole {
		t.Errorf("role binding in %s binds %s to (-want +got):\n%s", ns, rb.RoleRef.Name, diff)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: "gantry-runners"}, np); err != nil {
		t.Errorf("runner NetworkPolicy in %s: %v", ns, err)
	}
}

// A namespace that happens to have a slot's name and is not that slot's is not used.
func TestClaimHookSlotRefusesAForeignNamespace(t *testing.T) {
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ContainerHookSlotNamespace(pool, 0)}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool, foreign,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci-jobs"}}).Build()
	r := &Reconciler{Client: c, APIReader: c, Clock: clock.RealClock{}}
	s := &scope{runner: &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "me"}, Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}}, pool: pool}
	_, done, err := r.claimHookSlot(context.Background(), s)
	if err == nil || done || !strings.Contains(err.Error(), "is not a container hook namespace of pool ci/k8s") {
		t.Fatalf("claim into a foreign namespace: done %v, err %v; want an error naming it", done, err)
	}
	if s.runner.Status.ContainerHook != nil {
		t.Errorf("status.containerHook = %+v, want none", s.runner.Status.ContainerHook)
	}
	if err := c.Get(context.Background(), ctrl.ObjectKey{Namespace: foreign.Name, Name: HookSlotRoleBinding}, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("role binding in the foreign namespace: err %v, want none made", err)
	}
}

// Runners of a burst, reconciled side by side, each get a slot of their own with one
// write each: no two hold one, and none retries against another's creation.
func TestClaimHookSlotBurst(t *testing.T) {
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.UID = "pool-uid"
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	const n = 40
	objs := []ctrl.Object{pool, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci-jobs"}}}
	for i := range n {
		objs = append(objs, &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: fmt.Sprintf("r%02d", i)}, Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}})
	}
	var saWrites atomic.Int64
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.CreateOption) error {
			if _, ok := obj.(*corev1.ServiceAccount); ok && obj.GetName() != "default" {
				saWrites.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, APIReader: c, Clock: clock.RealClock{}}
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &scope{runner: objs[2+i].(*v1alpha1.Runner), pool: pool}
			if _, done, err := r.claimHookSlot(context.Background(), s); err != nil || !done {
				t.Errorf("runner %d: done %v, err %v", i, done, err)
				return
			}
			got[i] = s.runner.Status.ContainerHook.ServiceAccount
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, sa := range got {
		if seen[sa] {
			t.Errorf("runner %d got slot %s, already another's", i, sa)
		}
		seen[sa] = true
	}
	if w := saWrites.Load(); w != n {
		t.Errorf("%d ServiceAccount creates for %d runners, want one each", w, n)
	}
}

// A hook namespace's default ServiceAccount, which the hook's pods name, is looked at once
// per namespace: kube-controller-manager's is left alone, a missing one is made without a
// token.
func TestEnsureDefaultServiceAccount(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	made := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "made", Name: "default"}}
	var creates, gets int
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(made).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.CreateOption) error {
			creates++
			return c.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c ctrl.WithWatch, key ctrl.ObjectKey, obj ctrl.Object, opts ...ctrl.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, APIReader: c}
	for range 2 {
		for _, ns := range []string{"made", "missing"} {
			if err := r.ensureDefaultServiceAccount(context.Background(), ns); err != nil {
				t.Fatal(err)
			}
		}
	}
	sa := &corev1.ServiceAccount{}
	if err := c.Get(context.Background(), ctrl.ObjectKey{Namespace: "missing", Name: "default"}, sa); err != nil {
		t.Fatal(err)
	}
	if creates != 1 || gets != 3 || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("%d creates, %d reads (then 1 to check), automount %v: want 1 create, 2 reads, no token", creates, gets, sa.AutomountServiceAccountToken)
	}
}
