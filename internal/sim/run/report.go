package run

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/version"
)

// SchemaVersion is report.json's schema version; docs/sim.md documents the fields.
// Version 2 added jobs_failed, jobs_unfinished, pool_reaction_seconds,
// kube_api_writes_per_job, cpu_seconds_by_process, busy_runner_kills, faults, trace, host
// and controller.processes, and made busy_runners_killed count runner processes killed
// mid-job. Version 3 added floor, kube_api, controller_cpu_ms_per_job and jobs. Version
// 4 added demand_source, actions_service_calls_per_job, github_calls_per_job and
// actions_service_calls_by_endpoint, and left the Actions service's routes out of
// rest_calls_by_endpoint. Version 5 added pools, sessions and idle, made
// kube_api.pool_status_writes_per_second a mean over every pool of the scenario, and
// added idle_runner_seconds_per_job and warm. Version 6 added caches. Version 7 added
// warm (pickup and its cost after a warm pool's warm-up). Version 8 added
// rest_not_modified and webhook_delivery_seconds, and left the REST calls answered 304
// out of every other REST figure. Version 9 added watchers_cut and floor.watchers_cut.
// Version 10 added kube_api.collector_deletes, kube_api.collector_deletes_per_job,
// kube_api.all_writes_per_job and kube_api_writes_per_job_with_collector.
// Version 11 added container_jobs and leftover.workflow_pods and leftover.hook_secrets.
// Version 12 added disruptions, and left jobs skipped (a job they needed failed) out of
// pickups and jobs never picked up.
// Version 13 added usage.
// Version 14 added leftover.step_pods and container_jobs' step_pods, pods_with_host_port,
// port_mapped_jobs, port_mapped_jobs_green and bursts.
// Version 15 added fleet, sessions.seconds_from_start, kube_api.startup_writes and
// kube_api.workload_writes_per_job.
// Version 16 added fleet.single_pool_burst, fleet.burst_pickup_p99_over_single_pool and
// fleet.burst.runner_pod_start_seconds.
const SchemaVersion = 16

// Quantiles summarize a latency distribution, in seconds.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Leftover counts what a run left behind after draining.
type Leftover struct {
	Runners       int `json:"runners"`
	Pods          int `json:"pods"`
	Secrets       int `json:"secrets"`
	GitHubRunners int `json:"github_runners"`
	// WorkflowPods, StepPods and HookSecrets are the container hooks' workflow pods, step
	// pods and Secrets (labeled runner-pod), in any namespace.
	WorkflowPods int `json:"workflow_pods"`
	StepPods     int `json:"step_pods"`
	HookSecrets  int `json:"hook_secrets"`
}

// Total is everything left over.
func (l Leftover) Total() int {
	return l.Runners + l.Pods + l.Secrets + l.GitHubRunners + l.WorkflowPods + l.StepPods + l.HookSecrets
}

// Controller is the resource use of the controller's processes (more than one when
// a fault killed it), from the kernel's accounting when each exited.
type Controller struct {
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	Processes    int     `json:"processes"`
	// KubeAPIRequests are its requests to the kube-apiserver by HTTP method (watches
	// included), read from its metrics just before each process was stopped.
	KubeAPIRequests map[string]int64 `json:"kube_api_requests,omitempty"`
}

// Host is the machine a run shared its cores with.
type Host struct {
	CPUs         int        `json:"cpus"`
	LoadAvgStart [3]float64 `json:"load_avg_start"`
	LoadAvgEnd   [3]float64 `json:"load_avg_end"`
	GoVersion    string     `json:"go_version"`
	Gantry       string     `json:"gantry"`
}

// BusyRunnerKill is a runner process that died while it ran a job.
type BusyRunnerKill struct {
	Pod  string  `json:"pod"`
	Job  int64   `json:"job"`
	Node string  `json:"node"`
	T    float64 `json:"t"`
	// Cause is pod-deleted (counted in busy_runners_killed), node-lost (a fault),
	// evicted or oom-killed (a fault's kubelet eviction or OOM kill: disruptions) or
	// workflow-pod-failed (Gantry ended the runner: its job's workflow pod could not
	// start).
	Cause string `json:"cause"`
}

