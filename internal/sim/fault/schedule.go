// Package fault plays a schedule of faults against Gantry's simulated system: webhook
// deliveries dropped, GitHub API errors, primary and secondary rate limits, the
// controller killed and restarted, a node lost. A Schedule is data — a list of timed
// steps, read from JSON — and Run plays it against Targets, returning what it injected
// and when. `gantry sim run` uses it for the faults scenario and for --faults FILE; a
// test suite can build a Schedule in Go and play it against its own targets.
// docs/sim.md documents the format.
package fault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Kinds of Step.
const (
	KindWebhookDrop    = "webhook_drop"
	KindAPIErrors      = "api_errors"
	KindRateLimit      = "rate_limit"
	KindControllerKill = "controller_kill"
	KindNodeLost       = "node_lost"
)

// Rate-limit kinds of RateLimit.
const (
	RateLimitPrimary   = "primary"
	RateLimitSecondary = "secondary"
)

// Node losses of NodeLost, as internal/sim/cluster implements them.
const (
	NodeLossHeartbeat = "heartbeat"
	NodeLossDelete    = "delete"
)

// Schedule is a list of timed fault steps. The zero value injects nothing.
type Schedule struct {
	// Seed seeds the simulator's fault decisions (which delivery is dropped, which
	// call fails); the same seed and the same sequence of requests give the same faults.
	Seed int64 `json:"seed,omitempty"`
	// Steps run at their own times; their order in the list does not matter.
	Steps []Step `json:"steps"`
}

// Step is one fault: when it starts, how long it lasts, and exactly one kind.
type Step struct {
	// Name labels the step in reports (default: "<kind> at <at>").
	Name string `json:"name,omitempty"`
	// At is when the step starts, from the start of the workload.
	At simgithub.Duration `json:"at"`
	// For is how long the step lasts: required for webhook_drop, api_errors and
	// rate_limit; for controller_kill, the downtime before a new controller is started
	// (0: at once); node_lost is instantaneous and takes none.
	For simgithub.Duration `json:"for,omitempty"`

	WebhookDrop    *WebhookDrop    `json:"webhook_drop,omitempty"`
	APIErrors      *APIErrors      `json:"api_errors,omitempty"`
	RateLimit      *RateLimit      `json:"rate_limit,omitempty"`
	ControllerKill *ControllerKill `json:"controller_kill,omitempty"`
	NodeLost       *NodeLost       `json:"node_lost,omitempty"`

	// Disruptions of nodes and pods (disrupt.go).
	Drain           *Drain       `json:"drain,omitempty"`
	Consolidate     *Drain       `json:"consolidate,omitempty"`
	SpotReclaim     *SpotReclaim `json:"spot_reclaim,omitempty"`
	KubeletEviction *PodKill     `json:"kubelet_eviction,omitempty"`
	OOMKill         *PodKill     `json:"oom_kill,omitempty"`
}

// WebhookDrop drops a share of workflow_job webhook deliveries: GitHub logs them as
// failed and never retries them on its own, as when the receiver was unreachable.
type WebhookDrop struct {
	// Rate is the probability (0 < rate ≤ 1) that a delivery is dropped.
	Rate float64 `json:"rate"`
}

// APIErrors answers a share of REST calls with a server error, before any other work
// (no rate budget is spent).
type APIErrors struct {
	// Routes are route IDs as the simulator counts calls ("POST
	// /orgs/{org}/actions/runners/generate-jitconfig"); default RunnerRoutes().
	Routes []string `json:"routes,omitempty"`
	// Rate is the probability (0 < rate ≤ 1) that a call fails.
	Rate float64 `json:"rate"`
	// Status is the answer's status, 500–599 (default 503).
	Status int `json:"status,omitempty"`
}

// RateLimit turns on a rate limit for the step's duration; when the step ends the
// limits the schedule found are put back.
type RateLimit struct {
	// Kind is primary or secondary.
	Kind string `json:"kind"`
	// Limit (primary) is how many calls each credential may make in the step: the
	// primary window lasts the step, so its budget resets as the step ends. Default 20.
	Limit int `json:"limit,omitempty"`
	// PointsPerMinute (secondary) is the budget per credential, route and minute: a
	// GET costs 1, other methods 5 (default 100). Concurrent is the number of calls in
	// flight allowed per credential (default 100).
	PointsPerMinute int `json:"points_per_minute,omitempty"`
	Concurrent      int `json:"concurrent,omitempty"`
	// Status is 403 (default) or 429.
	Status int `json:"status,omitempty"`
}

// ControllerKill kills the controller process and, after the step's For, starts a
// new one (with the same flags) and waits until it is ready.
type ControllerKill struct {
	// Signal is KILL (default: no chance to clean up) or TERM (a graceful stop).
	Signal string `json:"signal,omitempty"`
}

// NodeLost loses a node with the runner pods on it.
type NodeLost struct {
	// Node names the node; empty picks the Ready node running the most runner pods.
	Node string `json:"node,omitempty"`
	// How is heartbeat (default: the node stops renewing its lease and status, so
	// its pods end up stuck terminating) or delete (the Node object is deleted).
	How string `json:"how,omitempty"`
}

