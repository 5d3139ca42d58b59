package run

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Figures are the numbers of a report that a benchmark baseline keeps, with the
// conditions they were measured in. Figures added after the first baselines are
// pointers: absent (not measured) in an older baseline or report.
type Figures struct {
	JobsTotal         int     `json:"jobs_total"`
	JobsNeverPickedUp int     `json:"jobs_never_picked_up"`
	PickupP99         float64 `json:"pickup_p99"`
	ReactionP99       float64 `json:"reaction_p99"`
	DrainSeconds      float64 `json:"drain_seconds"`
	RESTCallsPerJob   float64 `json:"rest_calls_per_job"`
	// KubeWritesPerJob is the controller's own writes; KubeWritesPerJobWithCollector
	// adds the garbage collector's deletes made for it (absent in baselines from
	// before they were counted).
	KubeWritesPerJob              float64  `json:"kube_api_writes_per_job"`
	KubeWritesPerJobWithCollector *float64 `json:"kube_api_writes_per_job_with_collector,omitempty"`
	IdleRunnerSeconds             float64  `json:"idle_runner_seconds"`
	BusyRunnersKilled             int      `json:"busy_runners_killed"`
	Leftover                      int      `json:"leftover"`
	CPUSeconds                    float64  `json:"controller_cpu_seconds"`
	PeakRSSMiB                    float64  `json:"controller_peak_rss_mib"`
	// JobsLost and RecoverySeconds come from a fault schedule (-1: never recovered);
	// absent without one.
	JobsLost        *int     `json:"jobs_lost,omitempty"`
	RecoverySeconds *float64 `json:"recovery_seconds,omitempty"`
	// The floor of the same run (report.json's floor): the oracle's p99s and CPU per job.
	FloorPickupP99   *float64 `json:"floor_pickup_p99,omitempty"`
	FloorReactionP99 *float64 `json:"floor_reaction_p99,omitempty"`
	FloorCPUMsPerJob *float64 `json:"floor_cpu_ms_per_job,omitempty"`
	// From the kube-apiserver's audit log of the controller's requests.
	UncachedReadsPerJob  *float64 `json:"kube_api_uncached_reads_per_job,omitempty"`
	PoolStatusWritesPeak *float64 `json:"pool_status_writes_per_second_peak_10s,omitempty"`
	CPUMsPerJob          *float64 `json:"controller_cpu_ms_per_job,omitempty"`
	// GitHub calls per job on the Actions service, and on both APIs.
	ActionsServiceCallsPerJob *float64 `json:"actions_service_calls_per_job,omitempty"`
	GitHubCallsPerJob         *float64 `json:"github_calls_per_job,omitempty"`
	// RunnersBeyondDemand is the runners created beyond one per job and each pool's
	// spec.minIdle.
	RunnersBeyondDemand *float64 `json:"runners_created_beyond_demand,omitempty"`
	// Many pools: how long after the controller was ready every pool's session was
	// open (-1: not all within the wait).
	SessionsOpenSeconds *float64 `json:"sessions_open_seconds,omitempty"`
	// The idle window (report.json's idle): the controller with every pool's session
	// open and no job.
	IdleGoroutines                          *float64 `json:"idle_goroutines,omitempty"`
	IdleRSSMiB                              *float64 `json:"idle_rss_mib,omitempty"`
	IdleCPUSecondsPerMinute                 *float64 `json:"idle_cpu_seconds_per_minute,omitempty"`
	IdleActionsServiceCallsPerMinute        *float64 `json:"idle_actions_service_calls_per_minute,omitempty"`
	IdleActionsServiceCallsPerMinutePerPool *float64 `json:"idle_actions_service_calls_per_minute_per_pool,omitempty"`
	IdleRESTCallsPerMinute                  *float64 `json:"idle_rest_calls_per_minute,omitempty"`
	// From the kube-apiserver's audit log: every write made on the controller's behalf
	// from the workload's start, per job (report.json's kube_api.workload_writes_per_job).
	WorkloadWritesPerJob *float64 `json:"kube_api_workload_writes_per_job,omitempty"`
	// A fleet (report.json's fleet): its nodes, the controller's node list calls, every
	// session open after the controller's start and after its restart (the wait's bound,
	// 300, when not all opened), and the idle pools' status writes per pool and 10
	// minutes.
	FleetNodes                       *float64 `json:"fleet_nodes,omitempty"`
	NodeListCalls                    *float64 `json:"node_list_calls,omitempty"`
	SessionsFromStartSeconds         *float64 `json:"sessions_from_start_seconds,omitempty"`
	RestartSessionsSeconds           *float64 `json:"restart_sessions_seconds,omitempty"`
	IdlePoolStatusWritesPer10Minutes *float64 `json:"idle_pool_status_writes_per_pool_per_10_minutes,omitempty"`
	// A fleet's single-pool burst (report.json's fleet.single_pool_burst): its pickup p99
	// and writes per job, and the fleet burst's pickup p99 over its (absent unless it
	// ended clean).
	SinglePoolPickupP99     *float64 `json:"single_pool_pickup_p99,omitempty"`
	SinglePoolWritesPerJob  *float64 `json:"single_pool_writes_per_job,omitempty"`
	PickupP99OverSinglePool *float64 `json:"pickup_p99_over_single_pool,omitempty"`
	// Container jobs (report.json's container_jobs): workflow and runner pod start p99,
	// the failed container jobs that ended no sooner than the hook's own timeout, and
	// the hooks' writes per job they ran.
	WorkflowPodStartP99 *float64 `json:"workflow_pod_start_p99,omitempty"`
	RunnerPodStartP99   *float64 `json:"runner_pod_start_p99,omitempty"`
	ContainerJobsSlow   *int     `json:"container_jobs_failed_slow,omitempty"`
	HookWritesPerJob    *float64 `json:"hook_writes_per_job,omitempty"`
	// The pods with a hostPort, the port-mapped jobs not green, and the writes per job
	// on the controller's behalf of the first burst (new hook slots included) and of the
	// second (the first's slots reused).
	PodsWithHostPort        *int     `json:"pods_with_host_port,omitempty"`
	PortMappedJobsFailed    *int     `json:"port_mapped_jobs_failed,omitempty"`
	FirstBurstWritesPerJob  *float64 `json:"first_burst_writes_per_job,omitempty"`
	SecondBurstWritesPerJob *float64 `json:"second_burst_writes_per_job,omitempty"`
	// Disruptions (report.json's disruptions): busy runners a drain or consolidation
	// killed, jobs the infrastructure killed that did not end green on one re-run, jobs
	// re-run twice, failures of the jobs' own re-run, and the longest a drain went on
	// after the last job on its node.
	VoluntaryKills       *int     `json:"busy_runners_killed_by_voluntary_disruption,omitempty"`
	KilledNotRerunGreen  *int     `json:"jobs_killed_not_green_on_rerun,omitempty"`
	JobsRerunTwice       *int     `json:"jobs_rerun_twice,omitempty"`
	OwnFailuresRerun     *int     `json:"jobs_failed_on_their_own_rerun,omitempty"`
	DrainAfterLastJobMax *float64 `json:"drain_after_last_job_max,omitempty"`
	// Conditions, not compared: the pool's demand source (absent: Webhook, the only
	// one before), when, on how many CPUs, under what load (1-minute average at the
	// start and the end of the run).
	DemandSource v1alpha1.DemandSource `json:"demand_source,omitempty"`
	MeasuredAt   time.Time             `json:"measured_at"`
	CPUs         int                   `json:"cpus"`
	Load         [2]float64            `json:"load_avg_1m"`
}

