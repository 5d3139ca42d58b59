package reliability

import (
	"testing"
	"time"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Two replicas with leader election; GitHub's webhooks reach them through a Service
// that spreads deliveries over both. In the middle of a burst — runners busy, pending
// and not yet created — the leader is killed with SIGKILL, so its Lease is not
// released; more jobs are queued during the takeover. The standby takes over once the
// Lease expires, rebuilds the demand, and every job runs: none lost, no duplicate
// runner, no busy runner killed.
func TestHALeaderKilledMidBurst(t *testing.T) {
	t.Parallel()
	s := scale()
	w := newWorld(t, worldOptions{})
	w.controller("replica-a", nil)
	w.controller("replica-b", nil)
	w.create(w.pool("ha").MaxRunners(int32(100 * s)).Obj())
	leader := w.leader(60 * time.Second)

	n1, n2 := 12*s, 8*s
	w.queue(n1, 6*time.Second)
	// Mid-burst: some jobs running, some runners still to come.
	w.eventually("the burst under way", 60*time.Second, func() bool {
		return w.jobsIn(simgithub.StatusInProgress) >= n1/3
	})
	w.fig.measure("jobs_running_at_kill", float64(w.jobsIn(simgithub.StatusInProgress)))
	w.fig.measure("jobs_queued_at_kill", float64(w.jobsIn(simgithub.StatusQueued)))
	holder := w.leaseHolder()
	createdBefore, _, _ := w.obs.counts()

	killedAt := time.Now()
	leader.kill()
	// Jobs queued during the takeover.
	w.queue(n2, 3*time.Second)

	var tookOverAt time.Time
	w.eventually("the standby to take the Lease", 60*time.Second, func() bool {
		h := w.leaseHolder()
		if h != "" && h != holder {
			tookOverAt = time.Now()
			return true
		}
		return false
	})
	takeover := tookOverAt.Sub(killedAt)
	w.fig.measure("takeover_seconds", round(takeover.Seconds()))
	newLeader := w.leader(30 * time.Second)
	if newLeader == leader && leader.startCount() == 1 {
		t.Errorf("the killed replica still leads")
	}
	w.eventually("a runner created by the new leader", 60*time.Second, func() bool {
		return w.obs.createdSince(killedAt) > 0
	})
	w.fig.measure("kill_to_first_new_runner_seconds", round(time.Since(killedAt).Seconds()))

	w.finish(3 * time.Minute)
	created, _, _ := w.obs.counts()
	w.fig.measure("runners_created_after_kill", float64(created-createdBefore))
	if unused := w.fig.Measures["runners_unused"]; unused != 0 {
		t.Errorf("%v runners never ran a job: pending runners were retired and created again", unused)
	}
	// Lease duration (8 s) + retry period (1 s), with room for a loaded machine.
	if takeover > 20*time.Second {
		t.Errorf("takeover took %s, want at most the Lease duration plus a retry period", takeover)
	}
	w.fig.fault(fault{Kind: "leader SIGKILL mid-burst (2 replicas)", Count: 1, Seconds: round(takeover.Seconds()), Survived: !t.Failed()})
	w.fig.write()
}
