// Package run runs Gantry end to end on one machine — a simulated cluster, the GitHub
// simulator, simulated runner agents and the unchanged `gantry controller` as a separate
// process — drives a workload through it, and reports what happened.
package run

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/sim/trace"
)

// Scenario is a workload and the system it runs on. The zero value of every optional
// field keeps the default named in its comment.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description"`

	// Burst jobs are queued at once, as runs of at most 256 jobs.
	Burst int `json:"burst,omitempty"`
	// BurstPools spreads the burst round-robin over the first BurstPools pools (default:
	// every pool), each job's runs-on naming its pool's scale set alone; only with
	// Pools > 1.
	BurstPools int `json:"burst_pools,omitempty"`
	// Rate jobs per second arrive as a Poisson process for Steady.
	Rate   float64       `json:"rate,omitempty"`
	Steady time.Duration `json:"steady,omitempty"`
	// JobDuration is how long each burst or steady job runs.
	JobDuration time.Duration `json:"job_duration"`
	// Trace, when set, is replayed instead of Burst and Steady: each job queued at
	// its time (divided by TraceSpeed, default 1) in its repository, running for its
	// duration (divided by TraceSpeed too). TraceFile names where it came from.
	Trace      *trace.Trace `json:"-"`
	TraceFile  string       `json:"trace_file,omitempty"`
	TraceSpeed float64      `json:"trace_speed,omitempty"`

	// Idle is how long the run measures the controller idle (report.json's idle) once
	// every pool's scale-set session is open, before its workload; 0: no idle window.
	Idle time.Duration `json:"idle,omitempty"`

	// Pools is how many RunnerPools of the same spec the scenario creates (default 1,
	// named linux); more are named linux-001, linux-002, … and need demand source
	// ScaleSet, each with a scale set named after its pool.
	Pools int `json:"pools,omitempty"`
	// Pool settings, of each pool. Labels default to linux, x64 (a trace's own labels
	// for a replay).
	Labels     []string                  `json:"labels,omitempty"`
	MinIdle    int32                     `json:"min_idle"`
	MaxRunners int32                     `json:"max_runners"`
	Mode       v1alpha1.RegistrationMode `json:"registration_mode,omitempty"`
	// Warm is the pool's spec.warm: schedules and the prediction (none by default).
	Warm *v1alpha1.WarmSpec `json:"warm,omitempty"`
	// WarmHistory, with Warm.Predictive, is what the pool's status says it saw on past
	// days before the run: jobs a minute at the run's hour (hourOfDay; every other hour
	// quiet) and its runner start time. The run waits for the pool to hold the idle runners that
	// history asks for before its workload (seedWarmHistory).
	WarmHistory *WarmHistory `json:"warm_history,omitempty"`
	// DemandSource is the pool's spec.demand.source: Webhook (the default) or
	// ScaleSet, a runner scale set named after the pool (WithDemandSource).
	DemandSource v1alpha1.DemandSource `json:"demand_source,omitempty"`
	// NodeLostTimeout is the pool's recovery.nodeLostTimeout (default 5m).
	NodeLostTimeout time.Duration `json:"node_lost_timeout,omitempty"`
	// UnreachableToleration is how long runner pods tolerate an unreachable or
	// not-ready node before they are evicted (default: Kubernetes' 300 s).
	UnreachableToleration time.Duration `json:"unreachable_toleration,omitempty"`
	// PodTerminationGracePeriod is the runner pods' terminationGracePeriodSeconds
	// (default: Kubernetes' 30 s); a pod stuck terminating is force-deleted
	// NodeLostTimeout after it ends.
	PodTerminationGracePeriod time.Duration `json:"pod_termination_grace_period,omitempty"`

	// Controller settings: --resync-interval (default 30s) and
	// --failed-runner-retention (default 10m).
	ResyncInterval        time.Duration `json:"resync_interval,omitempty"`
	FailedRunnerRetention time.Duration `json:"failed_runner_retention,omitempty"`

	// Cluster settings.
	Nodes         int           `json:"nodes"`
	PodStartDelay time.Duration `json:"pod_start_delay"`
	// NodeMonitorGracePeriod is how long a node may miss heartbeats before it is
	// NotReady (default 40s).
	NodeMonitorGracePeriod time.Duration `json:"node_monitor_grace_period,omitempty"`

	// RateLimits of the GitHub simulator; Disabled is GHES's default.
	RateLimits simgithub.RateLimits `json:"rate_limits"`
	// RunnerLostTimeout is how long GitHub lets a runner stay silent before it takes
	// it offline and fails its running job (0: never; GitHub's own is about ten
	// minutes). Simulated runners renew their job four times as often.
	RunnerLostTimeout time.Duration `json:"runner_lost_timeout,omitempty"`

	// Repos spreads steady jobs over that many repositories of acme, repo-1 … repo-N,
	// each job's drawn at random (seeded apart from the arrivals, so that a scenario and
	// its variants queue the same jobs); default 1: acme/app.
	Repos int `json:"repos,omitempty"`
	// Org, when set, is the organization steady jobs come from instead: repositories
	// and workflows drawn by weight (org.go), for the report's usage.
	Org *Org `json:"org,omitempty"`
	// RunnerRequests are the runner container's resource requests (default none): what
	// the usage records count as requested CPU and memory.
	RunnerRequests corev1.ResourceList `json:"runner_requests,omitempty"`
	// PodLabels is the pool's spec.usage.podLabels: runner pods labeled with their
	// job's repository and workflow, one pod patch per job (WithPodLabels).
	PodLabels bool `json:"pod_labels,omitempty"`
	// UsageEvents runs the controller with --usage-events: a RunnerUsage event for each
	// runner that ends, one write each (WithUsageEvents).
	UsageEvents bool `json:"usage_events,omitempty"`
	// Cache, when set, is the pool's one cache (spec.caches), mounted by the runner
	// container at /cache; a template without a storageClassName gets the simulated
	// cluster's local volumes (cluster.StorageClass). After the workload the pool is
	// deleted and its volumes counted (report.json's caches.volumes_left).
	Cache *v1alpha1.CacheSpec `json:"cache,omitempty"`
	// CacheSetup is how long a job's setup takes cold (images, toolchains, dependencies
	// fetched), WarmSetup how long on a cache volume last used by the job's own
	// repository. The runner waits the setup, then JobDuration. Without Cache every job
	// pays CacheSetup.
	CacheSetup time.Duration `json:"cache_setup,omitempty"`
	WarmSetup  time.Duration `json:"warm_setup,omitempty"`

	// Faults is played during the workload, from its start (package fault).
	Faults *fault.Schedule `json:"faults,omitempty"`

	// Fleet makes the pools a fleet of both demand sources, several credentials and
	// architectures, with the controller restarted before the workload (fleet.go).
	Fleet *FleetSpec `json:"fleet,omitempty"`
	// Pipeline, when set, is the workload instead of a burst or steady arrivals: runs
	// of jobs that need others (pipeline.go). The run then waits until every run has
	// completed and nothing changed for RerunSettle (default 1m): a run a disruption
	// left red may yet be re-run.
	Pipeline    *Pipeline     `json:"pipeline,omitempty"`
	RerunSettle time.Duration `json:"rerun_settle,omitempty"`
	// Disruption is the pool's spec.disruption: how long a busy runner holds up a
	// drain, and whether jobs killed by the infrastructure are re-run.
	Disruption *v1alpha1.DisruptionSpec `json:"disruption,omitempty"`

	// ContainerJobs, when set, puts the pool in Kubernetes mode (spec.containerMode) and
	// gives every burst or steady job a job container and services.
	ContainerJobs *ContainerJobsSpec `json:"container_jobs,omitempty"`

	// Timeout bounds the whole run after the workload starts.
	Timeout time.Duration `json:"timeout"`
}