// FiguresOf extracts a report's figures.
func FiguresOf(r *Report) Figures {
	f := Figures{
		JobsTotal: r.JobsTotal, JobsNeverPickedUp: r.JobsNeverPickedUp,
		PickupP99: r.PickupSeconds.P99, ReactionP99: r.ReactionSeconds.P99, DrainSeconds: r.DrainSeconds,
		RESTCallsPerJob: r.RESTCallsPerJob, KubeWritesPerJob: r.KubeWritesPerJob, IdleRunnerSeconds: r.IdleRunnerSeconds, BusyRunnersKilled: r.BusyRunnersKilled,
		Leftover:   r.Leftover.Total(),
		CPUSeconds: round1(r.Controller.CPUSeconds), PeakRSSMiB: round1(float64(r.Controller.PeakRSSBytes) / (1 << 20)),
		ActionsServiceCallsPerJob: val(r.ActionsServiceCallsPerJob), GitHubCallsPerJob: val(r.GitHubCallsPerJob),
		KubeWritesPerJobWithCollector: r.KubeWritesPerJobWithCollector,
		DemandSource:                  r.DemandSource, MeasuredAt: r.StartedAt.UTC().Truncate(time.Second), CPUs: r.Host.CPUs,
		Load: [2]float64{r.Host.LoadAvgStart[0], r.Host.LoadAvgEnd[0]},
	}
	if r.JobsTotal > 0 {
		pools := max(1, r.ScenarioParameters.Pools)
		f.RunnersBeyondDemand = intFig(r.RunnersCreated - r.JobsTotal - int(r.ScenarioParameters.MinIdle)*pools)
	}
	if r.Faults != nil {
		lost, rec := r.Faults.JobsLost, -1.0
		if r.Faults.RecoverySeconds != nil {
			rec = *r.Faults.RecoverySeconds
		}
		f.JobsLost, f.RecoverySeconds = &lost, &rec
	}
	if fl := r.Floor; fl != nil && fl.Error == "" && fl.Finished {
		f.FloorPickupP99, f.FloorReactionP99 = val(fl.PickupSeconds.P99), val(fl.ReactionSeconds.P99)
		f.FloorCPUMsPerJob = fl.CPUMsPerJob
	}
	if k := r.KubeAPI; k != nil {
		f.UncachedReadsPerJob, f.PoolStatusWritesPeak = val(k.UncachedReadsPerJob), val(k.PoolStatusWritesPeak)
		if r.JobsTotal > 0 {
			f.WorkloadWritesPerJob = val(k.WorkloadWritesPerJob)
		}
	}
	if fl := r.Fleet; fl != nil {
		f.FleetNodes, f.NodeListCalls = intFig(fl.Nodes), val(float64(fl.NodeListCalls))
		f.IdlePoolStatusWritesPer10Minutes = val(fl.IdlePoolStatusWritesPer10Minutes)
		if sp := fl.SinglePoolBurst; sp != nil {
			f.SinglePoolPickupP99, f.SinglePoolWritesPerJob = val(sp.PickupSeconds.P99), val(sp.WritesPerJob)
		}
		f.PickupP99OverSinglePool = fl.BurstPickupP99OverSinglePool
		if rs := fl.Restart; rs != nil {
			f.RestartSessionsSeconds = val(sessionsWait.Seconds())
			if rs.SessionsSeconds != nil {
				f.RestartSessionsSeconds = val(*rs.SessionsSeconds)
			}
		}
	}
	if s := r.Sessions; s != nil && s.SecondsFromStart != nil {
		f.SessionsFromStartSeconds = val(*s.SecondsFromStart)
	}
	if r.JobsTotal > 0 && r.Controller.Processes > 0 {
		f.CPUMsPerJob = val(r.ControllerCPUPerJob)
	}
	if c := r.ContainerJobs; c != nil {
		slow := len(c.JobsFailed) - c.JobsFailedFast
		f.WorkflowPodStartP99, f.RunnerPodStartP99 = val(c.WorkflowPodStart.P99), val(c.RunnerPodStart.P99)
		f.ContainerJobsSlow, f.HookWritesPerJob = &slow, val(c.HookWritesPerJob)
		failed := c.PortMappedJobs - c.PortMappedJobsGreen
		f.PodsWithHostPort, f.PortMappedJobsFailed = &c.PodsWithHostPort, &failed
		if len(c.Bursts) > 0 {
			f.FirstBurstWritesPerJob = val(c.Bursts[0].WritesPerJob)
		}
		if len(c.Bursts) > 1 {
			f.SecondBurstWritesPerJob = val(c.Bursts[1].WritesPerJob)
		}
	}
	if d := r.Disruptions; d != nil {
		f.VoluntaryKills, f.JobsRerunTwice, f.OwnFailuresRerun = &d.BusyRunnersKilledVoluntarily, &d.JobsRerunTwice, &d.JobsFailedOnTheirOwnRerun
		notGreen := d.JobsKilledTotal - d.JobsRerunGreen
		f.KilledNotRerunGreen = &notGreen
		worst := 0.0
		for _, dr := range d.Drains {
			worst = max(worst, dr.OverSeconds)
		}
		f.DrainAfterLastJobMax = &worst
	}
	if s := r.Sessions; s != nil {
		f.SessionsOpenSeconds = val(-1)
		if s.Seconds != nil {
			f.SessionsOpenSeconds = val(*s.Seconds)
		}
	}
	if i := r.Idle; i != nil {
		f.IdleCPUSecondsPerMinute = val(i.CPUSecondsPerMinute)
		f.IdleActionsServiceCallsPerMinute = val(i.ActionsServiceCallsPerMinute)
		f.IdleActionsServiceCallsPerMinutePerPool = val(i.ActionsServiceCallsPerMinutePerPool)
		f.IdleRESTCallsPerMinute = val(i.RESTCallsPerMinute)
		if i.Goroutines > 0 { // 0: the metrics did not answer
			f.IdleGoroutines = val(float64(i.Goroutines))
		}
		if i.RSSBytes > 0 {
			f.IdleRSSMiB = val(round1(float64(i.RSSBytes) / (1 << 20)))
		}
	}
	return f
}

