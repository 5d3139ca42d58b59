package github

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

func TestLostRunnerFailsItsRunningJob(t *testing.T) {
	const timeout = 30 * time.Second
	w := newWorld(t, worldOpts{opts: Options{RunnerLostTimeout: timeout}})
	cfg := w.addRunner(t, runnerSpec{scope: "acme", name: "a", labels: []string{"x"}})
	c := runnerapi.NewClient(cfg, nil)
	job := must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"x"}, Duration: Duration(time.Hour)}))
	if j, err := c.NextJob(t.Context(), 0); err != nil || j == nil || j.ID != job.ID {
		t.Fatalf("NextJob = %+v, %v; want job %d", j, err, job.ID)
	}
	if err := c.StartJob(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}

	// Renewed within the timeout: alive.
	w.clk.Step(20 * time.Second)
	if err := c.RenewJob(t.Context(), job.ID); err != nil {
		t.Fatalf("renewing the running job: %v", err)
	}
	w.clk.Step(20 * time.Second)
	w.sim.loseSilentRunners(timeout)
	if got, _ := w.sim.Job(job.ID); got.Status != StatusInProgress {
		t.Fatalf("a renewed job is %s, want in_progress", got.Status)
	}

	// Silent for the timeout: the runner is lost and its job fails.
	w.clk.Step(11 * time.Second)
	w.sim.loseSilentRunners(timeout)
	got, _ := w.sim.Job(job.ID)
	if got.Status != StatusCompleted || got.Conclusion != ConclusionFailure {
		t.Fatalf("job of a lost runner is %s/%s, want completed/failure", got.Status, got.Conclusion)
	}
	var lost bool
	for _, e := range got.Timeline {
		lost = lost || (e.Type == EventRunnerLost && e.RunnerID == cfg.RunnerID)
	}
	if !lost {
		t.Errorf("timeline %+v lacks a %s event", got.Timeline, EventRunnerLost)
	}
	if err := c.RenewJob(t.Context(), job.ID); !errors.Is(err, runnerapi.ErrRunnerRemoved) {
		t.Errorf("renewing after the runner was lost: %v, want ErrRunnerRemoved (an ephemeral runner is removed with its job)", err)
	}
}

func TestLostRunnerGivesBackAnAssignedJob(t *testing.T) {
	const timeout = 30 * time.Second
	w := newWorld(t, worldOpts{opts: Options{RunnerLostTimeout: timeout}})
	cfg := w.addRunner(t, runnerSpec{scope: "acme", name: "a", labels: []string{"x"}})
	job := must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"x"}}))
	if got, _ := w.sim.Job(job.ID); got.RunnerID != cfg.RunnerID {
		t.Fatalf("job not assigned to the idle runner: %+v", got)
	}
	w.clk.Step(timeout)
	w.sim.loseSilentRunners(timeout)
	got, _ := w.sim.Job(job.ID)
	if got.Status != StatusQueued || got.RunnerID != 0 {
		t.Errorf("job of a runner lost before starting it: status %s, runner %d; want queued, unassigned", got.Status, got.RunnerID)
	}
	for _, r := range w.sim.Runners() {
		if r.ID == cfg.RunnerID && r.Online {
			t.Error("the silent runner is still online")
		}
	}
}

func TestLongPollKeepsRunnerAlive(t *testing.T) {
	const timeout = 30 * time.Second
	w := newWorld(t, worldOpts{opts: Options{RunnerLostTimeout: timeout}})
	cfg := w.addRunner(t, runnerSpec{scope: "acme", name: "a", labels: []string{"x"}})
	c := runnerapi.NewClient(cfg, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _, _ = c.NextJob(ctx, runnerapi.MaxWait) }()
	defer func() { cancel(); <-done }()
	polling := func() bool {
		w.sim.lock()
		defer w.sim.unlock()
		for _, r := range w.sim.st.runners {
			if r.id == cfg.RunnerID {
				return r.polls > 0
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for !polling() {
		if time.Now().After(deadline) {
			t.Fatal("the long poll never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w.clk.Step(timeout + time.Second) // past the timeout, still under the poll's wait
	w.sim.loseSilentRunners(timeout)
	for _, r := range w.sim.Runners() {
		if r.ID == cfg.RunnerID && !r.Online {
			t.Error("a runner in a long poll was taken offline")
		}
	}
}

func TestRunnersStayOnlineWithoutLostTimeout(t *testing.T) {
	w := newWorld(t, worldOpts{})
	cfg := w.addRunner(t, runnerSpec{scope: "acme", name: "a", labels: []string{"x"}})
	w.clk.Step(24 * time.Hour)
	for _, r := range w.sim.Runners() {
		if r.ID == cfg.RunnerID && !r.Online {
			t.Error("runner went offline with RunnerLostTimeout unset")
		}
	}
}
