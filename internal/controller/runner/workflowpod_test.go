package runner

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// After Gantry deleted a workflow pod that could not start, the runner is left to end
// by itself until prepareJobTimeout + workflowPodGrace have passed; then it is failed
// with the condition's reason and its pod deleted.
func TestWorkflowPodBackstop(t *testing.T) {
	deletedAt := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.Spec.ContainerMode.PrepareJobTimeout = &metav1.Duration{Duration: time.Minute}
	backstop := time.Minute + workflowPodGrace
	cond := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionWorkflowPodReady, Status: metav1.ConditionFalse,
			Reason: reason, Message: "the image \"x\" could not be pulled", LastTransitionTime: metav1.NewTime(deletedAt)}}
	}
	for _, tc := range []struct {
		name        string
		conditions  []metav1.Condition
		since       time.Duration
		wantRes     reconcile.Result
		wantDone    bool
		wantFailed  bool
		wantPodGone bool
	}{
		{name: "no workflow pod deleted", since: time.Hour, wantDone: true},
		{name: "a workflow pod running once", since: time.Hour, wantDone: true, conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionWorkflowPodReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWorkflowPodRunning,
			LastTransitionTime: metav1.NewTime(deletedAt)}}},
		{name: "deleted, backstop not due", conditions: cond(v1alpha1.ReasonWorkflowPodImagePullFailed), since: 10 * time.Second,
			wantDone: true, wantRes: reconcile.Result{RequeueAfter: backstop - 10*time.Second}},
		{name: "deleted, backstop due", conditions: cond(v1alpha1.ReasonWorkflowPodUnschedulable), since: backstop,
			wantRes: reconcile.Result{RequeueAfter: time.Hour}, wantFailed: true, wantPodGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := v1alpha1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			if err := corev1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "k8s-abcde"}, Spec: corev1.PodSpec{NodeName: "node-a"}}
			rn := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "k8s-abcde"}, Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}}
			rn.Status.Conditions = tc.conditions
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod.DeepCopy(), pool.DeepCopy()).Build()
			clk := clocktesting.NewFakeClock(deletedAt.Add(tc.since))
			r := &Reconciler{Client: c, APIReader: c, Clock: clk, Events: events.NewFakeRecorder(10), FailedRetention: time.Hour,
				Failures: &controller.FailureBackoff{Clock: clk, Threshold: 3}}
			s := &scope{runner: rn, pool: pool, pod: pod}
			res, done, err := r.workflowPodBackstop(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantRes, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if done != tc.wantDone {
				t.Errorf("done = %v, want %v", done, tc.wantDone)
			}
			if got := rn.Status.Phase == v1alpha1.RunnerFailed; got != tc.wantFailed {
				t.Errorf("failed = %v (phase %q), want %v", got, rn.Status.Phase, tc.wantFailed)
			}
			if tc.wantFailed {
				f := meta.FindStatusCondition(rn.Status.Conditions, ConditionFailed)
				if f == nil || f.Reason != tc.conditions[0].Reason {
					t.Errorf("Failed condition = %+v, want reason %s", f, tc.conditions[0].Reason)
				}
			}
			err = c.Get(context.Background(), ctrl.ObjectKeyFromObject(pod), &corev1.Pod{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantPodGone {
				t.Errorf("runner pod gone = %v (err %v), want %v", gone, err, tc.wantPodGone)
			}
		})
	}
}
