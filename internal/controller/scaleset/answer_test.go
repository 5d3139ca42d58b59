package scaleset

import (
	"sync"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// sendJobs answers the long poll with one message: the runners' JobStarted and
// JobCompleted messages and the statistics of the same moment.
func (s *fakeSession) sendJobs(id, assigned, running int, started, completed []string) {
	m := &scaleset.RunnerScaleSetMessage{MessageID: id,
		Statistics: &scaleset.RunnerScaleSetStatistic{TotalAssignedJobs: assigned, TotalRunningJobs: running}}
	for i, name := range started {
		m.JobStartedMessages = append(m.JobStartedMessages, &scaleset.JobStarted{RunnerName: name, RunnerID: i + 1,
			JobMessageBase: scaleset.JobMessageBase{JobID: jobIDOf(name), RunnerRequestID: int64(i + 1)}})
	}
	for i, name := range completed {
		m.JobCompletedMessages = append(m.JobCompletedMessages, &scaleset.JobCompleted{RunnerName: name, RunnerID: i + 1, Result: "succeeded",
			JobMessageBase: scaleset.JobMessageBase{JobID: jobIDOf(name), RunnerRequestID: int64(i + 1)}})
	}
	s.messages <- m
}

func jobIDOf(runner string) string { return "1" + runner[len(runner)-3:] }

// The pool's word on a runner's job and the service's count of assigned jobs come from
// one answer, so a pool reconcile never sees one without the other: a runner whose job
// completed while the count still has the job would leave the pool one runner short of
// the count, and it would make one more (burst-scaleset: runners created and retired
// unused as the burst's jobs completed).
func TestListenerTellsARunnersJobWithTheCountOfTheSameAnswer(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").MaxRunners(10).Obj()
	w := newListenerWorld(t, pool, func(f *fakeService) { f.stats = scaleset.RunnerScaleSetStatistic{TotalAssignedJobs: 2} })
	type seen struct {
		Runner   string
		Assigned int
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	// The Runner controller hears of each runner that started or finished a job: what
	// does the pool's count say at that moment?
	w.m.Tracker.SetRunnerNotify(func(name string) {
		n, _ := w.m.Assigned(w.key)
		mu.Lock()
		got = append(got, seen{name, n})
		mu.Unlock()
	})
	w.m.Ensure(pool, 0)
	w.waitSession(t, v1alpha1.SessionActive)
	w.waitAssigned(t, 2)
	sess := w.svc.session()
	sess.sendJobs(1, 2, 2, []string{"linux-aaa", "linux-bbb"}, nil)
	w.waitAssigned(t, 2)
	sess.sendJobs(2, 1, 1, nil, []string{"linux-aaa"})
	w.waitAssigned(t, 1)
	testutil.Poll(t, "the runners told", 5*time.Second, 5*time.Millisecond, func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 3, nil
	}, nil)
	want := []seen{{"linux-aaa", 2}, {"linux-bbb", 2}, {"linux-aaa", 1}}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("assigned jobs as each runner's job was told (-want +got):\n%s", diff)
	}
}