// Baseline maps a scenario to its figures.
type Baseline map[string]Figures

// ReadReport reads a report.json. A report older than schema version 4 is read as the
// newer: its pool took its demand from webhooks and made no Actions-service call (no
// controller spoke the service then), so all its GitHub calls were REST calls.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.SchemaVersion < 4 {
		r.DemandSource = v1alpha1.DemandSourceWebhook
		r.GitHubCallsPerJob = r.RESTCallsPerJob
	}
	return &r, nil
}

// figure is one row of the comparison: its value, and its floor where it has one.
type figure struct {
	name  string
	value func(Figures) *float64
	floor func(Figures) *float64
}

func val(x float64) *float64 { return &x }

func intFig(n int) *float64 { return val(float64(n)) }

// figures are the rows of the comparison, in order.
var figures = []figure{
	{name: "jobs", value: func(f Figures) *float64 { return intFig(f.JobsTotal) }},
	{name: "jobs never picked up", value: func(f Figures) *float64 { return intFig(f.JobsNeverPickedUp) }},
	{name: "pickup p99 (s)", value: func(f Figures) *float64 { return val(f.PickupP99) }, floor: func(f Figures) *float64 { return f.FloorPickupP99 }},
	{name: "reaction p99 (s)", value: func(f Figures) *float64 { return val(f.ReactionP99) }, floor: func(f Figures) *float64 { return f.FloorReactionP99 }},
	{name: "drain (s)", value: func(f Figures) *float64 { return val(f.DrainSeconds) }},
	{name: "REST calls per job", value: func(f Figures) *float64 { return val(f.RESTCallsPerJob) }, floor: constFloor(1)},
	{name: "Actions service calls per job", value: func(f Figures) *float64 { return f.ActionsServiceCallsPerJob }},
	{name: "GitHub calls per job", value: func(f Figures) *float64 { return f.GitHubCallsPerJob }, floor: constFloor(1)},
	{name: "runners created beyond jobs + minIdle", value: func(f Figures) *float64 { return f.RunnersBeyondDemand }},
	{name: "Kubernetes API writes per job", value: func(f Figures) *float64 { return f.KubeWritesPerJobWithCollector }, floor: constFloor(2)},
	{name: "controller's own writes per job", value: func(f Figures) *float64 { return val(f.KubeWritesPerJob) }},
	{name: "writes per job from the workload's start", value: func(f Figures) *float64 { return f.WorkloadWritesPerJob }},
	{name: "uncached reads per job", value: func(f Figures) *float64 { return f.UncachedReadsPerJob }, floor: constFloor(0)},
	{name: "pool status writes/s (busiest 10 s)", value: func(f Figures) *float64 { return f.PoolStatusWritesPeak }},
	{name: "idle runner-seconds", value: func(f Figures) *float64 { return val(f.IdleRunnerSeconds) }},
	{name: "busy runners killed", value: func(f Figures) *float64 { return intFig(f.BusyRunnersKilled) }},
	{name: "left over", value: func(f Figures) *float64 { return intFig(f.Leftover) }},
	{name: "controller CPU (s)", value: func(f Figures) *float64 { return val(f.CPUSeconds) }},
	{name: "controller CPU per job (ms)", value: func(f Figures) *float64 { return f.CPUMsPerJob }, floor: func(f Figures) *float64 { return f.FloorCPUMsPerJob }},
	{name: "controller peak RSS (MiB)", value: func(f Figures) *float64 { return val(f.PeakRSSMiB) }},
	{name: "jobs lost (faults)", value: func(f Figures) *float64 { return intPtr(f.JobsLost) }},
	{name: "worst recovery (s, -1 never)", value: func(f Figures) *float64 { return f.RecoverySeconds }},
	{name: "sessions all open (s, -1 never)", value: func(f Figures) *float64 { return f.SessionsOpenSeconds }},
	{name: "sessions all open from the controller's start (s)", value: func(f Figures) *float64 { return f.SessionsFromStartSeconds }},
	{name: "fleet: nodes", value: func(f Figures) *float64 { return f.FleetNodes }},
	{name: "fleet: node list calls", value: func(f Figures) *float64 { return f.NodeListCalls }},
	{name: "fleet: restart to all sessions open (s)", value: func(f Figures) *float64 { return f.RestartSessionsSeconds }},
	{name: "fleet: idle pool status writes per pool per 10 min", value: func(f Figures) *float64 { return f.IdlePoolStatusWritesPer10Minutes }},
	{name: "fleet: single-pool burst pickup p99 (s)", value: func(f Figures) *float64 { return f.SinglePoolPickupP99 }},
	{name: "fleet: burst pickup p99 / single pool's", value: func(f Figures) *float64 { return f.PickupP99OverSinglePool }},
	{name: "fleet: single-pool burst writes per job", value: func(f Figures) *float64 { return f.SinglePoolWritesPerJob }},
	{name: "idle: goroutines", value: func(f Figures) *float64 { return f.IdleGoroutines }},
	{name: "idle: controller RSS (MiB)", value: func(f Figures) *float64 { return f.IdleRSSMiB }},
	{name: "idle: controller CPU (s/min)", value: func(f Figures) *float64 { return f.IdleCPUSecondsPerMinute }},
	{name: "idle: Actions service calls/min", value: func(f Figures) *float64 { return f.IdleActionsServiceCallsPerMinute }},
	{name: "idle: Actions service calls/min per pool", value: func(f Figures) *float64 { return f.IdleActionsServiceCallsPerMinutePerPool }},
	{name: "idle: REST calls/min", value: func(f Figures) *float64 { return f.IdleRESTCallsPerMinute }},
	{name: "workflow pod start p99 (s)", value: func(f Figures) *float64 { return f.WorkflowPodStartP99 }},
	{name: "runner pod start p99 (s)", value: func(f Figures) *float64 { return f.RunnerPodStartP99 }},
	{name: "container jobs failed slow", value: func(f Figures) *float64 { return intPtr(f.ContainerJobsSlow) }},
	{name: "hook writes per job", value: func(f Figures) *float64 { return f.HookWritesPerJob }},
	{name: "pods with a hostPort", value: func(f Figures) *float64 { return intPtr(f.PodsWithHostPort) }},
	{name: "port-mapped jobs failed", value: func(f Figures) *float64 { return intPtr(f.PortMappedJobsFailed) }},
	{name: "writes per job, first burst", value: func(f Figures) *float64 { return f.FirstBurstWritesPerJob }},
	{name: "writes per job, slots reused", value: func(f Figures) *float64 { return f.SecondBurstWritesPerJob }},
	{name: "busy runners killed by a drain", value: func(f Figures) *float64 { return intPtr(f.VoluntaryKills) }},
	{name: "killed jobs not green on one re-run", value: func(f Figures) *float64 { return intPtr(f.KilledNotRerunGreen) }},
	{name: "jobs re-run twice", value: func(f Figures) *float64 { return intPtr(f.JobsRerunTwice) }},
	{name: "own failures re-run", value: func(f Figures) *float64 { return intPtr(f.OwnFailuresRerun) }},
	{name: "drain after its last job, worst (s)", value: func(f Figures) *float64 { return f.DrainAfterLastJobMax }},
}

