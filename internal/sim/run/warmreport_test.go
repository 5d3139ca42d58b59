package run

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// The warm report leaves out the jobs queued in the warm-up and the idle time before
// its end, and counts the rest.
func TestWarmReportLeavesOutTheWarmUp(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	ptr := func(t time.Time) *time.Time { return &t }
	sc := Scenario{Steady: 50 * time.Second, Warm: &v1alpha1.WarmSpec{}} // warm-up: 10 s
	jobs := []simgithub.Job{
		{ID: 1, QueuedAt: at(1), StartedAt: ptr(at(4))},     // in the warm-up: waited 3 s
		{ID: 2, QueuedAt: at(20), StartedAt: ptr(at(20.1))}, // found a warm runner
		{ID: 3, QueuedAt: at(30), StartedAt: ptr(at(30.5))},
	}
	events := []agent.Event{
		{Kind: agent.EventRunning, Pod: "a", At: at(2)},
		{Kind: agent.EventJobStarted, Pod: "a", At: at(20.1)}, // idle 2 s → 20.1 s: 10.1 s after the warm-up
		{Kind: agent.EventRunning, Pod: "b", At: at(25)},
		{Kind: agent.EventJobStarted, Pod: "b", At: at(30.5)}, // idle 5.5 s
		{Kind: agent.EventRunning, Pod: "c", At: at(3)},
		{Kind: agent.EventExited, Pod: "c", At: at(8)}, // idle only in the warm-up
	}
	w := warmReport(sc, jobs, events, start)
	if w == nil {
		t.Fatal("no warm report for a warm steady scenario")
	}
	if w.WarmUpSeconds != 10 || w.Jobs != 2 || w.PickupSeconds.Max != 0.5 || w.IdleRunnerSecondsPerJob != 7.8 {
		t.Errorf("warm report = %+v; want warm-up 10 s, 2 jobs, pickup max 0.5 s, (10.1+5.5)/2 = 7.8 idle runner-seconds per job", w)
	}
	if all := idleRunnerSeconds(events, time.Time{}); all != 18.1+5.5+5 {
		t.Errorf("idle runner-seconds of the whole run = %v, want 28.6", all)
	}
	if warmReport(Scenario{Steady: 50 * time.Second}, jobs, events, start) != nil {
		t.Error("a warm report for a pool without spec.warm")
	}
}
