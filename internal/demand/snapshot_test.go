package demand

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A snapshot's repositories follow the jobs the Tracker remembers for the pool: a job
// routed to another pool moves its repository there, and a repository goes once its
// last job is forgotten.
func TestSnapshotReposFollowRoutingAndPruning(t *testing.T) {
	tr, clk, _ := newTestTracker(t)
	start := clk.Now()
	api := Repo{Host: "github.com", Owner: "acme", Name: "api"}
	repos := func(pool string) map[Repo]time.Time { return tr.Snapshot(key(pool), nil).Repos }

	tr.Observe(ev(ActionQueued, 1, "self-hosted", "linux", "gpu")) // matches no pool yet
	tr.Observe(ev(ActionQueued, 2, "self-hosted", "linux"))
	if diff := cmp.Diff(map[Repo]time.Time{api: start}, repos("linux")); diff != "" {
		t.Errorf("linux after two jobs, one routed (-want +got):\n%s", diff)
	}

	// Job 2 starts; then a gpu pool appears: job 1, still queued, goes there.
	tr.Observe(ev(ActionInProgress, 2))
	clk.Step(time.Minute)
	tr.Router().SetPool(Pool{Key: key("gpu"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: []string{"self-hosted", "linux", "x64", "gpu"}})
	tr.Reroute()
	if diff := cmp.Diff(map[Repo]time.Time{api: start}, repos("gpu")); diff != "" {
		t.Errorf("gpu after the reroute (-want +got):\n%s", diff)
	}

	// Job 2 finishes: its repository's time moves; the tombstone keeps it.
	clk.Step(time.Minute)
	tr.Observe(ev(ActionCompleted, 2))
	if diff := cmp.Diff(map[Repo]time.Time{api: start.Add(2 * time.Minute)}, repos("linux")); diff != "" {
		t.Errorf("linux after its job finished (-want +got):\n%s", diff)
	}

	// Past the tombstone's time job 2 is forgotten, and linux has no repository left;
	// job 1, still queued, keeps gpu's.
	clk.Step(tombstoneTTL + time.Second)
	tr.Prune()
	if got := repos("linux"); len(got) != 0 {
		t.Errorf("linux after its only job was forgotten: %v, want none", got)
	}
	if got := repos("gpu"); len(got) != 1 {
		t.Errorf("gpu with its job still queued: %v, want api", got)
	}
	clk.Step(QueuedJobTTL)
	tr.Prune()
	if got := repos("gpu"); len(got) != 0 {
		t.Errorf("gpu after its queued job expired: %v, want none", got)
	}
}

// A snapshot says which of the runners it was asked about run a job, and only those.
func TestSnapshotRunning(t *testing.T) {
	tr, _, _ := newTestTracker(t)
	started := func(id int64, runner string) JobEvent {
		e := ev(ActionInProgress, id)
		e.Job.RunnerName = runner
		return e
	}
	tr.Observe(ev(ActionQueued, 1, "self-hosted", "linux"))
	tr.Observe(started(1, "linux-a"))
	tr.Observe(started(2, "other-b"))

	s := tr.Snapshot(key("linux"), slices.Values([]string{"linux-a", "linux-c"}))
	if !s.Running("linux-a") || s.Running("linux-c") || s.Running("other-b") {
		t.Errorf("Running: linux-a %t, linux-c %t, other-b %t; want true, false, false (other-b was not asked about)",
			s.Running("linux-a"), s.Running("linux-c"), s.Running("other-b"))
	}
	if s.Demand.Queued != 0 {
		t.Errorf("Demand.Queued = %d after the job started, want 0", s.Demand.Queued)
	}
	tr.ForgetRunner("linux-a")
	if tr.Snapshot(key("linux"), slices.Values([]string{"linux-a"})).Running("linux-a") {
		t.Error("a forgotten runner still runs a job")
	}
}

// A runner whose job GitHub said completed is Done in a snapshot, and Finished: it left
// GitHub on its own, whatever its pod says yet.
func TestSnapshotDone(t *testing.T) {
	tr, _, _ := newTestTracker(t)
	event := func(a Action, id int64, runner string) JobEvent {
		e := ev(a, id)
		e.Job.RunnerName = runner
		return e
	}
	tr.Observe(event(ActionInProgress, 1, "linux-a"))
	tr.Observe(event(ActionInProgress, 2, "linux-b"))
	tr.Observe(event(ActionCompleted, 1, "linux-a"))

	s := tr.Snapshot(key("linux"), slices.Values([]string{"linux-a", "linux-b", "linux-c"}))
	got := map[string][3]bool{}
	for _, r := range []string{"linux-a", "linux-b", "linux-c"} {
		got[r] = [3]bool{s.Running(r), s.Done(r), tr.Finished(r)}
	}
	want := map[string][3]bool{"linux-a": {true, true, true}, "linux-b": {true, false, false}, "linux-c": {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("[Running, Done, Finished] (-want +got):\n%s", diff)
	}
}

// A demand source's word on the runners it names wins over the Tracker's: one it says
// still runs its job is not done, whatever a webhook said; the Tracker's word stays for
// the runners it does not name; the snapshot it returns is a new one.
func TestSnapshotWithRunners(t *testing.T) {
	tr, _, _ := newTestTracker(t)
	for i, r := range []string{"linux-a", "linux-b"} {
		e := ev(ActionInProgress, int64(i+1), "linux")
		e.Job.RunnerName = r
		tr.Observe(e)
		e.Action = ActionCompleted // the webhooks: both jobs completed
		tr.Observe(e)
	}
	names := []string{"linux-a", "linux-b", "linux-c", "linux-d"}
	tracked := tr.Snapshot(key("linux"), slices.Values(names))
	s := tracked.WithRunners([]string{"linux-a", "linux-c"}, []string{"linux-d"}, []string{"linux-gone"}, 7)
	got := map[string][2]bool{}
	for _, r := range names {
		got[r] = [2]bool{s.Running(r), s.Done(r)}
	}
	want := map[string][2]bool{
		"linux-a": {true, false}, // the source still counts its job
		"linux-b": {true, true},  // the source does not name it: the webhooks' word
		"linux-c": {true, false},
		"linux-d": {true, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("[Running, Done] (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"linux-gone"}, s.Elsewhere); diff != "" || s.Answer != 7 {
		t.Errorf("elsewhere (-want +got):\n%s; answer %d, want 7", diff, s.Answer)
	}
	if !tracked.Done("linux-a") || tracked.Answer != 0 {
		t.Error("the Tracker's snapshot was changed")
	}
}

// BenchmarkSnapshot is one pool reconcile's question to a Tracker that remembers two
// hours of a pool taking 5 jobs a second (36,000 finished jobs over 20 repositories) and
// 100 jobs in progress, for a pool of 500 runners.
func BenchmarkSnapshot(b *testing.B) {
	tr, _, _ := newTestTracker(b)
	for id := int64(1); id <= 36_000; id++ {
		e := ev(ActionQueued, id, "self-hosted", "linux")
		e.Job.Repo = fmt.Sprintf("repo-%d", id%20)
		tr.Observe(e)
		e.Action = ActionCompleted
		tr.Observe(e)
	}
	runners := make([]string, 500)
	for i := range runners {
		runners[i] = fmt.Sprintf("linux-%05d", i)
		if i < 100 {
			tr.Observe(JobEvent{Action: ActionInProgress, Job: Job{ID: int64(100_000 + i), RunnerName: runners[i]}})
		}
	}
	b.ResetTimer()
	for b.Loop() {
		s := tr.Snapshot(key("linux"), slices.Values(runners))
		if len(s.Repos) != 20 || !s.Running(runners[0]) {
			b.Fatalf("snapshot: %d repositories, %s running %t", len(s.Repos), runners[0], s.Running(runners[0]))
		}
	}
}
