package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"syscall"
	"time"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// GitHub is the GitHub simulator as Run drives it; *github.Sim implements it.
type GitHub interface {
	Faults() simgithub.Faults
	SetFaults(simgithub.Faults)
	RateLimits() simgithub.RateLimits
	SetRateLimits(simgithub.RateLimits)
	CallCounts() map[string]simgithub.CallCount
	Deliveries() []simgithub.Delivery
}

// Controller is the Gantry controller process.
type Controller interface {
	// Kill sends sig to the controller and waits until it exited. pid is the
	// process that was killed.
	Kill(ctx context.Context, sig syscall.Signal) (pid int, err error)
	// Start starts a new controller, as the first was started, and waits until it
	// is ready. pid is the new process.
	Start(ctx context.Context) (pid int, err error)
}

// Nodes are the cluster's nodes, with the runners running on them.
type Nodes interface {
	// BusiestNode names the node to lose when a step names none.
	BusiestNode(ctx context.Context) (string, error)
	// LoseNode loses node the way how says (heartbeat or delete) and kills the
	// runner processes on it. pods is how many runner pods were on the node, busy how
	// many of those were running a job.
	LoseNode(ctx context.Context, node, how string) (pods, busy int, err error)
}

// Targets are what Run acts on. A target may be nil when no step needs it; a step
// whose target is missing is reported with an error and skipped.
type Targets struct {
	// GitHub receives webhook_drop, api_errors and rate_limit steps.
	GitHub GitHub
	// Controller receives controller_kill steps.
	Controller Controller
	// Nodes receive node_lost steps.
	Nodes Nodes
	// Disruptions receive drain, consolidate, spot_reclaim, kubelet_eviction and
	// oom_kill steps.
	Disruptions Disruptions
	// Log, if set, receives one line per step started and ended.
	Log io.Writer
}

// Injection is what Run did for one step. Times are seconds from the start of the
// workload, as observed (a step waits for the steps before it: a controller restart
// blocks until the new controller is ready).
type Injection struct {
	Step         int     `json:"step"`
	Name         string  `json:"name"`
	Kind         string  `json:"kind"`
	StartSeconds float64 `json:"start_seconds"`
	EndSeconds   float64 `json:"end_seconds"`
	// Injected is false when the step never ran: the run ended first, or it failed.
	Injected bool   `json:"injected"`
	Detail   string `json:"detail"`
	Error    string `json:"error,omitempty"`

	// webhook_drop: deliveries dropped while the step was in force.
	WebhooksDropped int `json:"webhooks_dropped,omitempty"`
	// api_errors: answers with the step's status on its routes while in force.
	ErrorAnswers int64 `json:"error_answers,omitempty"`
	// rate_limit: 403 and 429 answers while in force.
	RateLimitedAnswers int64 `json:"rate_limited_answers,omitempty"`
	// api_errors and rate_limit: REST calls answered while in force (all routes), to
	// set the refusals against: a client that paces itself on the rate-limit headers
	// is refused little.
	CallsAnswered int64 `json:"calls_answered,omitempty"`
	// controller_kill: the process killed, the one started, and how long the
	// controller was down (kill → the new one ready).
	KilledPID       int     `json:"killed_pid,omitempty"`
	StartedPID      int     `json:"started_pid,omitempty"`
	DowntimeSeconds float64 `json:"downtime_seconds,omitempty"`
	// node_lost: the node and the runner pods on it when it was lost.
	Node           string `json:"node,omitempty"`
	PodsOnNode     int    `json:"pods_on_node,omitempty"`
	BusyPodsOnNode int    `json:"busy_pods_on_node,omitempty"`
	// drain and consolidate (also Node and the pod counts): the runner pods a
	// disruption budget held, and whether the drain's timeout came first. The drain
	// ended at EndSeconds.
	WaitedFor []string `json:"waited_for,omitempty"`
	TimedOut  bool     `json:"timed_out,omitempty"`
	// kubelet_eviction and oom_kill: the runner pods killed.
	Pods []KilledPod `json:"pods,omitempty"`

	// RecoverySeconds is filled in by whoever judges recovery (gantry sim run's
	// report): from the step's end until the system caught up; nil if it never did.
	RecoverySeconds *float64 `json:"recovery_seconds"`
}

type event struct {
	at   time.Duration
	step int
	end  bool
}

