package runnerpool

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/demand"
)

func TestDesired(t *testing.T) {
	tests := []struct {
		name                      string
		minIdle, max              int32
		busy, queued, wantDesired int
	}{
		{"scale to zero", 0, 10, 0, 0, 0},
		{"one queued job from zero", 0, 10, 0, 1, 1},
		{"busy plus queued plus warm", 2, 10, 3, 4, 9},
		{"capped at maxRunners", 2, 10, 5, 20, 10},
		{"paused pool", 0, 0, 0, 5, 0},
		{"warm pool with nothing to do", 3, 10, 0, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := v1alpha1.RunnerPoolSpec{MinIdle: tt.minIdle, MaxRunners: tt.max}
			if got := desired(spec, int(tt.minIdle), tt.busy, tt.queued); got != tt.wantDesired {
				t.Errorf("desired = %d, want %d", got, tt.wantDesired)
			}
		})
	}
}

func runnerAt(name string, phase v1alpha1.RunnerPhase, id int64, age time.Duration) v1alpha1.Runner {
	return v1alpha1.Runner{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).Add(-age))},
		Status:     v1alpha1.RunnerStatus{Phase: phase, GitHubRunnerID: id},
	}
}

func TestVictimsNeverIncludeBusyRunners(t *testing.T) {
	tracker := demand.NewTracker(demand.NewRouter(), clocktesting.NewFakeClock(time.Now()))
	// busy-by-webhook is Idle in its status but GitHub's in_progress event named it.
	tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: demand.Job{ID: 9, RunnerName: "busy-by-webhook"}})
	deleted := runnerAt("deleted", v1alpha1.RunnerIdle, 7, time.Minute)
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	runners := []v1alpha1.Runner{
		runnerAt("idle-old", v1alpha1.RunnerIdle, 1, 10*time.Minute),
		runnerAt("busy", v1alpha1.RunnerBusy, 2, 5*time.Minute),
		runnerAt("unregistered", v1alpha1.RunnerPending, 0, time.Minute),
		runnerAt("idle-new", v1alpha1.RunnerIdle, 3, time.Minute),
		runnerAt("pending-registered", v1alpha1.RunnerPending, 4, 2*time.Minute),
		runnerAt("failed", v1alpha1.RunnerFailed, 5, time.Minute),
		runnerAt("busy-by-webhook", v1alpha1.RunnerIdle, 6, time.Minute),
		deleted,
	}
	r := &Reconciler{Tracker: tracker}
	tests := []struct {
		n    int
		want []string
	}{
		{1, []string{"unregistered"}},
		{2, []string{"unregistered", "pending-registered"}},
		{4, []string{"unregistered", "pending-registered", "idle-new", "idle-old"}},
		{10, []string{"unregistered", "pending-registered", "idle-new", "idle-old"}},
	}
	for _, tt := range tests {
		var got []string
		for _, v := range victims(runners, tt.n, r.snapshot(types.NamespacedName{}, runners)) {
			got = append(got, v.Name)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("victims(%d) (-want +got):\n%s", tt.n, diff)
		}
	}
}

func TestExpectationsCountCreatesTheCacheHasNotShown(t *testing.T) {
	var e expectations
	pool := demand.PoolKey{Namespace: "ci", Name: "p"}
	now := time.Now()
	e.expect(pool, "p-aaaaa", now)
	e.expect(pool, "p-bbbbb", now)
	if got := e.pending(pool, e.mark(), nil, now); got != 2 {
		t.Fatalf("pending before the cache shows anything = %d, want 2", got)
	}
	if got := e.pending(pool, e.mark(), []v1alpha1.Runner{{ObjectMeta: metav1.ObjectMeta{Name: "p-aaaaa"}}}, now); got != 1 {
		t.Fatalf("pending after the cache shows one = %d, want 1", got)
	}
	if got := e.pending(pool, e.mark(), nil, now.Add(expectationTTL+time.Second)); got != 0 {
		t.Fatalf("pending after the TTL = %d, want 0", got)
	}
}