var noLimits = simgithub.RateLimits{Disabled: true}

// jobsNamespace is where a Kubernetes-mode pool's workflow pods run
// (spec.containerMode.namespace): a namespace of their own, Pod Security baseline.
const jobsNamespace = "ci-jobs"

// ContainerJobsSpec is a scenario's container jobs and its pool's Kubernetes mode.
type ContainerJobsSpec struct {
	// Image is each job's container (`container:`); Services its service containers
	// (`services:`, name → image).
	Image    string            `json:"image"`
	Services map[string]string `json:"services,omitempty"`
	// Ports are the job container's `ports:`, ServicePorts each service's (name →
	// mappings such as "5432:5432").
	Ports        []string            `json:"ports,omitempty"`
	ServicePorts map[string][]string `json:"service_ports,omitempty"`
	// Credentials gives the job container `credentials:`: the hook makes a registry
	// Secret for each job.
	Credentials bool `json:"credentials,omitempty"`
	// Steps are each job's steps that run a container action (after its script steps).
	Steps []runnerapi.ContainerStep `json:"steps,omitempty"`
	// DockerfileEvery gives every n-th job (the 1st, the n+1-th, …) a Dockerfile action
	// step too, which fails it; 0: none.
	DockerfileEvery int `json:"dockerfile_every,omitempty"`
	// UnpullableEvery makes every n-th job's container image one that never pulls (of
	// cluster.UnpullableRegistry); 0: none.
	UnpullableEvery int `json:"unpullable_every,omitempty"`
	// SecondBurst, once the burst's runners are all gone, queues a second burst of that
	// many jobs alike, on the hook slots the first made (containerMode.isolation Runner
	// reuses them); 0: none.
	SecondBurst int `json:"second_burst,omitempty"`
	// PrepareJobTimeout is containerMode.prepareJobTimeout (0: the API's default), and
	// ImagePullGracePeriod the pool's recovery.imagePullGracePeriod (0: its default).
	PrepareJobTimeout    time.Duration `json:"prepare_job_timeout,omitempty"`
	ImagePullGracePeriod time.Duration `json:"image_pull_grace_period,omitempty"`
}

