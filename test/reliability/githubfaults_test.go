package reliability

import (
	"fmt"
	"math"
	"testing"
	"time"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// GitHub misbehaves in turn — every REST call fails with 502, every call times out,
// the primary rate limit is exhausted, the secondary rate limit answers 403 with
// Retry-After, every answer is slow — each while a burst of jobs waits. Through each
// fault the controller keeps its desired state (no runner retired or failed for it),
// backs off instead of hammering GitHub (calls per minute are measured and bounded),
// and once GitHub is well again it catches up: every job runs.
func TestGitHubFaults(t *testing.T) {
	t.Parallel()
	s := scale()
	w := newWorld(t, worldOptions{})
	const githubTimeout = 2 * time.Second
	w.controller("replica-0", func(o *procOptions) { o.githubTimeout = githubTimeout })
	w.create(w.pool("gh").MaxRunners(int32(100 * s)).Obj())
	w.leader(60 * time.Second)

	// Warm up: the runner group is looked up and cached, repositories become active.
	w.queue(len(repos), time.Second)
	w.eventually("the warm-up jobs", 60*time.Second, w.jobsDone)

	faultFor := time.Duration(6*s) * time.Second
	jobs := 4 * s
	phases := []struct {
		name  string
		apply func()
		clear func()
		// bound is the most REST calls the phase may cost while the fault lasts.
		bound func(elapsed time.Duration) int
	}{
		{
			name: "5xx burst (every REST call answers 502)",
			apply: func() {
				w.sim.SetFaults(simgithub.Faults{Seed: 1, Endpoints: map[string]simgithub.EndpointFaults{"*": {ErrorRate: 1, ErrorStatus: 502}}})
			},
			clear: func() { w.sim.SetFaults(simgithub.Faults{}) },
			bound: func(d time.Duration) int { return backoffBound(jobs, d) + resyncBound(d) },
		},
		{
			name: fmt.Sprintf("timeouts (every REST call takes 3s, --github-timeout %s)", githubTimeout),
			apply: func() {
				w.sim.SetFaults(simgithub.Faults{Endpoints: map[string]simgithub.EndpointFaults{"*": {Latency: simgithub.Duration(3 * time.Second)}}})
			},
			clear: func() { w.sim.SetFaults(simgithub.Faults{}) },
			bound: func(d time.Duration) int { return backoffBound(jobs, d) + resyncBound(d) },
		},
		{
			name: "primary rate limit exhausted (3 calls per window)",
			apply: func() {
				w.sim.SetRateLimits(simgithub.RateLimits{PAT: 3, Window: simgithub.Duration(faultFor), Secondary: simgithub.SecondaryLimits{Disabled: true}})
			},
			clear: func() { w.sim.SetRateLimits(simgithub.RateLimits{Disabled: true}) },
			// The budget, plus the calls already in flight when the first 403 came back.
			bound: func(time.Duration) int { return 3 + jobs + 2 },
		},
		{
			name: "secondary rate limit (2 POSTs a minute per route, 403 with Retry-After)",
			apply: func() {
				w.sim.SetRateLimits(simgithub.RateLimits{Secondary: simgithub.SecondaryLimits{PointsPerMinute: 10}})
			},
			clear: func() { w.sim.SetRateLimits(simgithub.RateLimits{Disabled: true}) },
			bound: func(d time.Duration) int { return 2 + jobs + 2 + resyncBound(d) },
		},
		{
			name: "slow responses (every REST call takes 0.8-1.2s)",
			apply: func() {
				w.sim.SetFaults(simgithub.Faults{Seed: 2, Endpoints: map[string]simgithub.EndpointFaults{
					"*": {Latency: simgithub.Duration(800 * time.Millisecond), Jitter: simgithub.Duration(400 * time.Millisecond)}}})
			},
			clear: func() { w.sim.SetFaults(simgithub.Faults{}) },
			bound: func(d time.Duration) int { return 2*jobs + resyncBound(d) + 4 },
		},
	}
	for i, ph := range phases {
		_, failedBefore, _ := w.obs.counts()
		w.sim.ResetCallCounts()
		start := time.Now()
		ph.apply()
		ids := w.queue(jobs, time.Second)
		time.Sleep(faultFor)
		calls := totalCalls(w.sim)
		elapsed := time.Since(start)
		outstanding := w.outstanding(ids)
		desired := int(w.getPool("gh").Status.DesiredRunners)
		ph.clear()
		clearedAt := time.Now()
		w.eventually("the jobs of phase "+ph.name, 2*time.Minute+faultFor, func() bool { return w.outstanding(ids) == 0 })
		catchUp := time.Since(clearedAt)

		perMinute := float64(calls) / elapsed.Minutes()
		key := fmt.Sprintf("phase%d_", i+1)
		w.fig.measure(key+"calls_during_fault", float64(calls))
		w.fig.measure(key+"calls_per_minute_during_fault", math.Round(perMinute))
		w.fig.measure(key+"catch_up_seconds", round(catchUp.Seconds()))
		ok := true
		if bound := ph.bound(elapsed); calls > bound {
			ok = false
			t.Errorf("%s: %d REST calls in %s (%.0f a minute), want at most %d: the controller does not back off", ph.name, calls, elapsed.Round(time.Millisecond), perMinute, bound)
		}
		if desired < outstanding {
			ok = false
			t.Errorf("%s: the pool wanted %d runners at the end of the fault with %d jobs outstanding: it dropped its desired state", ph.name, desired, outstanding)
		}
		_, failedAfter, _ := w.obs.counts()
		if sum(failedAfter) != sum(failedBefore) {
			ok = false
			t.Errorf("%s: runners failed during the fault: %v (before: %v)", ph.name, failedAfter, failedBefore)
		}
		w.fig.fault(fault{Kind: "GitHub " + ph.name, Count: 1, Seconds: round(elapsed.Seconds()), Survived: ok,
			Detail: fmt.Sprintf("%d calls (%.0f/min), caught up in %.1fs", calls, perMinute, catchUp.Seconds())})
	}
	w.finish(2 * time.Minute)
	w.fig.write()
}

// backoffBound is what n runners cost while every call fails for d, each retried with
// controller-runtime's per-item exponential backoff (5 ms doubling): about
// log2(d/5ms)+1 attempts each, plus the runner-group lookup and a margin of two.
func backoffBound(n int, d time.Duration) int {
	attempts := int(math.Ceil(math.Log2(float64(d)/float64(5*time.Millisecond)))) + 1
	return n*(attempts+2) + attempts
}

// resyncBound is what resync costs in d: a pass every resyncInterval, listing the
// queued runs of each active repository (plus a run's jobs), with a margin.
func resyncBound(d time.Duration) int {
	passes := int(d/resyncInterval) + 2
	return passes * 2 * len(repos)
}

func totalCalls(sim *simgithub.Sim) int {
	n := int64(0)
	for _, c := range sim.CallCounts() {
		n += c.Total
	}
	return int(n)
}

// outstanding counts the jobs among ids not yet completed.
func (w *world) outstanding(ids []int64) int {
	n := 0
	for _, id := range ids {
		if j, ok := w.sim.Job(id); !ok || j.Status != simgithub.StatusCompleted {
			n++
		}
	}
	return n
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