// constFloor is a floor known by construction, in a run that measured the floor: the
// oracle makes one REST call and two writes per job, and reads nothing back.
func constFloor(x float64) func(Figures) *float64 {
	return func(f Figures) *float64 {
		if f.FloorPickupP99 == nil {
			return nil
		}
		return val(x)
	}
}

func intPtr(p *int) *float64 {
	if p == nil {
		return nil
	}
	return intFig(*p)
}

func figureNamed(name string) (figure, bool) {
	for _, f := range figures {
		if f.name == name {
			return f, true
		}
	}
	return figure{}, false
}

// Verdict is a target judged on a run's figures.
type Verdict struct {
	Target Target
	// Value, Floor and Ref (the figure of scenario Target.Of) are nil when not measured;
	// Limit is the largest acceptable value (Max, or Max times the floor or Ref).
	Value, Floor, Ref *float64
	Limit             float64
	Met               bool
	// RunRatios are, for a target relative to the floor judged on several runs
	// (JudgeRuns), each run's figure over its own floor, in run order.
	RunRatios []float64
}

// String is the target as a sentence fragment: "≤ 1.5× floor (3.00)", "≤ 1.2× burst
// (4.80)", "≤ 6".
func (v Verdict) String() string {
	switch {
	case v.Target.OfFloor && v.Floor == nil:
		return fmt.Sprintf("≤ %g× floor (no floor)", v.Target.Max)
	case v.Target.OfFloor && len(v.RunRatios) > 0:
		runs := make([]string, len(v.RunRatios))
		for i, r := range v.RunRatios {
			runs[i] = fmt.Sprintf("%.2f×", r)
		}
		return fmt.Sprintf("≤ %g× floor: median %.2f× of %s", v.Target.Max, median(v.RunRatios), strings.Join(runs, ", "))
	case v.Target.OfFloor:
		return fmt.Sprintf("≤ %g× floor (%.2f)", v.Target.Max, v.Limit)
	case v.Target.Of != "" && v.Ref == nil:
		return fmt.Sprintf("≤ %g× %s (not measured)", v.Target.Max, v.Target.Of)
	case v.Target.Of != "":
		return fmt.Sprintf("≤ %g× %s (%.2f)", v.Target.Max, v.Target.Of, v.Limit)
	}
	return fmt.Sprintf("≤ %g", v.Target.Max)
}