// options are the container options of the i-th job (from 0): a Dockerfile action step
// for every DockerfileEvery-th.
func (cj *ContainerJobsSpec) options(i int) *runnerapi.ContainerOptions {
	o := &runnerapi.ContainerOptions{Ports: cj.Ports, ServicePorts: cj.ServicePorts, Credentials: cj.Credentials, Steps: cj.Steps}
	o = o.Clone()
	if n := cj.DockerfileEvery; n > 0 && i%n == 0 {
		o.Steps = append(o.Steps, runnerapi.ContainerStep{Name: "build-image", Action: dockerfileAction})
	}
	return o
}

// dockerfileAction is the Dockerfile action of a scenario's DockerfileEvery-th jobs.
const dockerfileAction = "acme/build-image@v1"

// unpullable is image moved to the registry that never answers.
func unpullable(image string) string { return cluster.UnpullableRegistry + "/" + image }

// FaultsSchedule is the faults scenario's schedule: while jobs arrive steadily, each
// kind of fault in turn, then the controller killed, then a node lost under busy
// runners.
var FaultsSchedule = fault.Schedule{Seed: 1, Steps: []fault.Step{
	{Name: "webhooks dropped", At: sec(10), For: sec(30), WebhookDrop: &fault.WebhookDrop{Rate: 0.3}},
	{Name: "runner endpoints answer 503", At: sec(20), For: sec(20), APIErrors: &fault.APIErrors{Rate: 0.3, Status: 503}},
	{Name: "primary rate limit exhausted", At: sec(45), For: sec(20), RateLimit: &fault.RateLimit{Kind: fault.RateLimitPrimary, Limit: 30}},
	{Name: "controller SIGKILLed", At: sec(70), For: sec(5), ControllerKill: &fault.ControllerKill{Signal: "KILL"}},
	{Name: "secondary rate limit", At: sec(85), For: sec(20), RateLimit: &fault.RateLimit{Kind: fault.RateLimitSecondary, PointsPerMinute: 100}},
	{Name: "node lost", At: sec(100), NodeLost: &fault.NodeLost{How: fault.NodeLossHeartbeat}},
}}

// CacheSchedule is the cache scenario's: a node deleted half-way through the arrivals,
// its volumes with it.
var CacheSchedule = fault.Schedule{Seed: 1, Steps: []fault.Step{
	{Name: "node lost", At: sec(120), NodeLost: &fault.NodeLost{How: fault.NodeLossDelete}},
}}