// FaultsReport is what a fault schedule did and what it cost.
type FaultsReport struct {
	Injections []fault.Injection `json:"injections"`
	// JobsLost: jobs never picked up or never completed.
	JobsLost int `json:"jobs_lost"`
	// JobsFailedRunnerLost: jobs GitHub failed because their runner went silent —
	// the runners of a lost node.
	JobsFailedRunnerLost int `json:"jobs_failed_runner_lost"`
	// BusyRunnersLostWithNode: runner processes killed mid-job by a node loss.
	BusyRunnersLostWithNode int `json:"busy_runners_lost_with_node"`
	BusyRunnersKilled       int `json:"busy_runners_killed"`
	Leftover                int `json:"leftover"`
	// RecoverySeconds is the longest recovery of the injections; nil if one never
	// recovered.
	RecoverySeconds *float64 `json:"recovery_seconds"`
}

// TraceReport describes a replayed trace.
type TraceReport struct {
	File  string  `json:"file"`
	Jobs  int     `json:"jobs"`
	Speed float64 `json:"speed"`
	// RecordedPickupSeconds are the pickup latencies the trace recorded (real time,
	// not divided by speed), to set beside pickup_seconds.
	RecordedPickupSeconds *Quantiles `json:"recorded_pickup_seconds,omitempty"`
}

// Report is report.json.
type Report struct {
	SchemaVersion int                   `json:"schema_version"`
	Scenario      string                `json:"scenario"`
	Description   string                `json:"description"`
	DemandSource  v1alpha1.DemandSource `json:"demand_source"`
	// Pools is how many RunnerPools the scenario ran (Scenario.Pools, at least 1).
	Pools int `json:"pools"`
	// Sessions is how the pools' scale-set sessions opened before the workload; Idle
	// what the controller cost idle once they were open (Scenario.Idle).
	Sessions          *Sessions   `json:"sessions,omitempty"`
	Idle              *IdleReport `json:"idle,omitempty"`
	StartedAt         time.Time   `json:"started_at"`
	Finished          bool        `json:"finished"`
	JobsTotal         int         `json:"jobs_total"`
	JobsNeverPickedUp int         `json:"jobs_never_picked_up"`
	JobsUnfinished    int         `json:"jobs_unfinished"`
	JobsFailed        int         `json:"jobs_failed"`
	PickupSeconds     Quantiles   `json:"pickup_seconds"`
	ReactionSeconds   Quantiles   `json:"reaction_seconds"`
	PoolReaction      Quantiles   `json:"pool_reaction_seconds"`
	// WebhookDelivery is how long GitHub took to deliver each job's queued webhook: from
	// the job queued to the controller's answer (first attempts answered 2xx). It is
	// part of reaction that happens before Gantry hears of the job. Absent when no
	// queued webhook was delivered (scale-set demand).
	WebhookDelivery   *Quantiles `json:"webhook_delivery_seconds,omitempty"`
	DrainSeconds      float64    `json:"drain_seconds"`
	Drained           bool       `json:"drained"`
	RunnersCreated    int        `json:"runners_created"`
	IdleRunnerSeconds float64    `json:"idle_runner_seconds"`
	// IdleRunnerSecondsPerJob is idle_runner_seconds over jobs_total: what each job's
	// pickup cost in runners kept waiting, so that a warmer pool is never faster for free.
	IdleRunnerSecondsPerJob float64 `json:"idle_runner_seconds_per_job"`
	// GitHub calls per job: REST, Actions service (a scale set's), and both.
	RESTCallsPerJob            float64          `json:"rest_calls_per_job"`
	ActionsServiceCallsPerJob  float64          `json:"actions_service_calls_per_job"`
	GitHubCallsPerJob          float64          `json:"github_calls_per_job"`
	RESTCallsByRoute           map[string]int64 `json:"rest_calls_by_endpoint"`
	ActionsServiceCallsByRoute map[string]int64 `json:"actions_service_calls_by_endpoint"`
	// RESTNotModified is the REST calls answered 304 Not Modified: conditional requests,
	// which GitHub does not count against the rate limit. The other REST figures leave
	// them out.
	RESTNotModified  int64   `json:"rest_not_modified"`
	KubeWritesPerJob float64 `json:"kube_api_writes_per_job"`
	// KubeWritesPerJobWithCollector adds to KubeWritesPerJob the garbage collector's
	// deletes of objects the controller's objects owned (KubeAPI.CollectorDeletes):
	// every write made on the controller's behalf. Absent without the audit log.
	KubeWritesPerJobWithCollector *float64           `json:"kube_api_writes_per_job_with_collector,omitempty"`
	KubeAPI                       *KubeAPI           `json:"kube_api,omitempty"`
	KubeAPIError                  string             `json:"kube_api_error,omitempty"`
	ControllerCPUPerJob           float64            `json:"controller_cpu_ms_per_job"`
	Leftover                      Leftover           `json:"leftover"`
	BusyRunnersKilled             int                `json:"busy_runners_killed"`
	BusyRunnerKills               []BusyRunnerKill   `json:"busy_runner_kills,omitempty"`
	Controller                    Controller         `json:"controller"`
	CPUSeconds                    map[string]float64 `json:"cpu_seconds_by_process"`
	// WatchersCut is how many watchers the kube-apiserver cut for falling behind during
	// Gantry's part (its log, "… watcher close due to unresponsiveness"), any client's:
	// a sign of a control plane short of CPU. Absent if its log could not be read.
	WatchersCut *int          `json:"watchers_cut,omitempty"`
	Faults      *FaultsReport `json:"faults,omitempty"`
	Caches      *CacheReport  `json:"caches,omitempty"`
	// ContainerJobs: a Kubernetes-mode pool's container jobs (Scenario.ContainerJobs).
	ContainerJobs *ContainerJobsReport `json:"container_jobs,omitempty"`
	// Fleet: a fleet of pools phase by phase (Scenario.Fleet).
	Fleet *FleetReport `json:"fleet,omitempty"`
	// Disruptions: what drains, reclaims and evictions did to the jobs
	// (report_disruptions.go).
	Disruptions *DisruptionsReport `json:"disruptions,omitempty"`
	// Usage: who used the pool, from the controller's usage records (usage.go).
	Usage *UsageReport `json:"usage,omitempty"`
	// Warm: pickup and its cost after a predictive pool's warm-up (spec.warm, steady
	// arrivals only).
	Warm               *WarmReport  `json:"warm,omitempty"`
	Trace              *TraceReport `json:"trace,omitempty"`
	Floor              *Floor       `json:"floor,omitempty"`
	Host               Host         `json:"host"`
	WallSeconds        float64      `json:"wall_seconds"`
	Samples            []Sample     `json:"samples"`
	Jobs               []JobTimes   `json:"jobs,omitempty"`
	AgentErrors        []string     `json:"agent_errors,omitempty"`
	ScenarioParameters Scenario     `json:"scenario_parameters"`
}

