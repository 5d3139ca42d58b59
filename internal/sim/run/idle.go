package run

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// sessionsWait bounds the wait for every pool's scale-set session to open.
const sessionsWait = 5 * time.Minute

// Sessions is how the pools' scale-set sessions opened before the workload
// (Scenario.waitsForSessions), as the GitHub simulator saw them.
type Sessions struct {
	Pools int `json:"pools"`
	// Open is how many of the pools' scale sets had a live session when the wait ended.
	Open int `json:"open"`
	// Seconds is how long after the controller took up its pools every session was
	// open (they often are by then: 0); nil when they were not all open within the wait
	// (5 minutes). SecondsFromStart is from the controller process's start.
	Seconds          *float64 `json:"seconds"`
	SecondsFromStart *float64 `json:"seconds_from_start,omitempty"`

	openAt time.Time
}

// IdleReport is what the controller costs with every pool's session open and no job
// (Scenario.Idle), measured over the idle window only.
type IdleReport struct {
	Pools int `json:"pools"`
	// SessionsOpen is how many of the pools' scale sets had a live session at the end
	// of the window.
	SessionsOpen  int     `json:"sessions_open"`
	WindowSeconds float64 `json:"window_seconds"`
	// Goroutines is the controller's go_goroutines at the start and at the end of the
	// window (its /metrics); RSSBytes its resident memory at the end (/proc).
	GoroutinesStart int64 `json:"goroutines_start"`
	Goroutines      int64 `json:"goroutines"`
	RSSBytes        int64 `json:"rss_bytes"`
	// CPUSecondsPerMinute is the controller's CPU (user + system) during the window,
	// per minute.
	CPUSecondsPerMinute float64 `json:"cpu_seconds_per_minute"`
	// GitHub calls the simulator answered during the window, per minute: the Actions
	// service's (also per pool) and REST's, split as the report's per-job figures are.
	ActionsServiceCallsPerMinute        float64 `json:"actions_service_calls_per_minute"`
	ActionsServiceCallsPerMinutePerPool float64 `json:"actions_service_calls_per_minute_per_pool"`
	RESTCallsPerMinute                  float64 `json:"rest_calls_per_minute"`
	// The window's calls by route.
	ActionsServiceCallsByRoute map[string]int64 `json:"actions_service_calls_by_endpoint"`
	RESTCallsByRoute           map[string]int64 `json:"rest_calls_by_endpoint"`
	// Error says what could not be measured (the controller's metrics or /proc).
	Error string `json:"error,omitempty"`

	from, to time.Time
}

// scaleSetLister is where the run sees the scale sets: the GitHub simulator.
type scaleSetLister interface{ ScaleSets() []simgithub.ScaleSet }

// sessionsOpen counts the scale sets named in names that have a live session.
func sessionsOpen(sets []simgithub.ScaleSet, names []string) int {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	open := 0
	for _, ss := range sets {
		if want[ss.Name] && ss.Session != "" {
			open++
			delete(want, ss.Name) // a name counts once
		}
	}
	return open
}