// timeline is the schedule's events in the order Run plays them: by time, then ends
// before starts (but a step that lasts no time starts before it ends), then by step.
func (s Schedule) timeline() []event {
	var evs []event
	for i, st := range s.Steps {
		evs = append(evs, event{at: time.Duration(st.At), step: i})
		switch st.Kind() {
		case KindWebhookDrop, KindAPIErrors, KindRateLimit, KindControllerKill:
			evs = append(evs, event{at: st.End(), step: i, end: true})
		}
	}
	// rank at one time: the ends of steps that lasted, then starts, then the ends of
	// steps that did not last (a kill with no downtime restarts right after the kill).
	rank := func(e event) int {
		switch {
		case e.end && s.Steps[e.step].For > 0:
			return 0
		case !e.end:
			return 1
		}
		return 2
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if evs[a].at != evs[b].at {
			return evs[a].at < evs[b].at
		}
		if ra, rb := rank(evs[a]), rank(evs[b]); ra != rb {
			return ra < rb
		}
		return evs[a].step < evs[b].step
	})
	return evs
}

// Run plays the schedule against t, start being the start of the workload, and
// returns one Injection per step, in the schedule's order. It returns when every
// step has ended or ctx is done; either way the simulator's faults and rate limits
// are as Run found them. A controller killed and not yet restarted when ctx ends
// stays down. The schedule should be valid (Validate).
func Run(ctx context.Context, s Schedule, start time.Time, t Targets) []Injection {
	logf := func(format string, args ...any) {
		if t.Log != nil {
			fmt.Fprintf(t.Log, "  fault t=%4.0fs: %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		}
	}
	inj := make([]Injection, len(s.Steps))
	for i, st := range s.Steps {
		inj[i] = Injection{Step: i, Name: st.Label(), Kind: st.Kind(), Detail: "not injected: the run ended first"}
	}
	var baseFaults simgithub.Faults
	var baseLimits simgithub.RateLimits
	if t.GitHub != nil {
		baseFaults, baseLimits = t.GitHub.Faults(), t.GitHub.RateLimits()
	}
	faultsSet, limitsSet := false, false
	defer func() {
		if faultsSet {
			t.GitHub.SetFaults(baseFaults)
		}
		if limitsSet {
			t.GitHub.SetRateLimits(baseLimits)
		}
	}()
	type snapshot struct {
		calls   map[string]simgithub.CallCount
		dropped int
	}
	snaps := map[int]snapshot{}
	killedAt := map[int]time.Time{}
	since := func() float64 { return round(time.Since(start).Seconds()) }

	ended := map[int]bool{}
	dis := &disrupter{t: t.Disruptions, logf: logf}
	defer func() {
		// Drains go on until they end, or until ctx does.
		dis.wg.Wait()
		// Steps cut short by the end of the run end now.
		for i := range inj {
			if kind := s.Steps[i].Kind(); inj[i].Injected && !ended[i] && kind != KindNodeLost && !isDisruption(kind) {
				inj[i].EndSeconds = since()
				inj[i].Detail += " (cut short: the run ended)"
			}
		}
	}()
	for _, ev := range s.timeline() {
		if !SleepUntil(ctx, start.Add(ev.at)) {
			break
		}
		if ev.end {
			ended[ev.step] = true
		}
		st, in := s.Steps[ev.step], &inj[ev.step]
		if !ev.end {
			in.StartSeconds, in.EndSeconds = since(), since()
		} else {
			in.EndSeconds = since()
		}
		if in.Error != "" {
			continue // its start failed
		}
		fail := func(err error) {
			in.Error, in.Detail = err.Error(), "not injected: "+err.Error()
			logf("%s failed: %v", in.Name, err)
		}
		switch kind := st.Kind(); kind {
		case KindWebhookDrop, KindAPIErrors, KindRateLimit:
			if t.GitHub == nil {
				fail(errors.New("no GitHub simulator to inject into"))
				continue
			}
			if kind == KindRateLimit {
				t.GitHub.SetRateLimits(s.RateLimitsAt(ev.at, baseLimits))
				limitsSet = true
			} else {
				t.GitHub.SetFaults(s.GitHubFaultsAt(ev.at, baseFaults))
				faultsSet = true
			}
			if !ev.end {
				snaps[ev.step] = snapshot{calls: t.GitHub.CallCounts(), dropped: dropped(t.GitHub)}
				in.Injected, in.Detail = true, describe(st)
				logf("%s: %s", in.Name, in.Detail)
				continue
			}
			before, after := snaps[ev.step], t.GitHub.CallCounts()
			for r, c := range after {
				in.CallsAnswered += c.Total - before.calls[r].Total
			}
			switch kind {
			case KindWebhookDrop:
				in.WebhooksDropped = dropped(t.GitHub) - before.dropped
				in.Detail += fmt.Sprintf(": %d deliveries dropped", in.WebhooksDropped)
			case KindAPIErrors:
				routes := st.APIErrors.Routes
				if len(routes) == 0 {
					routes = RunnerRoutes()
				}
				in.ErrorAnswers = answers(before.calls, after, routes, st.APIErrors.status())
				in.Detail += fmt.Sprintf(": %d of %d calls failed", in.ErrorAnswers, in.CallsAnswered)
			case KindRateLimit:
				in.RateLimitedAnswers = answers(before.calls, after, nil, http.StatusForbidden) +
					answers(before.calls, after, nil, http.StatusTooManyRequests)
				in.Detail += fmt.Sprintf(": %d of %d calls refused", in.RateLimitedAnswers, in.CallsAnswered)
			}
			logf("%s ended: %s", in.Name, in.Detail)

		case KindControllerKill:
			if t.Controller == nil {
				fail(errors.New("no controller to kill"))
				continue
			}
			if !ev.end {
				sig := syscall.SIGKILL
				if st.ControllerKill.Signal == "TERM" {
					sig = syscall.SIGTERM
				}
				pid, err := t.Controller.Kill(ctx, sig)
				if err != nil {
					fail(fmt.Errorf("killing the controller: %w", err))
					continue
				}
				killedAt[ev.step] = time.Now()
				in.Injected, in.KilledPID = true, pid
				in.Detail = fmt.Sprintf("%s to controller pid %d", sigName(sig), pid)
				logf("%s: %s", in.Name, in.Detail)
				continue
			}
			pid, err := t.Controller.Start(ctx)
			in.DowntimeSeconds = round(time.Since(killedAt[ev.step]).Seconds())
			if err != nil {
				in.Error = fmt.Sprintf("restarting the controller: %v", err)
				in.Detail += "; " + in.Error
				logf("%s: %s", in.Name, in.Error)
				continue
			}
			in.StartedPID = pid
			in.Detail += fmt.Sprintf("; new controller pid %d ready after %.1fs down", pid, in.DowntimeSeconds)
			logf("%s: %s", in.Name, in.Detail)

		case KindNodeLost:
			if t.Nodes == nil {
				fail(errors.New("no cluster to lose a node of"))
				continue
			}
			node, how := st.NodeLost.Node, st.NodeLost.How
			if how == "" {
				how = NodeLossHeartbeat
			}
			if node == "" {
				n, err := t.Nodes.BusiestNode(ctx)
				if err != nil {
					fail(fmt.Errorf("choosing a node: %w", err))
					continue
				}
				node = n
			}
			pods, busy, err := t.Nodes.LoseNode(ctx, node, how)
			if err != nil {
				fail(fmt.Errorf("losing node %s: %w", node, err))
				continue
			}
			in.Injected, in.Node, in.PodsOnNode, in.BusyPodsOnNode = true, node, pods, busy
			in.Detail = fmt.Sprintf("node %s lost (%s) with %d runner pods, %d running a job", node, how, pods, busy)
			logf("%s: %s", in.Name, in.Detail)

		default:
			if err := dis.play(ctx, st, in, since); err != nil {
				fail(err)
			}
		}
	}
	return inj
}

// describe says what a GitHub step injects.
func describe(st Step) string {
	d := time.Duration(st.For)
	switch {
	case st.WebhookDrop != nil:
		return fmt.Sprintf("%.0f%% of webhook deliveries dropped for %s", st.WebhookDrop.Rate*100, d)
	case st.APIErrors != nil:
		n := len(st.APIErrors.Routes)
		what := fmt.Sprintf("%d routes", n)
		if n == 0 {
			what = "the runner routes"
		}
		return fmt.Sprintf("%.0f%% of calls to %s answered %d for %s", st.APIErrors.Rate*100, what, st.APIErrors.status(), d)
	case st.RateLimit != nil && st.RateLimit.Kind == RateLimitPrimary:
		l := st.RateLimit.limits(simgithub.RateLimits{Disabled: true}, d)
		return fmt.Sprintf("primary rate limit: %d calls per credential for %s, then %d", l.PAT, d, l.ExhaustedStatus)
	case st.RateLimit != nil:
		l := st.RateLimit.limits(simgithub.RateLimits{Disabled: true}, d)
		return fmt.Sprintf("secondary rate limit: %d points per minute per credential and route for %s, then %d with Retry-After",
			l.Secondary.PointsPerMinute, d, l.Secondary.Status)
	}
	return ""
}

// dropped counts the deliveries a webhook_drop fault dropped so far.
func dropped(gh GitHub) int {
	n := 0
	for _, d := range gh.Deliveries() {
		if d.Status == simgithub.DeliveryStatusDropped {
			n++
		}
	}
	return n
}

// answers counts the answers with status between two call-count snapshots, on
// routes (nil: every route).
func answers(before, after map[string]simgithub.CallCount, routes []string, status int) int64 {
	var n int64
	count := func(route string) {
		n += after[route].ByStatus[status] - before[route].ByStatus[status]
	}
	if routes == nil {
		for r := range after {
			count(r)
		}
		return n
	}
	for _, r := range routes {
		count(r)
	}
	return n
}

// SleepUntil waits until at, or until ctx ends; it says whether ctx is still live.
func SleepUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGKILL"
}

func round(x float64) float64 { return math.Round(x*10) / 10 }
