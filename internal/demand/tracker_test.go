package demand

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// wake is one notification: the pool, and whether its demand rose.
type wake struct {
	Pool PoolKey
	Rose bool
}

func rose(name string) wake { return wake{key(name), true} }
func fell(name string) wake { return wake{key(name), false} }

type recorder struct {
	mu    sync.Mutex
	woken []wake
}

func (r *recorder) notify(k PoolKey, rose bool) {
	r.mu.Lock()
	r.woken = append(r.woken, wake{k, rose})
	r.mu.Unlock()
}

func (r *recorder) take() []wake {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.woken
	r.woken = nil
	return w
}

func newTestTracker(t testing.TB) (*Tracker, *clocktesting.FakeClock, *recorder) {
	t.Helper()
	r := NewRouter()
	r.SetPool(Pool{Key: key("linux"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: []string{"self-hosted", "linux", "x64"}})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tr := NewTracker(r, clk)
	rec := &recorder{}
	tr.SetNotify(rec.notify)
	return tr, clk, rec
}

func ev(a Action, id int64, labels ...string) JobEvent {
	return JobEvent{Action: a, Job: Job{ID: id, Host: "github.com", Owner: "acme", Repo: "api", Labels: labels}}
}

func TestTrackerLifecycle(t *testing.T) {
	tr, clk, rec := newTestTracker(t)
	var waited []time.Duration
	tr.SetPickupObserver(func(_ PoolKey, d time.Duration) { waited = append(waited, d) })

	steps := []struct {
		name       string
		event      JobEvent
		wantQueued int
		wantWoken  []wake
	}{
		{"queued", ev(ActionQueued, 1, "self-hosted", "linux"), 1, []wake{rose("linux")}},
		{"duplicate queued changes nothing", ev(ActionQueued, 1, "self-hosted", "linux"), 1, nil},
		{"second job", ev(ActionQueued, 2, "linux"), 2, []wake{rose("linux")}},
		{"job routed nowhere is not demand", ev(ActionQueued, 3, "windows"), 2, nil},
		{"waiting is not demand", ev(ActionWaiting, 4, "linux"), 2, nil},
		{"in progress leaves the queue", ev(ActionInProgress, 1, "linux"), 1, []wake{fell("linux")}},
		{"late queued after in_progress is ignored", ev(ActionQueued, 1, "linux"), 1, nil},
		{"completed without in_progress leaves the queue", ev(ActionCompleted, 2, "linux"), 0, []wake{fell("linux")}},
		{"completed of an unknown job is remembered only", ev(ActionCompleted, 9, "linux"), 0, nil},
		{"then its replayed queued is ignored", ev(ActionQueued, 9, "linux"), 0, nil},
	}
	for _, s := range steps {
		clk.Step(time.Second)
		tr.Observe(s.event)
		if got := tr.Demand(key("linux")).Queued; got != s.wantQueued {
			t.Fatalf("%s: queued = %d, want %d", s.name, got, s.wantQueued)
		}
		if diff := cmp.Diff(s.wantWoken, rec.take()); diff != "" {
			t.Fatalf("%s: woken pools (-want +got):\n%s", s.name, diff)
		}
	}
	// Job 1 was queued at t=1s and picked up at t=6s.
	if diff := cmp.Diff([]time.Duration{5 * time.Second}, waited); diff != "" {
		t.Errorf("pickup latencies (-want +got):\n%s", diff)
	}
}

func TestTrackerReroutesWhenAPoolAppears(t *testing.T) {
	tr, _, rec := newTestTracker(t)
	tr.Observe(ev(ActionQueued, 1, "gpu"))
	if got := tr.Demand(key("gpu")).Queued; got != 0 {
		t.Fatalf("queued before the pool exists = %d", got)
	}
	rec.take()
	tr.Router().SetPool(Pool{Key: key("gpu"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: []string{"self-hosted", "linux", "x64", "gpu"}})
	tr.Reroute()
	if got := tr.Demand(key("gpu")).Queued; got != 1 {
		t.Errorf("queued after the pool appears = %d, want 1", got)
	}
	if diff := cmp.Diff([]wake{rose("gpu")}, rec.take()); diff != "" {
		t.Errorf("woken (-want +got):\n%s", diff)
	}

	tr.Router().RemovePool(key("gpu"))
	tr.Reroute()
	if got := tr.Demand(key("gpu")).Queued; got != 0 {
		t.Errorf("queued after the pool is removed = %d, want 0", got)
	}
	if diff := cmp.Diff([]wake{fell("gpu")}, rec.take()); diff != "" {
		t.Errorf("woken after the pool is removed (-want +got):\n%s", diff)
	}
}

func TestTrackerPrunesJobsQueuedTooLong(t *testing.T) {
	tr, clk, rec := newTestTracker(t)
	tr.Observe(ev(ActionQueued, 1, "linux"))
	start := clk.Now()
	clk.Step(time.Hour)
	tr.Observe(ev(ActionQueued, 2, "linux"))
	if d := tr.Demand(key("linux")); d.Queued != 2 || !d.OldestQueuedAt.Equal(start) {
		t.Fatalf("demand = %+v, want 2 queued, oldest at %v", d, start)
	}
	rec.take()
	clk.Step(QueuedJobTTL - time.Hour)
	tr.Prune()
	if got := tr.Demand(key("linux")).Queued; got != 1 {
		t.Errorf("after the first job's 24 h, queued = %d, want 1", got)
	}
	if diff := cmp.Diff([]wake{fell("linux")}, rec.take()); diff != "" {
		t.Errorf("woken (-want +got):\n%s", diff)
	}
}

func TestTrackerKnowsWhichRunnerRunsWhichJob(t *testing.T) {
	tr, _, _ := newTestTracker(t)
	var notified []string
	tr.SetRunnerNotify(func(name string) { notified = append(notified, name) })
	tr.Observe(ev(ActionQueued, 1, "linux"))
	start := ev(ActionInProgress, 1, "linux")
	start.Job.RunnerName = "pool-abcde"
	tr.Observe(start)
	if j, ok := tr.RunnerJob("pool-abcde"); !ok || j.ID != 1 {
		t.Fatalf("RunnerJob = %+v, %v; want job 1", j, ok)
	}
	done := ev(ActionCompleted, 1, "linux")
	done.Job.RunnerName = "pool-abcde"
	tr.Observe(done)
	if _, ok := tr.RunnerJob("pool-abcde"); !ok {
		t.Error("the runner's job is forgotten at completion; the runner controller forgets it when the runner goes")
	}
	tr.ForgetRunner("pool-abcde")
	if _, ok := tr.RunnerJob("pool-abcde"); ok {
		t.Error("ForgetRunner did not forget")
	}
	if diff := cmp.Diff([]string{"pool-abcde", "pool-abcde"}, notified); diff != "" {
		t.Errorf("runner notifications (-want +got):\n%s", diff)
	}
}

func TestSyncRepoRecoversLostDeliveries(t *testing.T) {
	tr, clk, rec := newTestTracker(t)
	repo := Repo{Host: "github.com", Owner: "acme", Name: "api"}
	job := func(id int64) Job {
		return Job{ID: id, Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"linux"}}
	}
	// Job 1 arrived by webhook; its in_progress delivery will be lost.
	tr.Observe(ev(ActionQueued, 1, "linux"))
	clk.Step(time.Minute)
	// GitHub lists job 2 (its queued webhook was lost) and no longer job 1.
	listedAt := clk.Now()
	// Job 3 arrives by webhook after the listing was taken: it must not be dropped.
	clk.Step(time.Second)
	tr.Observe(ev(ActionQueued, 3, "linux"))
	rec.take()

	added, dropped := tr.SyncRepo(repo, []Job{job(2)}, nil, listedAt)
	if added != 1 || dropped != 1 {
		t.Errorf("SyncRepo added %d, dropped %d; want 1, 1", added, dropped)
	}
	var ids []int64
	for _, j := range tr.QueuedJobs(key("linux")) {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]int64{2, 3}, ids); diff != "" {
		t.Errorf("queued jobs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Repo{repo}, tr.ActiveRepos()); diff != "" {
		t.Errorf("active repos (-want +got):\n%s", diff)
	}
	if len(rec.take()) == 0 {
		t.Error("SyncRepo changed demand without waking the pool")
	}
	// A second identical sync changes nothing.
	if added, dropped := tr.SyncRepo(repo, []Job{job(2)}, nil, listedAt); added != 0 || dropped != 0 {
		t.Errorf("repeated SyncRepo added %d, dropped %d; want 0, 0", added, dropped)
	}
}

// A job of a run whose jobs resync did not list stays queued: its absence from the list
// says nothing. KnownRuns gives each run with when the Tracker first heard of it.
func TestTrackerSyncRepoLeavesUnlistedRuns(t *testing.T) {
	tr, clk, _ := newTestTracker(t)
	repo := Repo{Host: "github.com", Owner: "acme", Name: "api"}
	inRun := func(a Action, id, run int64) JobEvent {
		e := ev(a, id, "linux")
		e.Job.RunID = run
		return e
	}
	first := clk.Now()
	tr.Observe(inRun(ActionQueued, 1, 10))
	clk.Step(time.Second)
	tr.Observe(inRun(ActionQueued, 2, 10))
	tr.Observe(inRun(ActionInProgress, 3, 30))
	clk.Step(time.Minute)
	want := map[int64]time.Time{10: first, 30: first.Add(time.Second)}
	if diff := cmp.Diff(want, tr.KnownRuns(repo)); diff != "" {
		t.Errorf("KnownRuns (-want +got):\n%s", diff)
	}
	if added, dropped := tr.SyncRepo(repo, nil, map[int64]bool{10: true}, clk.Now()); added != 0 || dropped != 0 {
		t.Errorf("SyncRepo with run 10 unlisted added %d, dropped %d; want 0, 0", added, dropped)
	}
	if got := len(tr.QueuedJobs(key("linux"))); got != 2 {
		t.Errorf("%d jobs queued after a sync that did not list their run, want 2", got)
	}
	if _, dropped := tr.SyncRepo(repo, nil, nil, clk.Now()); dropped != 2 {
		t.Errorf("SyncRepo with run 10 listed and empty dropped %d, want 2", dropped)
	}
}