// cacheScenario is the cache scenario: one job a second over five repositories,
// each job's setup 20 s cold and 2 s on a volume its repository used last.
var cacheScenario = Scenario{
	Name: "cache", Description: "Poisson arrivals, 1 job/s for 4 minutes over 5 repositories, 10 s jobs after a setup of 20 s cold or 2 s on a volume of the same repository, a pool with a cache (ReadWriteOnce local volumes, WaitForFirstConsumer, maxVolumes 60); a node deleted at 120 s; the pool deleted at the end",
	Rate: 1, Steady: 4 * time.Minute, JobDuration: 10 * time.Second, Repos: 5,
	CacheSetup: 20 * time.Second, WarmSetup: 2 * time.Second,
	Cache: &v1alpha1.CacheSpec{
		Name: "build-cache", MaxVolumes: ptr.To[int32](60), ReclaimPolicy: v1alpha1.CacheReclaimDelete,
		VolumeClaimTemplate: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	},
	MaxRunners: 80, Nodes: 8, PodStartDelay: time.Second, RateLimits: noLimits, Timeout: 12 * time.Minute,
	NodeLostTimeout: 15 * time.Second, UnreachableToleration: 5 * time.Second, NodeMonitorGracePeriod: 20 * time.Second,
	FailedRunnerRetention: 20 * time.Second, RunnerLostTimeout: 30 * time.Second,
	Faults: &CacheSchedule,
}

// withoutCache is sc without its cache, named NAME-off: the same jobs, each paying the
// cold setup.
func withoutCache(sc Scenario) Scenario {
	sc.Name, sc.Cache = sc.Name+"-off", nil
	sc.Description = "the cache scenario without the cache: " + sc.Description
	return sc
}

func sec(s float64) simgithub.Duration { return simgithub.Duration(s * float64(time.Second)) }

