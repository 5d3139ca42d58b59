package run

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// FleetReport is what a fleet of pools (Scenario.Fleet) cost the controller and the
// cluster, phase by phase: start-up, idle, the restart and the burst. Writes are read
// from the kube-apiserver's audit log of the controller's requests.
type FleetReport struct {
	// The cluster: its nodes, by architecture.
	Nodes       int            `json:"nodes"`
	NodesByArch map[string]int `json:"nodes_by_arch"`
	// The pools, by demand source; the credentials Secrets they share; the platforms their
	// status records ("linux/arm64 (Template)").
	ScaleSetPools int            `json:"scale_set_pools"`
	WebhookPools  int            `json:"webhook_pools"`
	Credentials   int            `json:"credentials"`
	Platforms     map[string]int `json:"platforms"`
	// NodeReads are the controller's requests on nodes over the whole run, by verb
	// ("list nodes", "watch nodes"): an informer's start is one list (or a watch that
	// lists, where the API server streams lists) and its watch, renewed every few
	// minutes; NodeListCalls the lists alone.
	NodeReads     map[string]int64 `json:"node_reads"`
	NodeListCalls int64            `json:"node_list_calls"`
	// SecretReads are the controller's reads of Secrets over the whole run (credentials
	// and the webhook secret; runners' own are cached).
	SecretReads int64 `json:"secret_reads"`
	// StartupWritesPerPool are the controller's writes from its start to the idle
	// window, by "verb resource", per pool.
	StartupWritesPerPool map[string]float64 `json:"startup_writes_per_pool"`
	// IdleWritesPerPoolPerMinute are its writes in the idle window, by "verb resource",
	// per pool and minute; IdlePoolStatusWritesPer10Minutes the pool status writes
	// alone, per pool and 10 minutes.
	IdleWritesPerPoolPerMinute       map[string]float64 `json:"idle_writes_per_pool_per_minute"`
	IdlePoolStatusWritesPer10Minutes float64            `json:"idle_pool_status_writes_per_pool_per_10_minutes"`
	// Restart is the controller's restart; RestartWritesPerPool the writes from its
	// signal to the burst, by "verb resource", per pool.
	Restart              *RestartReport     `json:"restart,omitempty"`
	RestartWritesPerPool map[string]float64 `json:"restart_writes_per_pool,omitempty"`
	Burst                FleetBurst         `json:"burst"`
	// SinglePoolBurst is the burst's reference: the same burst into one pool alone, on
	// the same cluster and controller, once the burst's runners were gone; nil if not run
	// (FleetSpec.SinglePoolBurst, or the burst did not finish).
	// BurstPickupP99OverSinglePool is the burst's pickup p99 (pickup_seconds.p99) over
	// its, to hundredths; nil unless it ended clean.
	SinglePoolBurst              *SinglePoolBurst `json:"single_pool_burst,omitempty"`
	BurstPickupP99OverSinglePool *float64         `json:"burst_pickup_p99_over_single_pool,omitempty"`
}

// FleetBurst is the fleet's burst: jobs spread over the first pools, of both kinds.
type FleetBurst struct {
	Pools         int `json:"pools"`
	ScaleSetPools int `json:"scale_set_pools"`
	WebhookPools  int `json:"webhook_pools"`
	Jobs          int `json:"jobs"`
	// PickupByDemandSource is the jobs' pickup by their pool's demand source (the
	// report's pickup_seconds is all of them).
	PickupByDemandSource map[v1alpha1.DemandSource]Quantiles `json:"pickup_by_demand_source"`
	// RunnerPodStart is each runner pod's start, created → Running as a watch saw it:
	// the cluster's part of the pickup (scheduling and starting), not the controller's.
	RunnerPodStart Quantiles `json:"runner_pod_start_seconds"`
	// Writes are every write made on the controller's behalf from the burst's start to
	// the end (its own and the garbage collector's deletes, "verb resource"), and
	// WritesPerJob their number per job (kube_api.workload_writes_per_job).
	Writes       map[string]int64 `json:"writes"`
	WritesPerJob float64          `json:"writes_per_job"`
}

