package run

import (
	"math"
	"sort"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Floor is the oracle's run of the same workload on the same cluster: what the least
// any controller must do achieves there (docs/sim.md, "The floor").
type Floor struct {
	StartedAt   time.Time `json:"started_at"`
	WallSeconds float64   `json:"wall_seconds"`
	// LoadAvg is the machine's 1-minute load average when the oracle started and
	// ended: compare it with host's before reading a ratio.
	LoadAvg [2]float64 `json:"load_avg_1m"`
	// Workers is how many jobs the oracle served at once.
	Workers int `json:"workers"`
	// ClusterDrained: no runner pod or Secret was left in the namespace when it started.
	ClusterDrained    bool `json:"cluster_drained"`
	Finished          bool `json:"finished"`
	JobsTotal         int  `json:"jobs_total"`
	JobsNeverPickedUp int  `json:"jobs_never_picked_up"`
	// Errors the oracle met (a refused create, a failed call); Error is the first.
	Errors int    `json:"errors"`
	Error  string `json:"error,omitempty"`
	// CleanedUp: its pods and Secrets were gone at the end.
	CleanedUp       bool      `json:"cleaned_up"`
	PickupSeconds   Quantiles `json:"pickup_seconds"`
	ReactionSeconds Quantiles `json:"reaction_seconds"`
	// CPUSeconds is the oracle process's CPU time, its start-up included, and
	// CPUMsPerJob that per job served: the floor of controller_cpu_ms_per_job. Null
	// when the oracle did not run to its end.
	CPUSeconds  *float64 `json:"cpu_seconds"`
	CPUMsPerJob *float64 `json:"cpu_ms_per_job"`
	// Ratio is Gantry's figure divided by the floor's, percentile by percentile.
	Ratio FloorRatio `json:"ratio"`
	// WatchersCut is the report's watchers_cut, during the floor's run.
	WatchersCut *int `json:"watchers_cut,omitempty"`
	// Jobs are the oracle's jobs' lives, as the report's jobs.
	Jobs []JobTimes `json:"jobs,omitempty"`
}

// FloorRatio is Gantry's latencies, and its controller's CPU per job, over the floor's.
type FloorRatio struct {
	PickupSeconds   Ratios   `json:"pickup_seconds"`
	ReactionSeconds Ratios   `json:"reaction_seconds"`
	CPUMsPerJob     *float64 `json:"cpu_ms_per_job"`
}

// Ratios are quantiles divided, each null where the divisor is 0.
type Ratios struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
	Max *float64 `json:"max"`
}

// ratio is a/b, rounded to two decimals; nil when b is 0.
func ratio(a, b float64) *float64 {
	if b <= 0 {
		return nil
	}
	r := round2(a / b)
	return &r
}

func ratios(gantry, floor Quantiles) Ratios {
	return Ratios{
		P50: ratio(gantry.P50, floor.P50), P95: ratio(gantry.P95, floor.P95),
		P99: ratio(gantry.P99, floor.P99), Max: ratio(gantry.Max, floor.Max),
	}
}

// floorReport summarizes the oracle's run and sets Gantry's figures beside it.
func floorReport(fr floorRun, runErr error, gantry *Report) *Floor {
	f := &Floor{
		StartedAt: fr.start, WallSeconds: round1(fr.end.Sub(fr.start).Seconds()), Workers: floorWorkers, LoadAvg: fr.load,
		ClusterDrained: fr.clusterDrained, Finished: fr.finished, JobsTotal: len(fr.jobs),
		Errors: fr.errors, CleanedUp: fr.cleanedUp,
	}
	switch {
	case runErr != nil:
		f.Error = runErr.Error()
	case fr.firstErr != nil:
		f.Error = fr.firstErr.Error()
	}
	for _, j := range fr.jobs {
		if j.StartedAt == nil {
			f.JobsNeverPickedUp++
		}
	}
	pickups, reactions := latencies(fr.jobs, fr.events, fr.start)
	f.PickupSeconds, f.ReactionSeconds = quantiles(pickups), quantiles(reactions)
	f.Ratio = FloorRatio{
		PickupSeconds:   ratios(gantry.PickupSeconds, f.PickupSeconds),
		ReactionSeconds: ratios(gantry.ReactionSeconds, f.ReactionSeconds),
	}
	if fr.cpuSeconds > 0 && len(fr.jobs) > 0 {
		cpu, perJob := round2(fr.cpuSeconds), round2(fr.cpuSeconds*1000/float64(len(fr.jobs)))
		f.CPUSeconds, f.CPUMsPerJob = &cpu, &perJob
		f.Ratio.CPUMsPerJob = ratio(gantry.ControllerCPUPerJob, perJob)
	}
	f.Jobs = jobTimes(fr.jobs, fr.events, fr.start)
	return f
}

// JobTimes is one job's life, in seconds from the start of its workload: queued, the
// runner pod that took it seen created, that pod Running (its runner process
// started), the job started by it, the job done. null: never.
type JobTimes struct {
	ID      int64    `json:"id"`
	Queued  float64  `json:"queued"`
	Pod     *float64 `json:"pod"`
	Running *float64 `json:"running"`
	Started *float64 `json:"started"`
	Done    *float64 `json:"done"`
}

// jobTimes are the jobs' lives, in order of queueing, from the simulator's timeline
// and the agents' events.
func jobTimes(jobs []simgithub.Job, events []agent.Event, start time.Time) []JobTimes {
	at := func(t time.Time) *float64 {
		s := math.Round(t.Sub(start).Seconds()*1000) / 1000
		return &s
	}
	created, running, podOf := map[string]time.Time{}, map[string]time.Time{}, map[int64]string{}
	for _, e := range events {
		switch e.Kind {
		case agent.EventCreated:
			if _, ok := created[e.Pod]; !ok {
				created[e.Pod] = e.At
			}
		case agent.EventRunning:
			if _, ok := running[e.Pod]; !ok {
				running[e.Pod] = e.At
			}
		case agent.EventJobStarted:
			podOf[e.Job] = e.Pod
		}
	}
	out := make([]JobTimes, 0, len(jobs))
	for _, j := range jobs {
		jt := JobTimes{ID: j.ID, Queued: *at(j.QueuedAt)}
		if pod, ok := podOf[j.ID]; ok {
			if t, ok := created[pod]; ok {
				jt.Pod = at(t)
			}
			if t, ok := running[pod]; ok {
				jt.Running = at(t)
			}
		}
		if j.StartedAt != nil {
			jt.Started = at(*j.StartedAt)
		}
		if j.DoneAt != nil {
			jt.Done = at(*j.DoneAt)
		}
		out = append(out, jt)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Queued < out[b].Queued })
	return out
}
