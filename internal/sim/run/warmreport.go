package run

import (
	"time"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// predictionWarmUp is the share of the arrivals' window, from its start, in which a
// predictive pool is still learning the traffic it has never seen: WarmReport leaves
// the jobs queued then out, as the cache report leaves out its warm-up.
const predictionWarmUp = 0.2

// WarmReport is report.json's warm, for a scenario whose pool has spec.warm and steady
// arrivals: pickup and its cost once the pool has had the first 20 % of the arrivals'
// window to learn the traffic. The report's own pickup_seconds and
// idle_runner_seconds_per_job count every job, the warm-up's included.
type WarmReport struct {
	// WarmUpSeconds: jobs queued in the first WarmUpSeconds of the workload are left out.
	WarmUpSeconds float64 `json:"warm_up_seconds"`
	// Jobs: the jobs queued after the warm-up, the figures' base.
	Jobs int `json:"jobs"`
	// PickupSeconds: those jobs' pickup latencies.
	PickupSeconds Quantiles `json:"pickup_seconds"`
	// IdleRunnerSecondsPerJob: the runner-seconds spent idle after the warm-up (to the
	// end of the run), over Jobs.
	IdleRunnerSecondsPerJob float64 `json:"idle_runner_seconds_per_job"`
}

// warmReport is the WarmReport of a run that started its workload at start, or nil for
// a scenario it does not apply to.
func warmReport(sc Scenario, jobs []simgithub.Job, events []agent.Event, start time.Time) *WarmReport {
	if sc.Warm == nil || sc.Steady <= 0 {
		return nil
	}
	warmUp := time.Duration(predictionWarmUp * float64(sc.Steady))
	from := start.Add(warmUp)
	var pickups []float64
	n := 0
	for _, j := range jobs {
		if j.QueuedAt.Before(from) {
			continue
		}
		n++
		if j.StartedAt != nil {
			pickups = append(pickups, j.StartedAt.Sub(j.QueuedAt).Seconds())
		}
	}
	w := &WarmReport{WarmUpSeconds: round1(warmUp.Seconds()), Jobs: n, PickupSeconds: quantiles(pickups)}
	if n > 0 {
		w.IdleRunnerSecondsPerJob = round2(idleRunnerSeconds(events, from) / float64(n))
	}
	return w
}

// idleRunnerSeconds sums the time runners spent started and without a job, counted from
// from (the zero time: all of it).
func idleRunnerSeconds(events []agent.Event, from time.Time) float64 {
	running := map[string]time.Time{}
	idle := 0.0
	for _, e := range events {
		switch e.Kind {
		case agent.EventRunning:
			running[e.Pod] = e.At
		case agent.EventJobStarted, agent.EventExited, agent.EventKilled:
			if at, ok := running[e.Pod]; ok {
				if at.Before(from) {
					at = from
				}
				if e.At.After(at) {
					idle += e.At.Sub(at).Seconds()
				}
				delete(running, e.Pod)
			}
		}
	}
	return idle
}
