// Package run runs Gantry end to end on one machine — a simulated cluster, the GitHub
// simulator, simulated runner agents and the unchanged `gantry controller` as a separate
// process — drives a workload through it, and reports what happened.
package run

import (
	"fmt"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Scenario is a workload and the system it runs on.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Burst jobs are queued at once, as matrix runs of at most 256 jobs.
	Burst int `json:"burst,omitempty"`
	// Rate jobs per second arrive as a Poisson process for Steady.
	Rate   float64       `json:"rate,omitempty"`
	Steady time.Duration `json:"steady,omitempty"`
	// JobDuration is how long each job runs.
	JobDuration time.Duration `json:"job_duration"`
	// Pool settings.
	MinIdle    int32                     `json:"min_idle"`
	MaxRunners int32                     `json:"max_runners"`
	Mode       v1alpha1.RegistrationMode `json:"registration_mode,omitempty"`
	// Cluster settings.
	Nodes         int           `json:"nodes"`
	PodStartDelay time.Duration `json:"pod_start_delay"`
	// RateLimits of the GitHub simulator; Disabled is GHES's default.
	RateLimits simgithub.RateLimits `json:"rate_limits"`
	// Timeout bounds the whole run after the workload starts.
	Timeout time.Duration `json:"timeout"`
}

var noLimits = simgithub.RateLimits{Disabled: true}

// Scenarios are the built-in workloads.
var Scenarios = map[string]Scenario{
	"demo": {
		Name: "demo", Description: "a friendly first run: 40 jobs queued at once, 5 s each, pods start in 1 s",
		Burst: 40, JobDuration: 5 * time.Second, MaxRunners: 100, Nodes: 4,
		PodStartDelay: time.Second, RateLimits: noLimits, Timeout: 3 * time.Minute,
	},
	"burst": {
		Name: "burst", Description: "a 500-job matrix queued at once, 10 s jobs, pods start in 1 s, rate limits off (as on GHES)",
		Burst: 500, JobDuration: 10 * time.Second, MaxRunners: 600, Nodes: 10,
		PodStartDelay: time.Second, RateLimits: noLimits, Timeout: 10 * time.Minute,
	},
	"burst-limited": {
		Name: "burst-limited", Description: "the burst with github.com's primary and secondary rate limits on",
		Burst: 500, JobDuration: 10 * time.Second, MaxRunners: 600, Nodes: 10,
		PodStartDelay: time.Second, RateLimits: simgithub.RateLimits{}, Timeout: 15 * time.Minute,
	},
	"burst-limited-token": {
		Name: "burst-limited-token", Description: "the burst with github.com's rate limits on, registrationMode RegistrationToken",
		Burst: 500, JobDuration: 10 * time.Second, MaxRunners: 600, Nodes: 10, Mode: v1alpha1.RegistrationModeRegistrationToken,
		PodStartDelay: time.Second, RateLimits: simgithub.RateLimits{}, Timeout: 15 * time.Minute,
	},
	"steady": {
		Name: "steady", Description: "Poisson arrivals, 5 jobs/s for a minute, 20 s jobs",
		Rate: 5, Steady: time.Minute, JobDuration: 20 * time.Second, MaxRunners: 300, Nodes: 10,
		PodStartDelay: time.Second, RateLimits: noLimits, Timeout: 10 * time.Minute,
	},
	"scale": {
		Name: "scale", Description: "5,000 concurrent runners: 5,000 jobs of 2 minutes queued at once, 0 → 5,000 → 0",
		Burst: 5000, JobDuration: 2 * time.Minute, MaxRunners: 5000, Nodes: 50,
		PodStartDelay: time.Second, RateLimits: noLimits, Timeout: 30 * time.Minute,
	},
}

// Lookup returns a built-in scenario by name.
func Lookup(name string) (Scenario, error) {
	sc, ok := Scenarios[name]
	if !ok {
		names := make([]string, 0, len(Scenarios))
		for n := range Scenarios {
			names = append(names, n)
		}
		sort.Strings(names)
		return Scenario{}, fmt.Errorf("unknown scenario %q: choose one of %v", name, names)
	}
	return sc, nil
}

// Jobs is how many jobs the scenario queues (the expected count for steady).
func (s Scenario) Jobs() int {
	return s.Burst + int(s.Rate*s.Steady.Seconds())
}
