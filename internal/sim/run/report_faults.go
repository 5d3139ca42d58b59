// What a fault schedule and a trace replay add to the report.

package run

import (
	"math"
	"slices"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

func faultsReport(r *Report, in reportInputs, failedRunnerLost, lostWithNode int) *FaultsReport {
	f := &FaultsReport{
		Injections: slices.Clone(in.injections), JobsLost: r.JobsNeverPickedUp + r.JobsUnfinished,
		JobsFailedRunnerLost: failedRunnerLost, BusyRunnersLostWithNode: lostWithNode,
		BusyRunnersKilled: r.BusyRunnersKilled, Leftover: r.Leftover.Total(),
	}
	worst, all := 0.0, true
	for i := range f.Injections {
		inj := &f.Injections[i]
		inj.RecoverySeconds = recovery(*inj, in.start, in.jobs, in.events, in.lostNodePods)
		if inj.RecoverySeconds == nil {
			all = all && !inj.Injected // a step never injected has nothing to recover from
			continue
		}
		worst = math.Max(worst, *inj.RecoverySeconds)
	}
	if all {
		f.RecoverySeconds = &worst
	}
	return f
}

func traceReport(sc Scenario) *TraceReport {
	tr := &TraceReport{File: sc.TraceFile, Jobs: len(sc.Trace.Jobs), Speed: sc.TraceSpeed}
	var rec []float64
	for _, j := range sc.Trace.Jobs {
		if j.Pickup != nil {
			rec = append(rec, float64(*j.Pickup))
		}
	}
	if len(rec) > 0 {
		q := quantiles(rec)
		tr.RecordedPickupSeconds = &q
	}
	return tr
}

// recovery is how long after an injection ended the system caught up: every job
// queued before the end had been picked up and, for a lost node, every runner pod
// bound to it was gone. nil when that never happened (or the step never ran).
func recovery(inj fault.Injection, start time.Time, jobs []simgithub.Job, events []agent.Event, podsLeft map[string]int) *float64 {
	if !inj.Injected || inj.Error != "" {
		return nil
	}
	end := start.Add(time.Duration(inj.EndSeconds * float64(time.Second)))
	caughtUp := end
	for _, j := range jobs {
		if !j.QueuedAt.Before(end) {
			continue
		}
		if j.StartedAt == nil {
			return nil
		}
		if j.StartedAt.After(caughtUp) {
			caughtUp = *j.StartedAt
		}
	}
	if inj.Kind == fault.KindNodeLost {
		if podsLeft[inj.Node] > 0 {
			return nil
		}
		for _, e := range events {
			if e.Kind == agent.EventDeleted && e.Node == inj.Node && e.At.After(caughtUp) {
				caughtUp = e.At
			}
		}
	}
	s := round1(caughtUp.Sub(end).Seconds())
	return &s
}
