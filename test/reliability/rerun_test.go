package reliability

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Jobs killed by the infrastructure are re-run exactly once, whatever happens to the
// controller meanwhile. Two replicas; workflow runs of two jobs each, on a pool that
// re-runs killed jobs: a short job whose runner is preempted mid-job, and a long one
// that keeps the run going. While the killed jobs wait for their runs to complete
// (GitHub re-runs a job only then), the leader is killed with SIGKILL. After the
// takeover each killed job is re-run once — one new attempt per run, naming exactly the
// killed job, made after the run completed — and every run ends green.
func TestRerunSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	s := scale()
	w := newWorld(t, worldOptions{})
	w.controller("replica-a", nil)
	w.controller("replica-b", nil)
	w.create(w.pool("rerun").MaxRunners(int32(20 * s)).Rerun(v1alpha1.RerunInfrastructureFailures).Obj())
	leader := w.leader(60 * time.Second)

	// Each run: "victim" (killed within its first seconds) and "keeper", which runs long
	// enough for the killed job's lease to run out and the leader to be replaced.
	n := 3 * s
	runs := map[int64]bool{}
	for i := range n {
		run, err := w.sim.QueueRun(simgithub.RunSpec{Repo: org + "/" + repos[i%len(repos)], Workflow: "ci", Jobs: []simgithub.JobSpec{
			{Name: "victim", Labels: []string{"self-hosted", "linux"}, Duration: simgithub.Duration(20 * time.Second)},
			{Name: "keeper", Labels: []string{"self-hosted", "linux"}, Duration: simgithub.Duration(45 * time.Second)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		runs[run.ID] = true
	}
	w.fig.addJobs(2 * n)

	// Every victim started: preempt its runner (the scheduler's disruption, which no
	// budget stops), killing the job.
	victims := map[int64]string{} // job → runner
	w.eventually("every victim job started", time.Minute, func() bool {
		for _, j := range w.sim.Jobs() {
			if j.Name == "victim" && j.RunAttempt == 1 && j.Status == simgithub.StatusInProgress && victims[j.ID] == "" {
				victims[j.ID] = j.RunnerName
			}
		}
		return len(victims) == n
	})
	killedAt := time.Now()
	for _, rn := range victims {
		w.fault(rn, "preempted mid-job")
		w.preempt(rn)
	}
	w.eventually("the killed jobs' records Waiting", time.Minute, func() bool {
		waiting := 0
		for _, rn := range victims {
			r := &v1alpha1.Runner{}
			if err := cp.c.Get(t.Context(), client.ObjectKey{Namespace: w.ns, Name: rn}, r); err == nil && r.Status.Rerun.Pending() {
				waiting++
			}
		}
		return waiting == n
	})

	// The leader dies while every re-run waits on a run still in progress.
	for id := range runs {
		if r, _ := w.sim.Workflows().Run(id); r.Status == simgithub.StatusCompleted {
			t.Fatalf("run %d completed before the leader was killed: the test's timing does not hold on this machine", id)
		}
	}
	holder := w.leaseHolder()
	leader.kill()
	w.eventually("the standby to take the Lease", time.Minute, func() bool {
		h := w.leaseHolder()
		return h != "" && h != holder
	})
	w.fig.measure("kill_to_takeover_seconds", round(time.Since(killedAt).Seconds()))

	// Every run ends green, each killed job re-run once, after its run completed.
	w.eventually("every run re-run and green", 4*time.Minute, func() bool {
		for id := range runs {
			r, _ := w.sim.Workflows().Run(id)
			if r.Status != simgithub.StatusCompleted || r.Conclusion != "success" {
				return false
			}
		}
		return true
	})
	// Longer than the rerun controller's next look at a run: a second re-run would show.
	time.Sleep(20 * time.Second)
	rerun, twice := 0, 0
	var killToRerun []float64
	for id := range runs {
		r, _ := w.sim.Workflows().Run(id)
		if len(r.Attempts) != 2 {
			twice++
			t.Errorf("run %d has %d attempts, want 2 (the first and one re-run): %+v", id, len(r.Attempts), r.Attempts)
			continue
		}
		first, second := r.Attempts[0], r.Attempts[1]
		if first.DoneAt == nil || second.StartedAt.Before(*first.DoneAt) {
			t.Errorf("run %d was re-run at %s, before it completed (%v)", id, second.StartedAt, first.DoneAt)
		}
		if len(second.Requested) != 1 || victims[second.Requested[0]] == "" {
			t.Errorf("run %d's re-run named %v, want exactly its killed job", id, second.Requested)
			continue
		}
		rerun++
		killToRerun = append(killToRerun, second.StartedAt.Sub(killedAt).Seconds())
	}
	for job, rn := range victims {
		r := &v1alpha1.Runner{}
		if err := cp.c.Get(t.Context(), client.ObjectKey{Namespace: w.ns, Name: rn}, r); err != nil {
			continue // expired once Done: the simulator's attempts above are the proof
		}
		if r.Status.Rerun == nil || r.Status.Rerun.State != v1alpha1.RerunDone {
			t.Errorf("runner %s (job %d): record %+v, want Done", rn, job, r.Status.Rerun)
		}
	}
	slices.Sort(killToRerun)
	w.fig.measure("jobs_killed", float64(len(victims)))
	w.fig.measure("jobs_rerun", float64(rerun))
	w.fig.measure("jobs_rerun_twice", float64(twice))
	if len(killToRerun) > 0 {
		w.fig.measure("kill_to_rerun_max_seconds", round(killToRerun[len(killToRerun)-1]))
	}
	w.finish(3 * time.Minute)
	w.fig.fault(fault{Kind: "leader SIGKILL while killed jobs wait to be re-run (2 replicas)", Count: 1, Survived: !t.Failed(),
		Detail: fmt.Sprintf("%d jobs killed, %d re-run once after the takeover, %d re-run twice", len(victims), rerun, twice)})
	w.fig.write()
}