// A runner whose pod exited after its job, its Runner gone already, still holds its job
// until the answer that says the job completed: the count of assigned jobs still has
// the job, and counting the runner nowhere would leave the pool one runner short of the
// count — it would make one runner too many. A runner the answers say runs a job is
// counted so only up to the service's count of running jobs (a JobCompleted never
// heard holds no slot). The jobs waiting are the count's assigned jobs less the pool's
// busy runners, plus the answer's lag: runners its job messages say run a job that its
// count of running jobs no longer has. An answer's counts may be ahead of its job
// messages, and such a runner must not take the place of a waiting job's runner.
func TestSourceCountsRunnersGoneBeforeTheirJobCompleted(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").MaxRunners(10).Obj()
	w := newListenerWorld(t, pool, nil)
	w.m.Ensure(pool, 0)
	w.waitSession(t, v1alpha1.SessionActive)
	src := Source{Manager: w.m}
	sess := w.svc.session()
	runner := func(name string, phase v1alpha1.RunnerPhase) v1alpha1.Runner {
		return v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name}, Status: v1alpha1.RunnerStatus{Phase: phase}}
	}
	// aaa's Runner is gone: its pod exited, its JobCompleted not heard yet.
	runners := []v1alpha1.Runner{runner("linux-bbb", v1alpha1.RunnerBusy), runner("linux-ccc", v1alpha1.RunnerPending)}
	type view struct {
		Running, Done []string
		Elsewhere     int
		Queued        int
	}
	look := func() view {
		snap := src.Runners(w.key, demand.PoolSnapshot{}, runners)
		var v view
		for _, rn := range runners {
			if snap.Done(rn.Name) {
				v.Done = append(v.Done, rn.Name)
			} else if snap.Running(rn.Name) {
				v.Running = append(v.Running, rn.Name)
			}
		}
		v.Elsewhere = len(snap.Elsewhere)
		d, _ := src.Demand(w.key, snap, len(v.Running)+v.Elsewhere)
		v.Queued = d.Queued
		return v
	}
	for _, step := range []struct {
		name               string
		assigned, running  int
		started, completed []string
		want               view
	}{
		{name: "aaa and bbb started, a third job waits", assigned: 3, running: 2, started: []string{"linux-aaa", "linux-bbb"},
			want: view{Running: []string{"linux-bbb"}, Elsewhere: 1, Queued: 1}},
		{name: "aaa's job completed", assigned: 2, running: 1, completed: []string{"linux-aaa"},
			want: view{Running: []string{"linux-bbb"}, Elsewhere: 0, Queued: 1}},
		{name: "ccc's job started, its JobStarted still to come: ccc counts for it as pending", assigned: 2, running: 2,
			want: view{Running: []string{"linux-bbb"}, Elsewhere: 0, Queued: 1}},
		{name: "the service counts no running job: a JobCompleted lost holds nothing", assigned: 1, running: 0, started: []string{"linux-ddd"},
			want: view{Running: []string{"linux-bbb"}, Elsewhere: 0, Queued: 1}},
	} {
		n := w.svc.Count("DeleteMessage")
		sess.sendJobs(n+1, step.assigned, step.running, step.started, step.completed)
		testutil.Poll(t, step.name, 5*time.Second, 5*time.Millisecond, func() (bool, error) {
			got, ok := w.m.Assigned(w.key)
			return ok && got == step.assigned && w.svc.Count("DeleteMessage") == n+1, nil
		}, nil)
		if diff := cmp.Diff(step.want, look()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step.name, diff)
		}
	}
}

// The organization's webhooks name a scale-set pool's runners too, and say a job
// completed before the service's count lets go of it: the listener's word wins for the
// runners it knows, so a runner whose JobCompleted the listener has not heard still
// holds its job (the count still has it); the webhooks' word stays for runners the
// listener does not know.
func TestSourceWordWinsOverTheWebhooks(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").MaxRunners(10).Obj()
	w := newListenerWorld(t, pool, nil)
	w.m.Ensure(pool, 0)
	w.waitSession(t, v1alpha1.SessionActive)
	src := Source{Manager: w.m}
	sess := w.svc.session()
	sess.sendJobs(1, 1, 1, []string{"linux-aaa"}, nil)
	w.waitAssigned(t, 1)
	tracker := demand.NewTracker(demand.NewRouter(), w.m.Clock)
	for _, name := range []string{"linux-aaa", "linux-zzz"} {
		job := demand.Job{ID: 900 + int64(len(name)) + int64(name[len(name)-1]), RunnerName: name}
		tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: job})
		tracker.Observe(demand.JobEvent{Action: demand.ActionCompleted, Job: job}) // the webhook, early
	}
	runners := []v1alpha1.Runner{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-aaa"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-zzz"}},
	}
	doneOf := func() map[string]bool {
		snap := src.Runners(w.key, tracker.Snapshot(w.key, func(yield func(string) bool) {
			for _, rn := range runners {
				if !yield(rn.Name) {
					return
				}
			}
		}), runners)
		return map[string]bool{"linux-aaa": snap.Done("linux-aaa"), "linux-zzz": snap.Done("linux-zzz")}
	}
	if diff := cmp.Diff(map[string]bool{"linux-aaa": false, "linux-zzz": true}, doneOf()); diff != "" {
		t.Errorf("done before the listener heard aaa's JobCompleted (-want +got):\n%s", diff)
	}
	sess.sendJobs(2, 0, 0, nil, []string{"linux-aaa"})
	w.waitAssigned(t, 0)
	if diff := cmp.Diff(map[string]bool{"linux-aaa": true, "linux-zzz": true}, doneOf()); diff != "" {
		t.Errorf("done after it (-want +got):\n%s", diff)
	}
}