// Scenarios are the built-in workloads; burst-scaleset and steady-scaleset are burst
// and steady with their demand from a runner scale set (WithDemandSource).
var Scenarios = withScaleSetVariants(map[string]Scenario{
	"demo": {
		Name: "demo", Description: "a friendly first run: 40 jobs queued at once, 5 s each, pods start in 1 s",
		Burst: 40, JobDuration: 5 * time.Second, MaxRunners: 100, Nodes: 4,
		PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 3 * time.Minute,
	},
	"burst": {
		Name: "burst", Description: "a 500-job matrix queued at once, 10 s jobs, pods start in 1 s, rate limits off (as on GHES)",
		Burst: 500, JobDuration: 10 * time.Second, MaxRunners: 600, Nodes: 10,
		PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 10 * time.Minute,
	},
	"burst-limited": {
		Name: "burst-limited", Description: "the burst with github.com's primary and secondary rate limits on",
		Burst: 500, JobDuration: 10 * time.Second, MaxRunners: 600, Nodes: 10,
		PodStartDelay: time.Second, RateLimits: simgithub.RateLimits{}, RunnerLostTimeout: time.Minute, Timeout: 15 * time.Minute,
	},
	"burst-limited-token": {
		Name: "burst-limited-token", Description: "the burst with github.com's rate limits on, registrationMode RegistrationToken",
		Burst: 500, JobDuration: 10 * time.Second, MaxRunners: 600, Nodes: 10, Mode: v1alpha1.RegistrationModeRegistrationToken,
		PodStartDelay: time.Second, RateLimits: simgithub.RateLimits{}, RunnerLostTimeout: time.Minute, Timeout: 15 * time.Minute,
	},
	"steady": {
		Name: "steady", Description: "Poisson arrivals, 5 jobs/s for a minute, 20 s jobs on average, from 8 repositories and 13 workflows of an organization; runner pods request 1 CPU and 2 GiB",
		Rate: 5, Steady: time.Minute, JobDuration: 20 * time.Second, MaxRunners: 300, Nodes: 10,
		Org: AcmeOrg, RunnerRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 10 * time.Minute,
	},
	"steady-warm-history": {
		// steady-warm on a pool that saw the same traffic at this hour yesterday: its
		// status carries that history, as a controller that ran then wrote it.
		Name: "steady-warm-history", Description: "steady-warm on a pool whose status has the same hour of a past day: 300 jobs a minute, a 1.2 s runner start",
		Rate: 5, Steady: time.Minute, JobDuration: 20 * time.Second, MaxRunners: 300, Nodes: 10,
		Warm: &v1alpha1.WarmSpec{Predictive: &v1alpha1.PredictiveWarmSpec{TargetMissPercent: "0.5", MaxIdle: 40,
			Cooldown: &metav1.Duration{Duration: time.Minute}}},
		WarmHistory:   &WarmHistory{JobsPerMinute: 300, Start: 1200 * time.Millisecond},
		PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 10 * time.Minute,
	},
	"steady-warm": {
		// The steady workload on a predictive pool: its idle runners are sized from the
		// arrival rate and start time it measures, for at most 1 % of jobs waiting.
		Name: "steady-warm", Description: "steady (Poisson arrivals, 5 jobs/s for a minute, 20 s jobs) on a predictive pool: spec.warm.predictive targetMissPercent 0.5, maxIdle 40, cooldown 1m",
		Rate: 5, Steady: time.Minute, JobDuration: 20 * time.Second, MaxRunners: 300, Nodes: 10,
		Warm: &v1alpha1.WarmSpec{Predictive: &v1alpha1.PredictiveWarmSpec{TargetMissPercent: "0.5", MaxIdle: 40,
			Cooldown: &metav1.Duration{Duration: time.Minute}}},
		PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 10 * time.Minute,
	},
	"scale": {
		// No runner-lost detection: 5,000 runners renewing their jobs would load the
		// machine with calls that measure nothing.
		Name: "scale", Description: "5,000 concurrent runners: 5,000 jobs of 2 minutes queued at once, 0 → 5,000 → 0",
		Burst: 5000, JobDuration: 2 * time.Minute, MaxRunners: 5000, Nodes: 50,
		PodStartDelay: time.Second, RateLimits: noLimits, Timeout: 30 * time.Minute,
	},
	"faults": {
		Name: "faults", Description: "a burst of 100, then 2 jobs/s for 150 s (20 s jobs) while webhooks are dropped, runner endpoints fail and are rate limited (primary, then secondary), the controller is SIGKILLed and restarted, and the busiest node is lost",
		Burst: 100, Rate: 2, Steady: 150 * time.Second, JobDuration: 20 * time.Second, MaxRunners: 300, Nodes: 4,
		PodStartDelay: time.Second, RateLimits: noLimits, Timeout: 15 * time.Minute,
		NodeLostTimeout: 15 * time.Second, UnreachableToleration: 5 * time.Second, NodeMonitorGracePeriod: 20 * time.Second,
		FailedRunnerRetention: 20 * time.Second, RunnerLostTimeout: 30 * time.Second,
		Faults: &FaultsSchedule,
	},
	// Many scale-set pools in one controller: what they cost idle, and a burst that
	// lands on some of them. maxRunners is each pool's own: 20 lets a pool of the
	// burst run its 10 jobs at once.
	"idle-scalesets": {
		Name: "idle-scalesets", Description: "200 scale-set pools, no jobs: the controller measured idle for 2 minutes once all 200 sessions are open (long poll held 50 s, as GitHub's)",
		Pools: 200, DemandSource: v1alpha1.DemandSourceScaleSet, Idle: 2 * time.Minute, MaxRunners: 10, Nodes: 2,
		PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 5 * time.Minute,
	},
	"burst-scalesets-50": {
		Name: "burst-scalesets-50", Description: "200 scale-set pools; a 500-job burst spread round-robin over 50 of them (10 jobs each, runs-on naming the pool's scale set), 10 s jobs, pods start in 1 s",
		Pools: 200, BurstPools: 50, DemandSource: v1alpha1.DemandSourceScaleSet,
		Burst: 500, JobDuration: 10 * time.Second, MaxRunners: 20, Nodes: 10,
		PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 10 * time.Minute,
	},
	"fleet":                fleetScenario,
	"cache":                cacheScenario,
	"cache-off":            withoutCache(cacheScenario),
	"disruptions":          disruptionsScenario,
	"disruptions-no-rerun": withoutRerun(disruptionsScenario),
	"disruptions-short":    shortDisruptions(disruptionsScenario),
	"container-jobs": {
		Name: "container-jobs", Description: "two bursts of 60 container jobs, 10 s each, on a pool in Kubernetes mode (workflow pods in ci-jobs), the second once the first's runners are gone, on the hook slots the first made; each job: container node:22 with registry credentials, services postgres:17 (ports 5432:5432) and redis:7 (no ports), an image action step (docker://alpine:3.20); every 12th job's image never pulls, every 20th job adds a Dockerfile action step (prepareJobTimeout 2m, imagePullGracePeriod 15s, failed runners kept 20 s)",
		Burst: 60, JobDuration: 10 * time.Second, MaxRunners: 100, Nodes: 6,
		ContainerJobs: &ContainerJobsSpec{Image: "node:22", Credentials: true,
			Services:        map[string]string{"postgres": "postgres:17", "redis": "redis:7"},
			ServicePorts:    map[string][]string{"postgres": {"5432:5432"}},
			Steps:           []runnerapi.ContainerStep{{Name: "lint", Image: "alpine:3.20", Entrypoint: "sh"}},
			UnpullableEvery: 12, DockerfileEvery: 20, SecondBurst: 60,
			PrepareJobTimeout: 2 * time.Minute, ImagePullGracePeriod: 15 * time.Second},
		// A runner Gantry failed for its workflow pod is kept 20 s (not 10 minutes), so
		// that the pool drains within the run.
		FailedRunnerRetention: 20 * time.Second,
		PodStartDelay:         time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 10 * time.Minute,
	},
}, "burst", "steady", "disruptions")