// Judge returns the verdicts of the targets of f's scenario. peers are the figures of
// the scenarios compared with it; a target relative to another scenario (Target.Of) is
// judged only when that scenario is among them (unjudged lists the others).
func Judge(scenario string, f Figures, peers map[string]Figures) []Verdict {
	var out []Verdict
	for _, t := range Targets {
		if t.Scenario != scenario {
			continue
		}
		ref, hasRef := peers[t.Of]
		if t.Of != "" && !hasRef {
			continue
		}
		v := Verdict{Target: t, Limit: t.Max}
		if fig, ok := figureNamed(t.Figure); ok {
			v.Value = fig.value(f)
			if fig.floor != nil {
				v.Floor = fig.floor(f)
			}
			if t.Of != "" {
				v.Ref = fig.value(ref)
			}
		}
		switch {
		case t.OfFloor:
			v.Limit = times(t.Max, v.Floor)
		case t.Of != "":
			v.Limit = times(t.Max, v.Ref)
		}
		v.Met = v.Value != nil && !math.IsNaN(v.Limit) && *v.Value <= v.Limit
		out = append(out, v)
	}
	return out
}

// times is max times *ref, rounded to hundredths; NaN when ref was not measured.
func times(limit float64, ref *float64) float64 {
	if ref == nil {
		return math.NaN()
	}
	return round2(limit * *ref)
}