// assignedSource is a demand source whose service assigned jobs to the pool, as a runner
// scale set's statistics say (totalAssignedJobs: waiting and running), with the scale-set
// source's rule: demand is what its busy runners do not run.
type assignedSource struct {
	source.Webhook
	assigned int
}

func (s assignedSource) Demand(_ types.NamespacedName, _ demand.PoolSnapshot, busy int) (demand.Demand, bool) {
	return demand.Demand{Queued: max(0, s.assigned-busy)}, true
}

// The pickup tail of a scale-set burst: runners that finished their job (the service
// said JobCompleted, so its count of assigned jobs no longer has them) but whose pod has
// not exited yet must not hide the jobs assigned since. A pass creates a runner for
// every one of them at once, not only for those beyond the finishing runners.
func TestFinishedRunnersDoNotHideAssignedJobs(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	tracker := demand.NewTracker(demand.NewRouter(), clk)
	var runners []v1alpha1.Runner
	for i := range 10 {
		name := fmt.Sprintf("ss-%05d", i)
		job := demand.Job{ID: int64(100 + i), RunnerName: name}
		tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: job})
		tracker.Observe(demand.JobEvent{Action: demand.ActionCompleted, Job: job})
		rn := runnerAt(name, v1alpha1.RunnerBusy, int64(i+1), time.Minute)
		rn.Status.Job = &v1alpha1.RunnerJob{ID: job.ID}
		runners = append(runners, rn)
	}
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "ss"},
		Spec: v1alpha1.RunnerPoolSpec{MaxRunners: 100}}
	r := &Reconciler{Tracker: tracker, Failures: &controller.FailureBackoff{}, Clock: clk}
	for _, tt := range []struct {
		name                   string
		assigned               int
		wantToCreate, wantBusy int
	}{
		{name: "12 jobs assigned after 10 finished", assigned: 12, wantToCreate: 12},
		{name: "nothing assigned", assigned: 0, wantToCreate: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &state{pool: pool, runners: runners, source: &assignedSource{assigned: tt.assigned}}
			if _, err := r.observe(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			got := struct{ ToCreate, Busy int }{st.desired - st.active(), st.busy}
			want := struct{ ToCreate, Busy int }{tt.wantToCreate, tt.wantBusy}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// goneSource is assignedSource whose service still counts the jobs of runners whose
// Runner is gone (their pod exited before the service said their job completed).
type goneSource struct {
	assignedSource
	gone int
}

func (s goneSource) Runners(_ types.NamespacedName, tracked demand.PoolSnapshot, _ []v1alpha1.Runner) demand.PoolSnapshot {
	var gone []string
	for i := range s.gone {
		gone = append(gone, fmt.Sprintf("ss-gone-%d", i))
	}
	return tracked.WithRunners(nil, nil, gone, 0)
}

// Runners gone before the service said their job completed still hold their job: the
// service's count of assigned jobs has it, so the pool makes no runner for it
// (burst-scaleset made runners as the burst's jobs completed, and retired them unused).
func TestRunnersGoneBeforeTheirJobCompletedHoldTheirJob(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "ss"},
		Spec: v1alpha1.RunnerPoolSpec{MaxRunners: 100}}
	r := &Reconciler{Tracker: demand.NewTracker(demand.NewRouter(), clk), Failures: &controller.FailureBackoff{}, Clock: clk}
	runners := []v1alpha1.Runner{runnerAt("ss-00001", v1alpha1.RunnerPending, 1, time.Second)}
	for _, tt := range []struct {
		name                   string
		assigned, gone         int
		wantToCreate, wantBusy int
	}{
		{name: "2 of 3 assigned jobs on runners gone, 1 waiting for the pending runner", assigned: 3, gone: 2, wantToCreate: 0, wantBusy: 2},
		{name: "their jobs completed", assigned: 1, gone: 0, wantToCreate: 0, wantBusy: 0},
		{name: "a new job besides", assigned: 4, gone: 2, wantToCreate: 1, wantBusy: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &state{pool: pool, runners: runners, source: &goneSource{assignedSource{assigned: tt.assigned}, tt.gone}}
			if _, err := r.observe(context.Background(), st); err != nil {
				t.Fatal(err)
			}
			got := struct{ ToCreate, Busy int }{st.desired - st.active(), st.busy}
			want := struct{ ToCreate, Busy int }{tt.wantToCreate, tt.wantBusy}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// answerSource is assignedSource whose count is that of the service's answer number
// answer.
type answerSource struct {
	assignedSource
	answer uint64
}

func (s answerSource) Runners(_ types.NamespacedName, tracked demand.PoolSnapshot, _ []v1alpha1.Runner) demand.PoolSnapshot {
	return tracked.WithRunners(nil, nil, nil, s.answer)
}

// A scale-set pool's demand is the count of the service's last answer, which holds the
// job of every runner alive when it was taken: a runner seen alive since that answer
// that finished (its pod exited, the webhooks said its job completed, its Runner is
// gone) keeps counting busy until the next answer lets go of its job, or the pool would
// make a runner for a job that had one (TestScaleSetPoolScalesFromZeroAndBack: six
// runners for four 100 ms jobs). One retired unused or failed holds nothing.
func TestRunnersFinishedSinceTheAnswerHoldTheirJob(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "ss"},
		Spec: v1alpha1.RunnerPoolSpec{MaxRunners: 100}}
	r := &Reconciler{Tracker: demand.NewTracker(demand.NewRouter(), clk), Failures: &controller.FailureBackoff{}, Clock: clk}
	finished := func(name string) v1alpha1.Runner {
		rn := runnerAt(name, v1alpha1.RunnerIdle, 1, time.Minute)
		rn.DeletionTimestamp = &metav1.Time{Time: clk.Now()} // its pod exited: removed
		rn.Finalizers = []string{v1alpha1.Finalizer}
		return rn
	}
	failed := runnerAt("ss-00004", v1alpha1.RunnerFailed, 4, time.Minute)
	steps := []struct {
		name                   string
		answer                 uint64
		assigned               int
		runners                []v1alpha1.Runner
		wantToCreate, wantBusy int
	}{
		{name: "answer 1: three jobs waiting, three runners pending", answer: 1, assigned: 3,
			runners:      []v1alpha1.Runner{runnerAt("ss-00001", v1alpha1.RunnerPending, 0, time.Second), runnerAt("ss-00002", v1alpha1.RunnerPending, 0, time.Second), runnerAt("ss-00003", v1alpha1.RunnerPending, 0, time.Second), failed},
			wantToCreate: 0},
		{name: "still answer 1: one ran its job and is removed, one is gone, one failed: its job needs a runner", answer: 1, assigned: 3,
			runners:      []v1alpha1.Runner{finished("ss-00001"), runnerAt("ss-00003", v1alpha1.RunnerFailed, 3, time.Second)},
			wantToCreate: 1, wantBusy: 2},
		{name: "answer 2: their jobs done, the failed runner's job still waits", answer: 2, assigned: 1,
			runners:      []v1alpha1.Runner{finished("ss-00001"), runnerAt("ss-00003", v1alpha1.RunnerFailed, 3, time.Second)},
			wantToCreate: 1, wantBusy: 0},
	}
	for _, tt := range steps {
		st := &state{pool: pool, runners: tt.runners, source: &answerSource{assignedSource{assigned: tt.assigned}, tt.answer}}
		if _, err := r.observe(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		got := struct{ ToCreate, Busy int }{st.desired - st.active(), st.busy}
		want := struct{ ToCreate, Busy int }{tt.wantToCreate, tt.wantBusy}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