// Clean reports whether the run ended as it should: every job finished and none was
// lost, nothing left over, no busy runner killed, every pool's scale-set session open
// when the run waited for them, at the end of an idle window and after a fleet's
// restart (and named in the pools' statuses), a fleet's single-pool burst as clean
// (SinglePoolBurst.clean), the cache's promises kept
// (CacheReport.Clean), and the disruptions' (DisruptionsReport.Clean).
func (r *Report) Clean() bool {
	return r.Caches.Clean() && r.Disruptions.Clean() && r.Finished && r.JobsNeverPickedUp == 0 && r.JobsUnfinished == 0 && r.Leftover.Total() == 0 && r.BusyRunnersKilled == 0 &&
		(r.Sessions == nil || r.Sessions.Open == r.Sessions.Pools) &&
		(r.Fleet == nil || r.Fleet.Restart == nil || (r.Fleet.Restart.Open == r.Fleet.Restart.Pools && r.Fleet.Restart.StatusSeconds != nil)) &&
		(r.Fleet == nil || r.Fleet.SinglePoolBurst == nil || r.Fleet.SinglePoolBurst.clean()) &&
		(r.Idle == nil || r.DemandSource != v1alpha1.DemandSourceScaleSet || r.Idle.SessionsOpen == r.Idle.Pools)
}

