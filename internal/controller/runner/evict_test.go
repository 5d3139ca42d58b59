package runner

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/nodes"
)

// The eviction webhook's reviews that need no GitHub call: everything but an idle
// runner on a node being emptied is left to the PodDisruptionBudget, and the answer is
// always allowed. (An idle
// runner retired within its eviction: test/integration/controller, eviction_test.go.)
func TestEvictionReviewsLeftToTheBudget(t *testing.T) {
	const ns = "ci"
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linux"}}
	runnerNamed := func(name string, mutate func(*v1alpha1.Runner)) *v1alpha1.Runner {
		rn := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}, Spec: v1alpha1.RunnerSpec{PoolName: "linux"}}
		if mutate != nil {
			mutate(rn)
		}
		return rn
	}
	podOf := func(rn *v1alpha1.Runner, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rn.Name, UID: "pod-" + rn.UID,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Runner", Name: rn.Name, UID: rn.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	busy := runnerNamed("busy", func(r *v1alpha1.Runner) { r.Status.Phase = v1alpha1.RunnerBusy })
	withJob := runnerNamed("with-job", func(r *v1alpha1.Runner) {
		r.Status.Phase = v1alpha1.RunnerIdle
		r.Status.Job = &v1alpha1.RunnerJob{ID: 7}
	})
	failed := runnerNamed("failed", func(r *v1alpha1.Runner) { r.Status.Phase = v1alpha1.RunnerFailed })
	idle := runnerNamed("idle", func(r *v1alpha1.Runner) { r.Status.Phase = v1alpha1.RunnerIdle })
	going := runnerNamed("going", func(r *v1alpha1.Runner) { r.Status.Phase = v1alpha1.RunnerIdle })
	notOurs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	staying := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	objs := []ctrl.Object{staying, pool, busy, withJob, failed, idle, going, notOurs,
		podOf(busy, nil), podOf(withJob, nil), podOf(failed, nil), podOf(idle, nil),
		podOf(going, func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			p.Finalizers = []string{"keep"}
		})}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	r := &Reconciler{Client: c, APIReader: c, Clock: clocktesting.NewFakeClock(time.Now()), Events: events.NewFakeRecorder(10),
		Nodes: &nodes.View{Reader: c}}

	eviction := func(name string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: ns, Name: name, SubResource: "eviction",
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		}}
	}
	for _, tc := range []struct {
		name    string
		req     admission.Request
		leading bool
		want    string
	}{
		{"a pod update", func() admission.Request {
			q := eviction("idle")
			q.SubResource, q.Operation = "", admissionv1.Update
			return q
		}(), true, evictOther},
		{"a dry run", func() admission.Request { q := eviction("idle"); q.DryRun = ptr.To(true); return q }(), true, evictDryRun},
		{"on a standby", eviction("idle"), false, evictStandby},
		{"a pod Gantry does not cache", eviction("nowhere"), true, evictOther},
		{"a pod no Runner owns", eviction("web-0"), true, evictOther},
		{"a runner pod being deleted", eviction("going"), true, evictOther},
		{"a busy runner", eviction("busy"), true, evictBusy},
		{"a runner whose job is known, its phase not written yet", eviction("with-job"), true, evictBusy},
		{"a failed runner", eviction("failed"), true, evictOther},
		{"an idle runner on a node not being emptied (a descheduler's eviction, or a forged review)", eviction("idle"), true, evictNotLeaving},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := r.reviewEviction(context.Background(), tc.req, func() bool { return tc.leading })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("review (-want +got):\n%s", diff)
			}
			resp := r.EvictionWebhook(func() bool { return tc.leading }).Handle(context.Background(), tc.req)
			if !resp.Allowed {
				t.Errorf("the webhook refused the eviction: %+v", resp.Result)
			}
		})
	}
	// Nothing was deleted.
	for _, o := range objs {
		if err := c.Get(context.Background(), ctrl.ObjectKeyFromObject(o), o.DeepCopyObject().(ctrl.Object)); err != nil {
			t.Errorf("%T %s: %v, want it kept", o, o.GetName(), err)
		}
	}
}

// A node cordoned a moment ago is leaving though the cache does not show it yet: kubectl
// drain evicts within milliseconds of its cordon.
func TestEvictionReadsANodeTheCacheShowsStaying(t *testing.T) {
	stale := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}).Build()
	fresh := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{Unschedulable: true}}).Build()
	r := &Reconciler{APIReader: fresh, Nodes: &nodes.View{Reader: stale}}
	why, err := r.nodeLeaving(context.Background(), "node-1")
	if err != nil || why != "node node-1 is cordoned (a drain or an upgrade)" {
		t.Errorf("nodeLeaving = %q, %v; want the cordon, read from the API server", why, err)
	}
	r.APIReader = stale
	if why, err := r.nodeLeaving(context.Background(), "node-1"); err != nil || why != "" {
		t.Errorf("nodeLeaving of a node staying = %q, %v; want \"\"", why, err)
	}
}
