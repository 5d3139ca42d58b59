package run

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
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

// steady-warm-history's pool starts with its past day in status, waits for the idle
// runners it asks for, and is turned report-only once its jobs are done.
func TestWarmHistorySeedsTheStatusAndStopsTheWarmPool(t *testing.T) {
	sc := Scenarios["steady-warm-history"]
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	pool := newPool(sc, "http://sim", "linux")
	c := fake.NewClientBuilder().WithScheme(manager.Scheme()).WithObjects(pool).WithStatusSubresource(pool).Build()
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 14, 30, 0, 0, time.UTC)
	if err := seedWarmHistory(ctx, c, []string{"linux"}, *sc.WarmHistory, now); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.RunnerPool{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil {
		t.Fatal(err)
	}
	p := got.Status.Warm.Predictive
	if p == nil || len(p.HourOfDay) != 24 || p.HourOfDay[14] != "300.00" || p.HourOfDay[15] != "0.00" || p.StartSeconds != "1.20" {
		t.Fatalf("seeded status.warm.predictive = %+v; want 300.00 at 14:00, 0.00 elsewhere, start 1.20", p)
	}

	// Not warm yet: the wait ends at its timeout.
	var out bytes.Buffer
	waitWarm(ctx, c, []string{"linux"}, time.Second, &out)
	if !strings.Contains(out.String(), "not all idle") {
		t.Errorf("wait with no idle runner said %q", out.String())
	}
	got.Status.Warm.MinIdle, got.Status.IdleRunners = 13, 13
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	waitWarm(ctx, c, []string{"linux"}, time.Second, &out)
	if !strings.Contains(out.String(), "asks for 13 idle runners: all idle") {
		t.Errorf("wait with 13 of 13 idle said %q", out.String())
	}

	if err := stopWarm(ctx, c, []string{"linux"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Warm.Predictive.MaxIdle != 0 {
		t.Errorf("maxIdle after stopWarm = %d, want 0", got.Spec.Warm.Predictive.MaxIdle)
	}
}