type reportInputs struct {
	start                  time.Time
	end                    time.Time // Gantry's part of the run ended: the floor is not in wall_seconds
	jobs                   []simgithub.Job
	queued                 []queuedJob
	events                 []agent.Event
	runnersSeen            []time.Time
	calls                  map[string]simgithub.CallCount
	deliveries             []simgithub.Delivery
	samples                []Sample
	finished, drained      bool
	lastJobDone, drainedAt time.Time
	controller             Controller
	audit                  kubeAudit
	auditErr               error
	injections             []fault.Injection
	lostNodePods           map[string]int // runner pods still on each lost node at the end
	leftover               Leftover
	host, hostEnd          Host
	cpu                    map[string]float64
	sessions               *Sessions
	idle                   *IdleReport
	caches                 *cacheInputs
	runnerFailures         map[string]string // failed Runners' reason and message, by name
	restart                *RestartReport
	platforms              map[string]int // a fleet's pools by platform
	launched               time.Time      // the first controller process started
	secondBurstAt          time.Time      // when a container-jobs scenario's second burst was queued
	single                 *singlePoolRun // a fleet's single-pool burst, after its own
	disruptions            disruptionInputs
	usage                  usageInputs
}

func buildReport(sc Scenario, in reportInputs) *Report {
	start := in.start
	r := &Report{
		SchemaVersion: SchemaVersion, Scenario: sc.Name, Description: sc.Description, DemandSource: sc.demandSource(),
		Pools: sc.pools(), Sessions: in.sessions, Idle: in.idle,
		StartedAt: start, Finished: in.finished, Drained: in.drained, JobsTotal: len(in.jobs), Samples: in.samples,
		Controller: in.controller, Leftover: in.leftover,
		RESTCallsByRoute: map[string]int64{}, ActionsServiceCallsByRoute: map[string]int64{},
		ScenarioParameters: sc, Host: in.host, CPUSeconds: in.cpu,
	}
	r.Host.LoadAvgEnd = in.hostEnd.LoadAvgEnd
	failedRunnerLost := r.countJobs(in.jobs, in.queued)
	pickups, reactions := latencies(in.jobs, in.events, start)
	r.PickupSeconds, r.ReactionSeconds = quantiles(pickups), quantiles(reactions)
	r.Jobs = jobTimes(in.jobs, in.events, start)
	r.RunnersCreated, r.IdleRunnerSeconds = runnerUse(in.events)
	r.Warm = warmReport(sc, in.jobs, in.events, start)
	if r.JobsTotal > 0 {
		r.IdleRunnerSecondsPerJob = round2(r.IdleRunnerSeconds / float64(r.JobsTotal))
	}
	r.PoolReaction = quantiles(poolReactions(in.jobs, in.runnersSeen, start))
	if d := queuedDeliveryDelays(in.deliveries); len(d) > 0 {
		q := quantiles(d)
		r.WebhookDelivery = &q
	}
	lostWithNode := r.countKills(in.events, in.injections, start, workflowPodFailures(in.runnerFailures))
	r.countCalls(in, sc.pools())
	if in.drained && !in.lastJobDone.IsZero() {
		r.DrainSeconds = round1(in.drainedAt.Sub(in.lastJobDone).Seconds())
	}
	if sc.Faults != nil {
		r.Faults = faultsReport(r, in, failedRunnerLost, lostWithNode)
	}
	r.ContainerJobs = containerJobsReport(sc, in, r.KubeWritesPerJob)
	r.Fleet = fleetReport(sc, in, r)
	if r.Disruptions = disruptionsReport(sc, in); r.Disruptions != nil {
		// A runner deleted at the pool's bound of a drain's wait is the bound's, by
		// design: its job is the infrastructure's to re-run, not a busy runner killed.
		r.BusyRunnersKilled -= r.Disruptions.BusyRunnersKilledAtDrainBound
	}
	if len(in.usage.records) > 0 || in.usage.err != nil {
		r.Usage = usageReport(in.usage, in.events, start)
	}
	if sc.Trace != nil {
		r.Trace = traceReport(sc)
	}
	if c := in.caches; c != nil {
		queuedAt := map[int64]time.Time{}
		for _, j := range in.jobs {
			queuedAt[j.ID] = j.QueuedAt
		}
		warmUp := time.Duration(cacheWarmUp * float64(sc.Steady))
		c.warmUpEnd = start.Add(warmUp)
		r.Caches = cacheReport(*c, queuedAt, warmUp)
	}
	end := in.end
	if end.IsZero() {
		end = time.Now()
	}
	r.WallSeconds = round1(end.Sub(start).Seconds())
	return r
}