// withScaleSetVariants adds to scenarios the ScaleSet variant of each of names, derived
// rather than written out so that a variant and its scenario cannot drift apart.
func withScaleSetVariants(scenarios map[string]Scenario, names ...string) map[string]Scenario {
	for _, n := range names {
		v := WithDemandSource(scenarios[n], v1alpha1.DemandSourceScaleSet)
		scenarios[v.Name] = v
	}
	return scenarios
}

// demandVariants are what WithDemandSource appends to the name and description of a
// scenario it moves to a demand source.
var demandVariants = map[v1alpha1.DemandSource]struct{ suffix, note string }{
	v1alpha1.DemandSourceWebhook:  {"-webhook", ", demand from webhooks (spec.demand.source Webhook)"},
	v1alpha1.DemandSourceScaleSet: {"-scaleset", ", demand from a runner scale set (spec.demand.source ScaleSet)"},
}

// ParseDemandSource reads a demand source, Webhook or ScaleSet, in any case.
func ParseDemandSource(s string) (v1alpha1.DemandSource, error) {
	for _, src := range []v1alpha1.DemandSource{v1alpha1.DemandSourceWebhook, v1alpha1.DemandSourceScaleSet} {
		if strings.EqualFold(strings.TrimSpace(s), string(src)) {
			return src, nil
		}
	}
	return "", fmt.Errorf("unknown demand source %q: want Webhook or ScaleSet", s)
}

// WithDemandSource is sc with its pool's demand from src: the same workload and system,
// only spec.demand.source differs. A scenario that changes source changes name too —
// NAME-scaleset (NAME-webhook), or back to NAME when sc was itself derived — because
// baselines and targets are keyed by scenario name: a run on the other source must
// neither be compared with the scenario's own runs nor judged by its targets.
func WithDemandSource(sc Scenario, src v1alpha1.DemandSource) Scenario {
	from := sc.demandSource()
	if from == src {
		return sc
	}
	was, to := demandVariants[from], demandVariants[src]
	name, derived := strings.CutSuffix(sc.Name, was.suffix)
	desc, noted := strings.CutSuffix(sc.Description, was.note)
	if derived && noted {
		sc.Name, sc.Description = name, desc
	} else {
		sc.Name, sc.Description = sc.Name+to.suffix, sc.Description+to.note
	}
	sc.DemandSource = src
	return sc
}