// Kind is the step's kind, "" when it has none or several.
func (s Step) Kind() string {
	var kinds []string
	if s.WebhookDrop != nil {
		kinds = append(kinds, KindWebhookDrop)
	}
	if s.APIErrors != nil {
		kinds = append(kinds, KindAPIErrors)
	}
	if s.RateLimit != nil {
		kinds = append(kinds, KindRateLimit)
	}
	if s.ControllerKill != nil {
		kinds = append(kinds, KindControllerKill)
	}
	if s.NodeLost != nil {
		kinds = append(kinds, KindNodeLost)
	}
	kinds = append(kinds, s.disruptionKinds()...)
	if len(kinds) != 1 {
		return ""
	}
	return kinds[0]
}

// Label is the step's name, or "<kind> at <at>".
func (s Step) Label() string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("%s at %s", s.Kind(), time.Duration(s.At))
}

// End is when the step ends, from the start of the workload.
func (s Step) End() time.Duration { return time.Duration(s.At) + time.Duration(s.For) }

// active reports whether the step is in force at offset t: [At, At+For).
func (s Step) active(t time.Duration) bool {
	return time.Duration(s.At) <= t && t < s.End()
}

// RunnerRoutes are the runner endpoints of every scope: what api_errors fails by
// default.
func RunnerRoutes() []string {
	var out []string
	for _, scope := range []string{"/repos/{owner}/{repo}", "/orgs/{org}", "/enterprises/{enterprise}"} {
		p := scope + "/actions/runners"
		out = append(out,
			"POST "+p+"/registration-token",
			"POST "+p+"/remove-token",
			"POST "+p+"/generate-jitconfig",
			"GET "+p,
			"GET "+p+"/{runner_id}",
			"DELETE "+p+"/{runner_id}",
		)
	}
	return out
}

// Parse reads a schedule from JSON — {"seed": …, "steps": [...]} or just the list of
// steps — and validates it. Unknown fields are errors: a typo must not silently
// drop a fault.
func Parse(data []byte) (Schedule, error) {
	var s Schedule
	trimmed := bytes.TrimSpace(data)
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var err error
	if len(trimmed) > 0 && trimmed[0] == '[' {
		err = dec.Decode(&s.Steps)
	} else {
		err = dec.Decode(&s)
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("parsing the fault schedule: %w", err)
	}
	if dec.More() {
		return Schedule{}, errors.New("parsing the fault schedule: more than one JSON value")
	}
	if err := s.Validate(); err != nil {
		return Schedule{}, err
	}
	return s, nil
}

// Validate checks every step and returns all problems found, each naming its step.
// Steps of the same kind may not overlap in time (node_lost aside), so that every
// moment has one setting of each kind.
func (s Schedule) Validate() error {
	var errs []error
	bad := func(i int, st Step, format string, args ...any) {
		errs = append(errs, fmt.Errorf("step %d (%s): %s", i, st.Label(), fmt.Sprintf(format, args...)))
	}
	for i, st := range s.Steps {
		kind := st.Kind()
		if kind == "" {
			bad(i, st, "needs exactly one of webhook_drop, api_errors, rate_limit, controller_kill, node_lost, "+
				"drain, consolidate, spot_reclaim, kubelet_eviction, oom_kill")
			continue
		}
		if isDisruption(kind) {
			if st.At < 0 {
				bad(i, st, "at must not be negative")
			}
			validateDisruption(st, func(format string, args ...any) { bad(i, st, format, args...) })
			continue
		}
		if st.At < 0 {
			bad(i, st, "at must not be negative")
		}
		if st.For < 0 {
			bad(i, st, "for must not be negative")
		}
		switch kind {
		case KindWebhookDrop, KindAPIErrors, KindRateLimit:
			if st.For <= 0 {
				bad(i, st, "for must be positive: how long the fault lasts")
			}
		case KindNodeLost:
			if st.For != 0 {
				bad(i, st, "node_lost is instantaneous: remove for")
			}
		}
		switch kind {
		case KindWebhookDrop:
			if r := st.WebhookDrop.Rate; !(r > 0 && r <= 1) {
				bad(i, st, "webhook_drop.rate must be in (0, 1], got %v", r)
			}
		case KindAPIErrors:
			ae := st.APIErrors
			if !(ae.Rate > 0 && ae.Rate <= 1) {
				bad(i, st, "api_errors.rate must be in (0, 1], got %v", ae.Rate)
			}
			if ae.Status != 0 && (ae.Status < 500 || ae.Status > 599) {
				bad(i, st, "api_errors.status must be a server error (500–599), got %d", ae.Status)
			}
			for _, r := range ae.Routes {
				if m, p, ok := strings.Cut(r, " "); !ok || m == "" || !strings.HasPrefix(p, "/") {
					bad(i, st, "api_errors.routes: %q is not a route such as \"GET /orgs/{org}/actions/runners\"", r)
				}
			}
		case KindRateLimit:
			rl := st.RateLimit
			switch rl.Kind {
			case RateLimitPrimary, RateLimitSecondary:
			default:
				bad(i, st, "rate_limit.kind must be primary or secondary, got %q", rl.Kind)
			}
			if rl.Limit < 0 || rl.PointsPerMinute < 0 || rl.Concurrent < 0 {
				bad(i, st, "rate_limit budgets must not be negative")
			}
			if rl.Status != 0 && rl.Status != http.StatusForbidden && rl.Status != http.StatusTooManyRequests {
				bad(i, st, "rate_limit.status must be 403 or 429, got %d", rl.Status)
			}
		case KindControllerKill:
			switch st.ControllerKill.Signal {
			case "", "KILL", "TERM":
			default:
				bad(i, st, "controller_kill.signal must be KILL or TERM, got %q", st.ControllerKill.Signal)
			}
		case KindNodeLost:
			switch st.NodeLost.How {
			case "", NodeLossHeartbeat, NodeLossDelete:
			default:
				bad(i, st, "node_lost.how must be heartbeat or delete, got %q", st.NodeLost.How)
			}
		}
	}
	// Same-kind steps must not overlap (a controller_kill lasts its downtime).
	order := make([]int, len(s.Steps))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s.Steps[order[a]].At < s.Steps[order[b]].At })
	lastOf := map[string]int{}
	for _, i := range order {
		st := s.Steps[i]
		kind := st.Kind()
		if kind == "" || kind == KindNodeLost || isDisruption(kind) {
			continue
		}
		if j, ok := lastOf[kind]; ok {
			prev := s.Steps[j]
			if time.Duration(st.At) < prev.End() || (kind == KindControllerKill && st.At == prev.At) {
				bad(i, st, "overlaps step %d (%s): steps of one kind must not overlap", j, prev.Label())
			}
		}
		lastOf[kind] = i
	}
	return errors.Join(errs...)
}

