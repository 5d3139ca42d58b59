package run

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// SinglePoolBurst is a fleet burst's reference (FleetSpec.SinglePoolBurst): the same
// burst — as many jobs, as long, their pods starting as fast — queued again into one
// scale-set pool alone once the fleet burst's runners are gone, on the same cluster and
// with the same controller process. The nodes load the kube-apiserver alike under both
// bursts; what differs is how many pools the jobs are spread over. Its pickup is
// measured as the fleet burst's (report.json's pickup_seconds: each job's queued →
// started), and its writes per job as the fleet burst's
// (kube_api.workload_writes_per_job: every write made on the controller's behalf from
// its start on, per job).
type SinglePoolBurst struct {
	Pool       string `json:"pool"`
	MaxRunners int32  `json:"max_runners"`
	Jobs       int    `json:"jobs"`
	// JobsNeverPickedUp, JobsUnfinished and JobsFailed count as the report's own.
	JobsNeverPickedUp int `json:"jobs_never_picked_up"`
	JobsUnfinished    int `json:"jobs_unfinished"`
	JobsFailed        int `json:"jobs_failed"`
	// RunnersCreated counts its runner pods; BusyRunnersKilled as the report's own.
	RunnersCreated    int `json:"runners_created"`
	BusyRunnersKilled int `json:"busy_runners_killed"`
	// Finished: every job completed within the scenario's timeout; Drained: then every
	// runner was gone within the drain's bound.
	Finished      bool      `json:"finished"`
	Drained       bool      `json:"drained"`
	PickupSeconds Quantiles `json:"pickup_seconds"`
	// ReactionSeconds and PoolReaction are measured as the report's reaction_seconds
	// (job → runner pod) and pool_reaction_seconds (job → Runner object): where the
	// pickup's time went.
	ReactionSeconds Quantiles `json:"reaction_seconds"`
	PoolReaction    Quantiles `json:"pool_reaction_seconds"`
	// RunnerPodStart is measured as the fleet burst's (FleetBurst.RunnerPodStart).
	RunnerPodStart Quantiles `json:"runner_pod_start_seconds"`
	// Writes are every write made on the controller's behalf from its start to the end
	// ("verb resource", the garbage collector's as "collector delete pods"), and
	// WritesPerJob their number per job.
	Writes       map[string]int64 `json:"writes"`
	WritesPerJob float64          `json:"writes_per_job"`
	// WallSeconds is from its start to its runners gone.
	WallSeconds float64 `json:"wall_seconds"`
}

// clean: every job picked up and completed, no busy runner killed, and every runner
// gone.
func (s *SinglePoolBurst) clean() bool {
	return s.Finished && s.Drained && s.JobsNeverPickedUp == 0 && s.JobsUnfinished == 0 && s.BusyRunnersKilled == 0
}

// singlePoolRun is the single-pool burst as run.
type singlePoolRun struct {
	pool                   string
	maxRunners             int32
	start                  time.Time
	queued                 []queuedJob
	jobs                   []simgithub.Job
	events                 []agent.Event // the runner agents' from its start on
	runnersSeen            []time.Time   // Runner objects first seen, from its start on
	finished, drained      bool
	lastJobDone, drainedAt time.Time
	// audit is the audit log from its start on.
	audit    kubeAudit
	auditErr error
}

// singlePoolWorkload is the burst of the scenario's workload with every job naming the
// single-pool burst's pool (Scenario.singlePool), as the fleet burst's name theirs.
func (s Scenario) singlePoolWorkload() workload {
	wl := s.workload()
	i, name := s.singlePool()
	wl.spread = [][]string{s.fleetJobLabels(i, name)}
	return wl
}

// runSinglePoolBurst queues the single-pool burst (the fleet burst's runners are gone),
// waits for its jobs within the scenario's timeout and for its runners to go.
func runSinglePoolBurst(ctx context.Context, w *world, sc Scenario, seed uint64, out io.Writer) (*singlePoolRun, error) {
	_, name := sc.singlePool()
	r := &singlePoolRun{pool: name, maxRunners: sc.singlePoolMaxRunners()}
	skip := len(w.sim.Jobs())
	r.start = time.Now()
	fmt.Fprintf(out, "Queueing the single-pool burst: %d jobs into %s alone (maxRunners %d), the fleet burst's reference\n", sc.Burst, name, r.maxRunners)
	queued, err := queueWorkload(ctx, w.sim, sc.singlePoolWorkload(), seed, nil)
	if err != nil {
		return nil, fmt.Errorf("queueing the single-pool burst: %w", err)
	}
	r.queued = queued
	r.jobs, r.finished, r.lastJobDone = waitJobs(ctx, w.sim, skip, len(queued), r.start.Add(sc.Timeout))
	r.drained = waitDrained(ctx, w.cl.Client, w.runners, w.sim, time.Now().Add(drainTimeout(sc)))
	r.drainedAt = time.Now()
	for _, e := range w.agents.Events() {
		if !e.At.Before(r.start) {
			r.events = append(r.events, e)
		}
	}
	for _, at := range w.runners.times() {
		if !at.Before(r.start) {
			r.runnersSeen = append(r.runnersSeen, at)
		}
	}
	done, _ := completedJobs(r.jobs)
	fmt.Fprintf(out, "Single-pool burst: %d of %d jobs completed, runners gone %v, %.1fs after it was queued\n",
		done, len(queued), r.drained, r.drainedAt.Sub(r.start).Seconds())
	return r, nil
}

// singlePoolBurst reports the single-pool burst, its figures read as the fleet burst's
// (pools: the scenario's).
func singlePoolBurst(s *singlePoolRun, pools int) *SinglePoolBurst {
	b := &SinglePoolBurst{Pool: s.pool, MaxRunners: s.maxRunners, Jobs: len(s.jobs), Finished: s.finished, Drained: s.drained,
		WallSeconds: round1(s.drainedAt.Sub(s.start).Seconds())}
	var counts Report
	counts.countJobs(s.jobs, s.queued)
	counts.countKills(s.events, nil, s.start, nil)
	b.JobsNeverPickedUp, b.JobsUnfinished, b.JobsFailed = counts.JobsNeverPickedUp, counts.JobsUnfinished, counts.JobsFailed
	b.BusyRunnersKilled = counts.BusyRunnersKilled
	b.RunnersCreated, _ = runnerUse(s.events)
	pickups, reactions := latencies(s.jobs, s.events, s.start)
	b.PickupSeconds, b.ReactionSeconds = quantiles(pickups), quantiles(reactions)
	b.PoolReaction = quantiles(poolReactions(s.jobs, s.runnersSeen, s.start))
	b.RunnerPodStart = quantiles(starts(s.events, agent.EventCreated, agent.EventRunning))
	b.Writes = writesFrom(s.audit, s.start)
	if s.auditErr == nil && len(s.audit.requests) > 0 {
		end := s.lastJobDone
		if end.IsZero() {
			end = s.drainedAt
		}
		b.WritesPerJob = s.audit.kubeAPI(len(s.jobs), pools, s.start, end).WorkloadWritesPerJob
	}
	return b
}

// pickupOverSinglePool is the fleet burst's pickup p99 over the single-pool burst's,
// to hundredths; nil unless the single-pool burst ended clean with a pickup measured.
func pickupOverSinglePool(burstP99 float64, s *SinglePoolBurst) *float64 {
	if s == nil || !s.clean() || s.PickupSeconds.P99 <= 0 {
		return nil
	}
	return val(round2(burstP99 / s.PickupSeconds.P99))
}