// countJobs counts the jobs never picked up, unfinished and failed (concluded other
// than the workload asked), and returns how many of the failed GitHub failed because
// their runner went silent.
func (r *Report) countJobs(jobs []simgithub.Job, queued []queuedJob) (failedRunnerLost int) {
	expected := map[int64]string{}
	for _, q := range queued {
		expected[q.id] = q.conclusion
	}
	for _, j := range jobs {
		if j.Conclusion == simgithub.ConclusionSkipped {
			continue // a job it needed failed: GitHub never queued it
		}
		if j.StartedAt == nil {
			r.JobsNeverPickedUp++
			continue
		}
		if j.Status != simgithub.StatusCompleted {
			r.JobsUnfinished++
			continue
		}
		want := expected[j.ID]
		if want == "" {
			want = simgithub.ConclusionSuccess
		}
		if j.Conclusion != want {
			r.JobsFailed++
			for _, e := range j.Timeline {
				if e.Type == simgithub.EventRunnerLost {
					failedRunnerLost++
					break
				}
			}
		}
	}
	return failedRunnerLost
}

// latencies are the pickup latencies (job queued → started by a runner) and the
// reactions: the i-th runner pod seen created after the i-th job was queued (jobs and
// pods each in time order), in seconds.
func latencies(jobs []simgithub.Job, events []agent.Event, start time.Time) (pickups, reactions []float64) {
	var queuedAt, created []float64
	for _, j := range jobs {
		if j.Conclusion == simgithub.ConclusionSkipped {
			continue // never queued: a job it needed failed
		}
		queuedAt = append(queuedAt, j.QueuedAt.Sub(start).Seconds())
		if j.StartedAt != nil {
			pickups = append(pickups, j.StartedAt.Sub(j.QueuedAt).Seconds())
		}
	}
	for _, e := range events {
		if e.Kind == agent.EventCreated {
			created = append(created, e.At.Sub(start).Seconds())
		}
	}
	return pickups, pairedDelays(queuedAt, created)
}

// pairedDelays sorts both and returns, for each i, how long after the i-th cause the
// i-th effect came (0 if before).
func pairedDelays(causes, effects []float64) []float64 {
	c, e := slices.Clone(causes), slices.Clone(effects)
	sort.Float64s(c)
	sort.Float64s(e)
	var out []float64
	for i := 0; i < len(c) && i < len(e); i++ {
		out = append(out, math.Max(0, e[i]-c[i]))
	}
	return out
}

// poolReactions: the i-th Runner object seen after the i-th job was queued — the pool
// reconciler's part of the reaction.
func poolReactions(jobs []simgithub.Job, runnersSeen []time.Time, start time.Time) []float64 {
	var queuedAt, seen []float64
	for _, j := range jobs {
		queuedAt = append(queuedAt, j.QueuedAt.Sub(start).Seconds())
	}
	for _, t := range runnersSeen {
		seen = append(seen, t.Sub(start).Seconds())
	}
	return pairedDelays(queuedAt, seen)
}

// queuedDeliveryDelays are the seconds from each workflow_job queued event to the
// receiver's 2xx answer to its first delivery attempt.
func queuedDeliveryDelays(deliveries []simgithub.Delivery) []float64 {
	var out []float64
	for _, d := range deliveries {
		if d.Event != "workflow_job" || d.Action != "queued" || d.Redelivery || !d.Done || d.StatusCode/100 != 2 || d.DeliveredAt.IsZero() {
			continue
		}
		out = append(out, d.DeliveredAt.Sub(d.CreatedAt).Seconds())
	}
	return out
}

// runnerUse counts the runner pods created and the seconds runner processes ran
// without a job.
func runnerUse(events []agent.Event) (created int, idleSeconds float64) {
	for _, e := range events {
		if e.Kind == agent.EventCreated {
			created++
		}
	}
	return created, round1(idleRunnerSeconds(events, time.Time{}))
}