// unjudged are the targets of scenario relative to a scenario not among peers.
func unjudged(scenario string, peers map[string]Figures) []Target {
	var out []Target
	for _, t := range Targets {
		if _, ok := peers[t.Of]; t.Scenario == scenario && t.Of != "" && !ok {
			out = append(out, t)
		}
	}
	return out
}

// Compare prints, per scenario, the baseline's figures next to the new ones with the
// change, the floor and the target of each (met or MISSED), the conditions of both
// runs (the demand source among them), and the targets missed, met and not judged.
// Several reports of one scenario are its repeated runs: compared as one, on their
// median figures (MedianFigures, JudgeRuns).
func Compare(base Baseline, reports []*Report) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tfigure\tbaseline\tnow\tchange\tfloor\tnow/floor\ttarget\t\t")
	runs, scenarios := RunsByScenario(reports)
	peers := map[string]Figures{}
	for s, fs := range runs {
		peers[s] = MedianFigures(fs)
	}
	var met, missed, notJudged []string
	for _, scenario := range scenarios {
		now := peers[scenario]
		old, ok := base[scenario]
		verdicts := map[string]Verdict{}
		for _, v := range JudgeRuns(scenario, runs[scenario], peers) {
			verdicts[v.Target.Figure] = v
			line := fmt.Sprintf("  %-20s %-36s %8s  (target %s)", scenario, v.Target.Figure, num(v.Value), v)
			if v.Met {
				met = append(met, "met     "+line)
			} else {
				missed = append(missed, "MISSED  "+line)
			}
		}
		for _, t := range unjudged(scenario, peers) {
			notJudged = append(notJudged, fmt.Sprintf("  %-20s %-36s target ≤ %g× %s's: %s is not in this comparison",
				scenario, t.Figure, t.Max, t.Of, t.Of))
		}
		for _, fig := range figures {
			nv := fig.value(now)
			if nv == nil && !ok {
				continue
			}
			var ov *float64
			if ok {
				ov = fig.value(old)
			}
			if nv == nil && ov == nil {
				continue
			}
			floor, perFloor := "", ""
			if fig.floor != nil {
				if fl := fig.floor(now); fl != nil {
					floor = num(fl)
					if r := floorRatio(fig, runs[scenario]); r != nil && nv != nil {
						perFloor = fmt.Sprintf("%.2f×", *r)
					}
				}
			}
			target, verdict := "", ""
			if v, has := verdicts[fig.name]; has {
				target, verdict = v.String(), "MISSED"
				if v.Met {
					verdict = "met"
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", scenario, fig.name, baselineCell(ok, ov), num(nv), change(ok, ov, nv), floor, perFloor, target, verdict)
		}
	}
	w.Flush()

	b.WriteString("\nMeasured on (latency figures depend on the machine and its load):\n")
	for _, scenario := range scenarios {
		now := peers[scenario]
		oldCond := "no baseline"
		if old, ok := base[scenario]; ok {
			oldCond = conditions(old)
			if demandSource(old) != demandSource(now) {
				oldCond += " — NOT COMPARABLE: another demand source"
			}
		}
		nowCond := conditions(now)
		if n := len(runs[scenario]); n > 1 {
			nowCond = fmt.Sprintf("median of %d runs from %s", n, nowCond)
		}
		fmt.Fprintf(&b, "  %-20s baseline: %s; now: %s\n", scenario, oldCond, nowCond)
	}
	if len(met)+len(missed)+len(notJudged) > 0 {
		b.WriteString("\nTargets (issues 5 and 13; × floor: the oracle's figure in the same run; × another scenario: its figure in this comparison):\n")
		for _, l := range append(missed, met...) {
			b.WriteString(l + "\n")
		}
		for _, l := range notJudged {
			b.WriteString("not judged" + l + "\n")
		}
	}
	return b.String()
}

// RunsByScenario groups reports by scenario, each scenario's runs in the order given,
// and returns the scenarios in name order.
func RunsByScenario(reports []*Report) (map[string][]Figures, []string) {
	runs := map[string][]Figures{}
	var scenarios []string
	for _, r := range reports {
		if _, seen := runs[r.Scenario]; !seen {
			scenarios = append(scenarios, r.Scenario)
		}
		runs[r.Scenario] = append(runs[r.Scenario], FiguresOf(r))
	}
	sort.Strings(scenarios)
	return runs, scenarios
}

// floorRatio is a figure over its floor: the median of the runs' own ratios; nil when
// a run lacks either.
func floorRatio(fig figure, runs []Figures) *float64 {
	ratios, all := runRatios(fig, runs)
	if !all {
		return nil
	}
	return val(median(ratios))
}

func num(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *p)
}

func baselineCell(ok bool, v *float64) string {
	if !ok {
		return "—"
	}
	return num(v)
}

func change(ok bool, old, now *float64) string {
	switch {
	case !ok || old == nil:
		return "new"
	case now == nil:
		return "gone"
	case *old == *now:
		return "="
	case *old != 0:
		return fmt.Sprintf("%+.0f%%", (*now-*old) / *old * 100)
	default:
		return fmt.Sprintf("%+.2f", *now-*old)
	}
}

func deref[T int | float64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
}

func conditions(f Figures) string {
	if f.CPUs == 0 {
		return "unknown, demand " + string(demandSource(f))
	}
	return fmt.Sprintf("%s, %d CPUs, load %.1f→%.1f, demand %s", f.MeasuredAt.Format("2006-01-02 15:04Z"), f.CPUs, f.Load[0], f.Load[1], demandSource(f))
}

// demandSource is the demand source figures were measured with: Webhook when they do
// not say (a baseline from before scale sets).
func demandSource(f Figures) v1alpha1.DemandSource {
	if f.DemandSource == "" {
		return v1alpha1.DemandSourceWebhook
	}
	return f.DemandSource
}