// fleetReport reads a fleet run's phases out of its inputs and audit log.
func fleetReport(sc Scenario, in reportInputs, r *Report) *FleetReport {
	if sc.Fleet == nil {
		return nil
	}
	pools := sc.pools()
	f := &FleetReport{
		Nodes: sc.Nodes, NodesByArch: map[string]int{}, Credentials: len(sc.credentials()), Platforms: in.platforms,
		NodeReads: map[string]int64{}, Restart: in.restart,
	}
	archs := sc.nodeArchs()
	for i := range sc.Nodes {
		f.NodesByArch[archs[i%len(archs)]]++
	}
	for i := range pools {
		if sc.poolSource(i) == v1alpha1.DemandSourceWebhook {
			f.WebhookPools++
		} else {
			f.ScaleSetPools++
		}
	}
	for key, n := range in.audit.requests {
		verb, res := splitKey(key)
		switch {
		case res == "nodes":
			f.NodeReads[key] = n
			if verb == "list" {
				f.NodeListCalls += n
			}
		case res == "secrets" && (verb == "get" || verb == "list"):
			f.SecretReads += n
		}
	}
	launched, burstAt := in.launched, in.start
	idleFrom, idleTo := burstAt, burstAt
	if in.idle != nil {
		idleFrom, idleTo = in.idle.from, in.idle.to
	}
	if !launched.IsZero() {
		f.StartupWritesPerPool = writesPer(in.audit, launched, idleFrom, float64(pools))
	}
	if minutes := idleTo.Sub(idleFrom).Minutes(); minutes > 0 {
		f.IdleWritesPerPoolPerMinute = writesPer(in.audit, idleFrom, idleTo, float64(pools)*minutes)
		requests, _ := in.audit.window(idleFrom, idleTo)
		statusWrites := requests["patch runnerpools/status"] + requests["update runnerpools/status"]
		f.IdlePoolStatusWritesPer10Minutes = round3(float64(statusWrites) * 10 / minutes / float64(pools))
	}
	if rs := in.restart; rs != nil {
		f.RestartWritesPerPool = writesPer(in.audit, rs.at, burstAt, float64(pools))
	}
	f.Burst = fleetBurst(sc, in, r)
	if in.single != nil {
		f.SinglePoolBurst = singlePoolBurst(in.single, pools)
		f.BurstPickupP99OverSinglePool = pickupOverSinglePool(r.PickupSeconds.P99, f.SinglePoolBurst)
	}
	return f
}

// writesPer counts the controller's writes from from to to by "verb resource", each
// divided by per.
func writesPer(a kubeAudit, from, to time.Time, per float64) map[string]float64 {
	requests, _ := a.window(from, to)
	out := map[string]float64{}
	for key, n := range requests {
		if verb, _ := splitKey(key); isWrite(verb) {
			out[key] = round3(float64(n) / per)
		}
	}
	return out
}

// fleetBurst is the burst's part of the fleet report: its pools, its pickup by demand
// source, and the writes from its start on.
func fleetBurst(sc Scenario, in reportInputs, r *Report) FleetBurst {
	b := FleetBurst{Jobs: len(in.jobs), PickupByDemandSource: map[v1alpha1.DemandSource]Quantiles{}}
	source := map[string]v1alpha1.DemandSource{}
	for i, name := range sc.burstPools() {
		b.Pools++
		source[strings.ToLower(name)] = sc.poolSource(i)
		if sc.poolSource(i) == v1alpha1.DemandSourceWebhook {
			b.WebhookPools++
		} else {
			b.ScaleSetPools++
		}
	}
	pickups := map[v1alpha1.DemandSource][]float64{}
	for _, j := range in.jobs {
		if j.StartedAt == nil {
			continue
		}
		if src, ok := jobSource(j, source); ok {
			pickups[src] = append(pickups[src], j.StartedAt.Sub(j.QueuedAt).Seconds())
		}
	}
	for _, src := range slices.Sorted(maps.Keys(pickups)) {
		b.PickupByDemandSource[src] = quantiles(pickups[src])
	}
	b.RunnerPodStart = quantiles(starts(in.events, agent.EventCreated, agent.EventRunning))
	b.Writes = writesFrom(in.audit, in.start)
	if r.KubeAPI != nil {
		b.WritesPerJob = r.KubeAPI.WorkloadWritesPerJob
	}
	return b
}

// jobSource is the demand source of the burst pool a job names in its labels.
func jobSource(j simgithub.Job, source map[string]v1alpha1.DemandSource) (v1alpha1.DemandSource, bool) {
	for _, l := range j.Labels {
		if src, ok := source[strings.ToLower(l)]; ok {
			return src, true
		}
	}
	return "", false
}