// countKills records the runner processes that died mid-job and counts, as busy
// runners killed, those a node loss of the fault schedule did not cause (the pod
// deleted under the runner, by Gantry or anyone) and that Gantry did not end because
// their job's workflow pod could not start (jobLost: runner pods by name, the job
// failed fast on purpose: container_jobs.jobs_failed). It returns the node losses'
// number.
func (r *Report) countKills(events []agent.Event, injections []fault.Injection, start time.Time, jobLost map[string]bool) (lostWithNode int) {
	lostAt := map[string]time.Time{}
	for _, inj := range injections {
		if inj.Kind == fault.KindNodeLost && inj.Node != "" {
			lostAt[inj.Node] = start.Add(time.Duration(inj.StartSeconds * float64(time.Second)))
		}
	}
	for _, e := range events {
		if e.Kind != agent.EventKilled || e.Job == 0 || e.Cause == agent.CauseStopped {
			continue
		}
		k := BusyRunnerKill{Pod: e.Pod, Job: e.Job, Node: e.Node, T: round1(e.At.Sub(start).Seconds()), Cause: e.Cause}
		if jobLost[e.Pod] && e.Cause == agent.CausePodDeleted {
			k.Cause = causeWorkflowPodFailed
		}
		r.BusyRunnerKills = append(r.BusyRunnerKills, k)
		if at, lost := lostAt[e.Node]; e.Cause == agent.CauseNodeLost || (lost && !e.At.Before(at)) {
			lostWithNode++
			continue
		}
		if k.Cause == causeWorkflowPodFailed || e.Cause == agent.CauseEvicted || e.Cause == agent.CauseOOMKilled {
			continue
		}
		r.BusyRunnersKilled++
	}
	return lostWithNode
}

// causeWorkflowPodFailed is the cause of a busy runner kill by Gantry ending a runner
// whose job's workflow pod could not start.
const causeWorkflowPodFailed = "workflow-pod-failed"

// workflowPodFailures are the runners Gantry failed because their workflow pod could
// not start (a WorkflowPod… reason), by name.
func workflowPodFailures(failures map[string]string) map[string]bool {
	out := map[string]bool{}
	for name, f := range failures {
		if reason, _, _ := strings.Cut(f, ":"); strings.HasPrefix(reason, "WorkflowPod") {
			out[name] = true
		}
	}
	return out
}

// countCalls sums the GitHub calls (REST and Actions service apart), the controller's
// Kubernetes API requests and its CPU, per job, and reads the audit of its requests
// (of pools pools), jobs or none.
func (r *Report) countCalls(in reportInputs, pools int) {
	var rest, service int64
	for route, c := range in.calls {
		if simgithub.IsActionsServiceRoute(route) {
			r.ActionsServiceCallsByRoute[route] = c.Total
			service += c.Total
		} else {
			if n := c.Counted(); n > 0 {
				r.RESTCallsByRoute[route] = n
			}
			rest += c.Counted()
			r.RESTNotModified += c.Total - c.Counted()
		}
	}
	n := len(in.jobs)
	if in.auditErr != nil {
		r.KubeAPIError = in.auditErr.Error()
	} else if len(in.audit.requests) > 0 {
		end := in.lastJobDone
		if end.IsZero() {
			end = in.drainedAt
		}
		r.KubeAPI = in.audit.kubeAPI(n, pools, in.start, end)
	}
	if n == 0 {
		return
	}
	r.RESTCallsPerJob = round2(float64(rest) / float64(n))
	r.ActionsServiceCallsPerJob = round2(float64(service) / float64(n))
	r.GitHubCallsPerJob = round2(float64(rest+service) / float64(n))
	var writes int64
	for m, c := range in.controller.KubeAPIRequests {
		if m != "GET" {
			writes += c
		}
	}
	r.KubeWritesPerJob = round2(float64(writes) / float64(n))
	if r.KubeAPI != nil {
		r.KubeWritesPerJobWithCollector = val(round2(r.KubeWritesPerJob + r.KubeAPI.CollectorDeletesPerJob))
	}
	r.ControllerCPUPerJob = round1(in.controller.CPUSeconds * 1000 / float64(n))
}

func quantiles(xs []float64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return math.Round(s[max(0, min(i, len(s)-1))]*1000) / 1000
	}
	return Quantiles{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: at(1)}
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// hostNow describes this machine now.
func hostNow() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Gantry: version.Get().Version + " " + version.Get().Commit}
	h.LoadAvgStart = loadAvg()
	h.LoadAvgEnd = h.LoadAvgStart
	return h
}

// loadAvg reads the 1, 5 and 15 minute load averages (zeros where unknown).
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}

func (r *Report) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return r.writeHTML(f)
}