// GitHubFaultsAt is the simulator's fault settings at offset t: base with the
// webhook_drop and api_errors steps in force at t laid over it.
func (s Schedule) GitHubFaultsAt(t time.Duration, base simgithub.Faults) simgithub.Faults {
	out := base
	if s.Seed != 0 {
		out.Seed = s.Seed
	}
	out.Endpoints = make(map[string]simgithub.EndpointFaults, len(base.Endpoints))
	for k, v := range base.Endpoints {
		out.Endpoints[k] = v
	}
	for _, st := range s.Steps {
		if !st.active(t) {
			continue
		}
		switch {
		case st.WebhookDrop != nil:
			out.Webhooks.DropRate = st.WebhookDrop.Rate
		case st.APIErrors != nil:
			routes := st.APIErrors.Routes
			if len(routes) == 0 {
				routes = RunnerRoutes()
			}
			for _, r := range routes {
				ef := out.Endpoints[r]
				ef.ErrorRate, ef.ErrorStatus = st.APIErrors.Rate, st.APIErrors.status()
				out.Endpoints[r] = ef
			}
		}
	}
	if len(out.Endpoints) == 0 {
		out.Endpoints = nil
	}
	return out
}

// RateLimitsAt is the simulator's rate limits at offset t: base, or the limits of
// the rate_limit step in force at t.
func (s Schedule) RateLimitsAt(t time.Duration, base simgithub.RateLimits) simgithub.RateLimits {
	for _, st := range s.Steps {
		if st.RateLimit != nil && st.active(t) {
			return st.RateLimit.limits(base, time.Duration(st.For))
		}
	}
	return base
}

func (ae *APIErrors) status() int {
	if ae.Status == 0 {
		return http.StatusServiceUnavailable
	}
	return ae.Status
}

// limits are the rate limits of the step: the base with this limit switched on.
func (rl *RateLimit) limits(base simgithub.RateLimits, window time.Duration) simgithub.RateLimits {
	out := base
	if base.Disabled {
		// Only the step's limit: the other one stays off.
		out = simgithub.RateLimits{Secondary: simgithub.SecondaryLimits{Disabled: true}}
	}
	status := rl.Status
	if status == 0 {
		status = http.StatusForbidden
	}
	switch rl.Kind {
	case RateLimitPrimary:
		limit := rl.Limit
		if limit == 0 {
			limit = 20
		}
		out.PAT, out.Installation, out.App = limit, limit, limit
		out.Window = simgithub.Duration(window)
		out.ExhaustedStatus = status
	case RateLimitSecondary:
		if base.Disabled {
			out.PAT, out.Installation, out.App = 1<<30, 1<<30, 1<<30 // primary: no limit to speak of
		}
		ppm := rl.PointsPerMinute
		if ppm == 0 {
			ppm = 100
		}
		out.Secondary = simgithub.SecondaryLimits{PointsPerMinute: ppm, Concurrent: rl.Concurrent, Status: status}
	}
	return out
}

// D is a duration literal for schedules written in Go: D("1m30s"). It panics on a
// malformed literal, as regexp.MustCompile does.
func D(s string) simgithub.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(fmt.Sprintf("fault.D(%q): %v", s, err))
	}
	return simgithub.Duration(d)
}