// waitSessions waits until every pool named has a live scale-set session on the
// simulator, or timeout, printing progress every 5 seconds.
func waitSessions(ctx context.Context, sim scaleSetLister, names []string, timeout time.Duration, out io.Writer) Sessions {
	start := time.Now()
	s := Sessions{Pools: len(names)}
	fmt.Fprintf(out, "Waiting for the %d pools' scale-set sessions to open\n", len(names))
	lastSaid := start
	for {
		s.Open = sessionsOpen(sim.ScaleSets(), names)
		if s.Open == len(names) {
			s.openAt = time.Now()
			secs := round1(s.openAt.Sub(start).Seconds())
			s.Seconds = &secs
			fmt.Fprintf(out, "All %d sessions open after %.1fs\n", s.Open, secs)
			return s
		}
		if time.Since(start) >= timeout || ctx.Err() != nil {
			fmt.Fprintf(out, "Only %d of %d sessions open after %s; going on\n", s.Open, len(names), timeout)
			return s
		}
		if time.Since(lastSaid) >= 5*time.Second {
			fmt.Fprintf(out, "  sessions open: %d of %d\n", s.Open, len(names))
			lastSaid = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// idleSnapshot is what the idle window reads at its start and at its end.
type idleSnapshot struct {
	at         time.Time
	calls      map[string]simgithub.CallCount
	cpuSeconds float64 // the controller's, so far
	goroutines int64
}

// idleProbe reads the controller and the simulator for the idle window.
type idleProbe struct {
	sim interface {
		CallCounts() map[string]simgithub.CallCount
	}
	pid        func() int
	metricsURL string
}

// snapshot reads the probe now; errors name what could not be read.
func (p idleProbe) snapshot() (idleSnapshot, []error) {
	var errs []error
	s := idleSnapshot{at: time.Now(), calls: p.sim.CallCounts()}
	pid := p.pid()
	if pid == 0 {
		return s, []error{errNotStarted}
	}
	cpu, err := procCPUSeconds(pid)
	if err != nil {
		errs = append(errs, err)
	}
	s.cpuSeconds = cpu
	g, err := scrapeGauge(p.metricsURL, "go_goroutines")
	if err != nil {
		errs = append(errs, err)
	}
	s.goroutines = int64(g)
	return s, errs
}

// measureIdle holds the world idle for d and reports what the controller cost
// meanwhile.
func measureIdle(ctx context.Context, p idleProbe, sim scaleSetLister, names []string, d time.Duration, out io.Writer) *IdleReport {
	fmt.Fprintf(out, "Idle: measuring the controller for %s with no job\n", d)
	from, errs := p.snapshot()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	to, errs2 := p.snapshot()
	var rssBytes int64
	if pid := p.pid(); pid > 0 {
		rssBytes = rss(pid)
	}
	r := idleReport(len(names), sessionsOpen(sim.ScaleSets(), names), from, to, rssBytes)
	r.from, r.to = from.at, to.at
	if all := append(errs, errs2...); len(all) > 0 {
		r.Error = all[0].Error()
	}
	fmt.Fprintf(out, "Idle: %s\n", r.summary())
	return r
}

// idleReport is the idle window's figures from its two snapshots.
func idleReport(pools, sessions int, from, to idleSnapshot, rssBytes int64) *IdleReport {
	r := &IdleReport{
		Pools: pools, SessionsOpen: sessions, WindowSeconds: round1(to.at.Sub(from.at).Seconds()),
		GoroutinesStart: from.goroutines, Goroutines: to.goroutines, RSSBytes: rssBytes,
		ActionsServiceCallsByRoute: map[string]int64{}, RESTCallsByRoute: map[string]int64{},
	}
	var service, rest int64
	for route, c := range to.calls {
		n := c.Counted() - from.calls[route].Counted()
		if n <= 0 {
			continue
		}
		if simgithub.IsActionsServiceRoute(route) {
			r.ActionsServiceCallsByRoute[route] = n
			service += n
		} else {
			r.RESTCallsByRoute[route] = n
			rest += n
		}
	}
	minutes := to.at.Sub(from.at).Minutes()
	if minutes <= 0 {
		return r
	}
	r.CPUSecondsPerMinute = round3((to.cpuSeconds - from.cpuSeconds) / minutes)
	r.ActionsServiceCallsPerMinute = round2(float64(service) / minutes)
	r.RESTCallsPerMinute = round2(float64(rest) / minutes)
	if pools > 0 {
		r.ActionsServiceCallsPerMinutePerPool = round3(float64(service) / minutes / float64(pools))
	}
	return r
}

// summary is the idle window in one line.
func (r *IdleReport) summary() string {
	s := fmt.Sprintf("%d pools, %d sessions open, %.0f s window: goroutines %d (%d at its start), RSS %.1f MiB, CPU %.3f s/min, Actions service calls %.2f/min (%.3f per pool), REST calls %.2f/min",
		r.Pools, r.SessionsOpen, r.WindowSeconds, r.Goroutines, r.GoroutinesStart, float64(r.RSSBytes)/(1<<20),
		r.CPUSecondsPerMinute, r.ActionsServiceCallsPerMinute, r.ActionsServiceCallsPerMinutePerPool, r.RESTCallsPerMinute)
	if r.Error != "" {
		s += " — not all measured: " + r.Error
	}
	return s
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