// summary is the fleet's part of the terminal summary.
func (f *FleetReport) summary(sessions *Sessions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  fleet: %d nodes (%s); %d scale-set and %d webhook pools on %d credentials Secrets; platforms: %s\n",
		f.Nodes, formatCounts(toInt64(f.NodesByArch)), f.ScaleSetPools, f.WebhookPools, f.Credentials, formatCounts(toInt64(f.Platforms)))
	fmt.Fprintf(&b, "    node reads over the run: %s (lists %d); Secret reads %d\n", orNone(formatCounts(f.NodeReads)), f.NodeListCalls, f.SecretReads)
	if s := sessions; s != nil && s.SecondsFromStart != nil {
		fmt.Fprintf(&b, "    start: all %d sessions open %.1fs after the controller started; ", s.Pools, *s.SecondsFromStart)
	} else {
		b.WriteString("    start: ")
	}
	fmt.Fprintf(&b, "writes per pool: %s\n", orNone(formatRates(f.StartupWritesPerPool)))
	fmt.Fprintf(&b, "    idle: writes per pool per minute: %s (pool status writes per pool per 10 minutes %.3f)\n",
		orNone(formatRates(f.IdleWritesPerPoolPerMinute)), f.IdlePoolStatusWritesPer10Minutes)
	if rs := f.Restart; rs != nil {
		open := "not all within 5m"
		if rs.SessionsSeconds != nil {
			open = fmt.Sprintf("all open %.1fs after it was ready", *rs.SessionsSeconds)
		}
		recorded := "not all within 2m"
		if rs.StatusSeconds != nil {
			recorded = fmt.Sprintf("%.1fs", *rs.StatusSeconds)
		}
		fmt.Fprintf(&b, "    restart (SIG%s): ready %.1fs after the signal; %d of %d sessions open in it (%s), in the pools' statuses after %s; writes per pool: %s\n",
			rs.Signal, rs.DownSeconds, rs.Open, rs.Pools, open, recorded, orNone(formatRates(f.RestartWritesPerPool)))
	}
	bu := f.Burst
	fmt.Fprintf(&b, "    burst over %d pools (%d scale-set, %d webhook), %d jobs:", bu.Pools, bu.ScaleSetPools, bu.WebhookPools, bu.Jobs)
	for _, src := range slices.Sorted(maps.Keys(bu.PickupByDemandSource)) {
		q := bu.PickupByDemandSource[src]
		fmt.Fprintf(&b, " %s pickup p50 %.2fs p99 %.2fs;", src, q.P50, q.P99)
	}
	fmt.Fprintf(&b, " runner pod start p50 %.2fs p99 %.2fs; writes per job %.2f (%s)\n", bu.RunnerPodStart.P50, bu.RunnerPodStart.P99, bu.WritesPerJob, orNone(formatCounts(bu.Writes)))
	if s := f.SinglePoolBurst; s != nil {
		ratio := "not measured: it did not end clean"
		if f.BurstPickupP99OverSinglePool != nil {
			ratio = fmt.Sprintf("%.2f", *f.BurstPickupP99OverSinglePool)
		}
		fmt.Fprintf(&b, "    single-pool burst (the reference, same cluster): %d jobs into %s (maxRunners %d), %d never picked up, %d unfinished, finished %v, drained %v in %.1fs;"+
			" pickup p50 %.2fs p99 %.2fs max %.2fs (job → Runner p99 %.2fs, → runner pod p99 %.2fs; runner pod start p50 %.2fs p99 %.2fs); writes per job %.2f (%s); the burst's pickup p99 over its: %s\n",
			s.Jobs, s.Pool, s.MaxRunners, s.JobsNeverPickedUp, s.JobsUnfinished, s.Finished, s.Drained, s.WallSeconds,
			s.PickupSeconds.P50, s.PickupSeconds.P99, s.PickupSeconds.Max, s.PoolReaction.P99, s.ReactionSeconds.P99, s.RunnerPodStart.P50, s.RunnerPodStart.P99,
			s.WritesPerJob, orNone(formatCounts(s.Writes)), ratio)
	}
	return b.String()
}

// formatRates writes rates largest first: "patch runnerpools/status 2.000, …".
func formatRates(m map[string]float64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.3f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
