package runner

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
)

// recordingSource is a demand source that records the runners it is asked to remove;
// busy makes each removal answer github Busy (the runner runs a job).
type recordingSource struct {
	source.Webhook
	mu      sync.Mutex
	removed []string
	busy    bool
}

func (s *recordingSource) Unregister(_ context.Context, _ *v1alpha1.RunnerPool, name string, _ int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed = append(s.removed, name)
	if s.busy {
		return github.NewBusyError("JobStillRunningException", nil)
	}
	return nil
}

func (s *recordingSource) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.removed)
}

// A deleted runner that never ran a job is removed from GitHub once, however many times
// it is finalized while its pod terminates (each pod event brings it back); one GitHub
// says is busy is asked again on each pass until it is not; one that finished its job
// costs no call.
func TestFinalizeRemovesARunnerFromGitHubOnce(t *testing.T) {
	tests := []struct {
		name      string
		busy      bool
		finished  bool // GitHub said its job completed (a scale set's JobCompleted)
		wantCalls int
	}{
		{name: "idle runner retired", wantCalls: 1},
		{name: "busy runner retired", busy: true, wantCalls: 3},
		{name: "runner whose job completed", finished: true, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			// The pod has a finalizer of its own: deleted, it stays terminating, as on a
			// kubelet that takes its time.
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-bcdfg", Finalizers: []string{"test/hold"}},
				Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: v1alpha1.RunnerContainerName, Image: "runner"}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			r, c, _, rn := unwrittenWorld(t)
			if err := controllerutil.SetControllerReference(rn, pod, c.Scheme()); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			src := &recordingSource{busy: tt.busy}
			r.Sources = &source.Sources{Webhook: src, ScaleSet: src}
			r.Tracker = demand.NewTracker(demand.NewRouter(), r.Clock)
			if tt.finished {
				job := demand.Job{ID: 9, RunnerName: rn.Name}
				r.Tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: job})
				r.Tracker.Observe(demand.JobEvent{Action: demand.ActionCompleted, Job: job})
			}
			before := rn.DeepCopy()
			rn.Status.GitHubRunnerID = 42
			patch, err := controller.StatusPatch(before.Status, rn.Status)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Status().Patch(ctx, rn, patch); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, rn); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				got := &v1alpha1.Runner{}
				if err := c.Get(ctx, types.NamespacedName{Namespace: "ci", Name: rn.Name}, got); err != nil {
					t.Fatal(err)
				}
				if _, err := r.finalize(ctx, got); err != nil {
					t.Fatalf("finalize: %v", err)
				}
			}
			if n := src.calls(); n != tt.wantCalls {
				t.Errorf("removed from GitHub %d times, want %d", n, tt.wantCalls)
			}
		})
	}
}

// A runner whose job GitHub said completed stays done in the Tracker after its
// finalizer is removed, until a reconcile finds the Runner gone: till then the pool
// still lists it, deleted and Busy, and would count it busy against maxRunners and
// retire a runner just made for a queued job (TestRestartRebuildsDemand saw one
// retired and made again).
func TestAFinishedRunnerStaysDoneUntilItIsGone(t *testing.T) {
	ctx := context.Background()
	r, c, _, rn := unwrittenWorld(t)
	r.Sources = &source.Sources{Webhook: &recordingSource{}, ScaleSet: &recordingSource{}}
	r.Tracker = demand.NewTracker(demand.NewRouter(), r.Clock)
	job := demand.Job{ID: 9, RunnerName: rn.Name}
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: job})
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionCompleted, Job: job})
	if err := c.Delete(ctx, rn); err != nil {
		t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: runnerKey(rn)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("finalizing: %v", err)
	}
	if err := c.Get(ctx, runnerKey(rn), &v1alpha1.Runner{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Runner after its finalizer was removed: %v; want it gone", err)
	}
	if !r.Tracker.Finished(rn.Name) {
		t.Error("the Tracker forgot the runner's finished job before a reconcile found the Runner gone")
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("reconciling the gone Runner: %v", err)
	}
	if _, ok := r.Tracker.RunnerJob(rn.Name); ok {
		t.Error("the Tracker still holds the job of a Runner found gone")
	}
}
