package controller

import (
	"strings"
	"testing"
	"time"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// REST calls per job stay near 1 in JIT mode: ten concurrent jobs cost one
// generate-jitconfig each plus one cached runner-group lookup, and no delete calls (each
// ephemeral runner removed itself). Resync's listing calls are reported separately:
// they follow the resync interval, not the number of jobs.
func TestRESTCallsPerJobStayNearOne(t *testing.T) {
	const jobs = 10
	w := newWorld(t)
	w.create(w.pool("budget").MaxRunners(jobs).Obj())
	w.sim.ResetCallCounts()
	for range jobs {
		if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(50 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}

	// Play kubelet and agent for every runner as it appears.
	started := w.runJobs("budget", jobs)
	w.eventually("nothing left", func() (bool, error) {
		return len(w.runners("budget")) == 0 && len(w.sim.Runners()) == 0, nil
	})
	if len(started) != jobs {
		t.Errorf("%d runners were created for %d jobs", len(started), jobs)
	}

	var runnerCalls, resyncCalls int64
	for route, c := range w.sim.CallCounts() {
		if strings.Contains(route, "/actions/runs") {
			resyncCalls += c.Total
			continue
		}
		runnerCalls += c.Total
		t.Logf("%s: %d", route, c.Total)
	}
	perJob := float64(runnerCalls) / jobs
	t.Logf("REST calls per job (runner endpoints): %.2f; resync listing calls during the test: %d", perJob, resyncCalls)
	if perJob > 1.2 {
		t.Errorf("REST calls per job = %.2f, want at most 1.2 (one JIT config per job plus cached lookups)", perJob)
	}
}