// demandSource is the pool's demand source, Webhook when the scenario names none.
func (s Scenario) demandSource() v1alpha1.DemandSource {
	if s.DemandSource == "" {
		return v1alpha1.DemandSourceWebhook
	}
	return s.DemandSource
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

// TraceScenario replays a trace at speed (≤ 0: 1) on a pool sized for it: labels the
// union of the trace's, maxRunners its peak concurrency plus a fifth (at least 10),
// a node per 100 runners (at least 2).
func TraceScenario(tr trace.Trace, file string, speed float64) Scenario {
	if speed <= 0 {
		speed = 1
	}
	peak := tr.PeakConcurrency()
	maxRunners := max(10, int32(math.Ceil(float64(peak)*1.2)))
	span := time.Duration(float64(tr.Span()) / speed)
	return Scenario{
		Name:        "trace",
		Description: fmt.Sprintf("replay of %s: %d jobs over %s at %gx, peak %d concurrent", file, len(tr.Jobs), span.Round(time.Second), speed, peak),
		Trace:       &tr, TraceFile: file, TraceSpeed: speed,
		Labels: tr.Labels(), MaxRunners: maxRunners, Nodes: max(2, int(maxRunners+99)/100),
		PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute,
		Timeout: span + 10*time.Minute,
	}
}

// Validate checks what a run needs of a scenario.
func (s Scenario) Validate() error {
	var errs []error
	if h := s.WarmHistory; h != nil && (s.Warm == nil || s.Warm.Predictive == nil || h.JobsPerMinute <= 0 || h.Start <= 0) {
		errs = append(errs, errors.New("warm_history needs a predictive warm spec, jobs_per_minute above 0 and a start time"))
	}
	if s.Trace == nil && s.Burst <= 0 && (s.Rate <= 0 || s.Steady <= 0) && s.Idle <= 0 && s.Pipeline == nil {
		errs = append(errs, errors.New("the scenario queues no jobs and measures no idle window: set burst, rate and steady, a trace, a pipeline, or idle"))
	}
	if p := s.Pipeline; p != nil {
		if err := p.validate(); err != nil {
			errs = append(errs, err)
		}
		if s.Trace != nil || s.Burst > 0 || s.Rate > 0 || s.pools() > 1 || s.ContainerJobs != nil {
			errs = append(errs, errors.New("a pipeline is the whole workload, of one pool: no burst, steady arrivals, trace or container jobs beside it"))
		}
	}
	if s.Pools < 0 || s.BurstPools < 0 || s.Idle < 0 {
		errs = append(errs, errors.New("pools, burst_pools and idle must not be negative"))
	}
	if s.Pools > 1 && s.demandSource() != v1alpha1.DemandSourceScaleSet && s.Fleet == nil {
		// Webhook pools are matched to jobs by their labels: pools of one spec would all
		// claim every job. A scale set is named, and a job can name it.
		errs = append(errs, fmt.Errorf("pools %d needs demand_source ScaleSet: webhook pools of the same labels would all claim every job (run it with one pool, or on ScaleSet)", s.Pools))
	}
	if s.Pools > 1 && (s.Trace != nil || s.Rate > 0 || s.Steady > 0) {
		errs = append(errs, fmt.Errorf("pools %d takes a burst only: steady arrivals and trace replays go to one pool", s.Pools))
	}
	if s.BurstPools > s.pools() {
		errs = append(errs, fmt.Errorf("burst_pools %d is more than the scenario's %d pool(s)", s.BurstPools, s.pools()))
	}
	if s.MaxRunners <= 0 || s.Nodes <= 0 || s.Timeout <= 0 {
		errs = append(errs, errors.New("max_runners, nodes and timeout must be positive"))
	}
	if _, ok := demandVariants[s.demandSource()]; !ok {
		errs = append(errs, fmt.Errorf("demand_source %q: want Webhook or ScaleSet", s.DemandSource))
	}
	if s.Repos < 0 || s.CacheSetup < 0 || s.WarmSetup < 0 {
		errs = append(errs, errors.New("repos, cache_setup and warm_setup must not be negative"))
	}
	if s.Org != nil && (s.Repos > 1 || s.Trace != nil || s.Rate <= 0 || len(s.Org.Repos) == 0) {
		errs = append(errs, errors.New("org spreads steady jobs (rate and steady) over its repositories: give it repositories, and set neither repos nor a trace"))
	}
	if s.Cache != nil && s.pools() > 1 {
		errs = append(errs, errors.New("a cache needs one pool: its volumes are counted after the pool is deleted"))
	}
	if s.Faults != nil {
		if err := s.Faults.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Fleet != nil {
		if err := s.Fleet.validate(); err != nil {
			errs = append(errs, err)
		}
		if err := s.validateSinglePool(); err != nil {
			errs = append(errs, err)
		}
	}
	if cj := s.ContainerJobs; cj != nil {
		if cj.Image == "" || cj.UnpullableEvery < 0 || cj.DockerfileEvery < 0 || cj.SecondBurst < 0 || cj.PrepareJobTimeout < 0 || cj.ImagePullGracePeriod < 0 {
			errs = append(errs, errors.New("container_jobs needs an image; unpullable_every, dockerfile_every, second_burst, prepare_job_timeout and image_pull_grace_period must not be negative"))
		}
		if cj.SecondBurst > 0 && s.Burst == 0 {
			errs = append(errs, errors.New("container_jobs.second_burst follows a burst: set burst"))
		}
		if err := simgithub.ValidateContainers(cj.Image, cj.Services, cj.options(0)); err != nil {
			errs = append(errs, fmt.Errorf("container_jobs: %w", err))
		}
		if s.Trace != nil {
			errs = append(errs, errors.New("container_jobs applies to burst and steady jobs, not to a trace (whose jobs say their own containers)"))
		}
	}
	return errors.Join(errs...)
}

// watchedNamespaces are the namespaces the controller watches (--namespaces): the
// pools'; nil (every namespace, as the default install) with a Kubernetes-mode pool,
// whose runners' workflow pods are in namespaces of their own
// (containerMode.isolation Runner).
func (s Scenario) watchedNamespaces() []string {
	if s.ContainerJobs != nil {
		return nil
	}
	return []string{namespace}
}

// pools is how many pools the scenario creates: Pools, at least 1.
func (s Scenario) pools() int { return max(1, s.Pools) }

// poolNames are the names of the scenario's pools, in order: linux alone, or linux-001,
// linux-002, … (three digits at least, so that they sort in order). Each is also its
// pool's scale-set name.
func (s Scenario) poolNames() []string {
	n := s.pools()
	if n == 1 {
		return []string{poolName}
	}
	width := max(3, len(strconv.Itoa(n)))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%0*d", poolName, width, i+1)
	}
	return names
}

// burstPools are the names of the pools the burst is spread over: the first BurstPools
// (default: all).
func (s Scenario) burstPools() []string {
	names := s.poolNames()
	if s.BurstPools > 0 && s.BurstPools < len(names) {
		names = names[:s.BurstPools]
	}
	return names
}

// poolLabels are the labels of the scenario's pools.
func (s Scenario) poolLabels() []string {
	if len(s.Labels) > 0 {
		return s.Labels
	}
	return []string{"linux", "x64"}
}

// jobLabels are the runs-on labels of burst and steady jobs of a single pool's
// scenario (Scenario.workload spreads a burst over many pools by scale-set name).
func (s Scenario) jobLabels() []string {
	return append([]string{"self-hosted"}, s.poolLabels()...)
}

// hasFloor reports whether a run measures the floor: a burst or steady workload
// without faults or container jobs (a trace or a fault schedule has no oracle to
// compare with) whose
// demand comes from webhooks, on one pool. The oracle registers classic JIT runners,
// and the scale set a ScaleSet pool leaves on the simulator would be assigned the
// oracle's jobs, which those runners could then never take; and it serves one pool.
func (s Scenario) hasFloor() bool {
	// The oracle's runners have no hook identity: container jobs have no floor.
	return s.Trace == nil && s.Faults == nil && s.ContainerJobs == nil && s.demandSource() == v1alpha1.DemandSourceWebhook && s.pools() == 1 &&
		(s.Burst > 0 || (s.Rate > 0 && s.Steady > 0))
}

// waitsForSessions reports whether the workload waits until every pool's scale-set
// session is open: with many pools, whose sessions take a while to open, and before an
// idle window, which measures them open. A single pool's burst starts at once, as it
// always did: its session opens as the jobs arrive.
func (s Scenario) waitsForSessions() bool {
	return s.demandSource() == v1alpha1.DemandSourceScaleSet && (s.pools() > 1 || s.Idle > 0)
}
