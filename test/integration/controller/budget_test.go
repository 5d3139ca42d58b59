package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
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
	started := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	w.eventually("every job to run", func() (bool, error) {
		for _, rn := range w.runners("budget") {
			if started[rn.Name] || rn.Status.PodName == "" || rn.Status.GitHubRunnerID == 0 {
				continue
			}
			started[rn.Name] = true
			w.setPodRunning(rn.Name)
			secret := &corev1.Secret{}
			if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, secret); err != nil {
				return false, err
			}
			agent, err := runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), nil)
			if err != nil {
				return false, err
			}
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if _, err := agent.Run(ctx, runnerapi.RunOptions{PollWait: 2 * time.Second}); err != nil {
					errs <- err
				}
			}(rn.Name)
		}
		done := 0
		for _, j := range w.sim.Jobs() {
			if j.Status == "completed" {
				done++
			}
		}
		return done == jobs, nil
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("agent: %v", err)
	}
	for name := range started {
		w.setPodExitedUnlessGone(name, 0)
	}
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
