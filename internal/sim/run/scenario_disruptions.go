package run

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/fault"
)

// The disruptions scenario: workflow runs of jobs that need others, a few minutes each,
// while nodes are drained (some holding idle runners only, most holding busy ones),
// consolidated away, reclaimed as spot nodes and pressed into kubelet evictions — and
// while some jobs fail on their own (their steps fail; their runner container is
// OOM-killed). GitHub's runner lease, about ten minutes, is a minute here
// (RunnerLostTimeout): a runner killed mid-job is failed a minute or so later, its run
// then completes, and only then can a job be re-run. The pool re-runs jobs killed by
// the infrastructure (spec.disruption.rerun InfrastructureFailures) and lets a busy runner
// hold up a drain for 2 minutes (drainTimeout): the longest unit jobs outlast it.

// disruptionsPipeline: 50 runs over 3 minutes, each lint, a unit-test matrix of 3,
// build (needs lint and unit) and e2e (needs build): 300 jobs, about four minutes a
// run; every 10th run's unit (2) fails on its own.
var disruptionsPipeline = Pipeline{
	Runs: 50, Start: 20 * time.Second, Over: 3 * time.Minute, Jitter: 0.2,
	Jobs: []PipelineJob{
		{Key: "lint", Duration: 45 * time.Second},
		{Key: "unit", Matrix: 3, Duration: 2 * time.Minute},
		{Key: "build", Duration: time.Minute, Needs: []string{"lint", "unit"}},
		{Key: "e2e", Duration: 45 * time.Second, Needs: []string{"build"}},
	},
	FailEvery: 10, FailJob: "unit (2)",
}

// DisruptionsSchedule is the disruptions scenario's: before the first run, a drain of
// a node holding only idle runners (the pool keeps 8 warm); then a drain of the busiest
// node, a spot reclaim, kubelet evictions, OOM kills (the jobs' own failures), a
// consolidation of the emptiest node and a second drain. Drained nodes come back
// (uncordoned, as after an upgrade in place); the reclaimed and consolidated ones go.
var DisruptionsSchedule = fault.Schedule{Seed: 1, Steps: []fault.Step{
	{Name: "drain of a node with idle runners", At: sec(8), Drain: &fault.Drain{Pick: fault.PickIdle, Then: fault.ThenUncordon}},
	{Name: "drain of the busiest node", At: sec(90), Drain: &fault.Drain{Pick: fault.PickBusy, Then: fault.ThenUncordon}},
	{Name: "spot reclaim", At: sec(120), SpotReclaim: &fault.SpotReclaim{Pick: fault.PickBusy}},
	{Name: "kubelet evictions (memory pressure)", At: sec(150), KubeletEviction: &fault.PodKill{Count: 3}},
	{Name: "runner containers OOM-killed", At: sec(165), OOMKill: &fault.PodKill{Count: 2}},
	{Name: "consolidation of the emptiest node", At: sec(190), Consolidate: &fault.Drain{}},
	{Name: "drain of the busiest node again", At: sec(220), Drain: &fault.Drain{Pick: fault.PickBusy, Then: fault.ThenUncordon}},
}}

var disruptionsScenario = Scenario{
	Name: "disruptions",
	Description: "50 workflow runs over 3 minutes (lint, a unit matrix of 3, build needs both, e2e needs build: 300 jobs of 45 s to 2 min, every 10th run fails a unit job on purpose) " +
		"while nodes are drained (one with idle runners only, the busiest twice), consolidated, reclaimed as spot nodes, and runners are evicted by the kubelet or OOM-killed; " +
		"GitHub's runner lease shortened to a minute",
	Pipeline: &disruptionsPipeline, RerunSettle: time.Minute,
	Disruption: &v1alpha1.DisruptionSpec{DrainTimeout: &metav1.Duration{Duration: 2 * time.Minute},
		Rerun: v1alpha1.RerunInfrastructureFailures},
	MinIdle: 8, MaxRunners: 250, Nodes: 8,
	PodStartDelay: time.Second, RateLimits: noLimits,
	RunnerLostTimeout: time.Minute,
	// Nodes keep Kubernetes' heartbeat grace and pods its unreachable toleration: on a
	// loaded machine kwok renews a lease late, and a 20 s grace with a 5 s toleration
	// evicts pods no step disrupted (the taint manager's NoExecute evictions).
	NodeLostTimeout: 15 * time.Second, FailedRunnerRetention: 20 * time.Second,
	Faults:  &DisruptionsSchedule,
	Timeout: 20 * time.Minute,
}

// shortDisruptions is the disruptions scenario at a fifth of its jobs, for make
// reliability: 10 runs over a minute, a drain of the busiest node, a spot reclaim, a
// kubelet eviction and an OOM kill.
func shortDisruptions(sc Scenario) Scenario {
	p := *sc.Pipeline
	p.Runs, p.Start, p.Over, p.FailEvery = 10, 10*time.Second, time.Minute, 5
	sc.Pipeline = &p
	sc.Name = "disruptions-short"
	sc.Description = "the disruptions scenario in short: 10 runs over a minute (60 jobs), a drain of the busiest node, a spot reclaim, a kubelet eviction and an OOM kill"
	sc.MinIdle, sc.MaxRunners, sc.Nodes, sc.Timeout = 4, 80, 4, 12*time.Minute
	sc.Faults = &fault.Schedule{Seed: 1, Steps: []fault.Step{
		{Name: "drain of the busiest node", At: sec(60), Drain: &fault.Drain{Pick: fault.PickBusy, Then: fault.ThenUncordon}},
		{Name: "spot reclaim", At: sec(75), SpotReclaim: &fault.SpotReclaim{Pick: fault.PickBusy}},
		{Name: "kubelet eviction", At: sec(90), KubeletEviction: &fault.PodKill{Count: 1}},
		{Name: "runner container OOM-killed", At: sec(95), OOMKill: &fault.PodKill{Count: 1}},
	}}
	return sc
}

// withoutRerun is sc on a pool that has not opted in to re-runs (spec.disruption.rerun
// Never): what its report calls jobs that could have been saved, the pool loses.
func withoutRerun(sc Scenario) Scenario {
	d := *sc.Disruption.DeepCopy()
	d.Rerun = v1alpha1.RerunNever
	sc.Disruption = &d
	sc.Name = sc.Name + "-no-rerun"
	sc.Description += "; the pool does not re-run jobs (spec.disruption.rerun Never)"
	return sc
}

// rerunSettle is how long a pipeline's runs must stay unchanged before the run ends.
func (s Scenario) rerunSettle() time.Duration {
	if s.RerunSettle > 0 {
		return s.RerunSettle
	}
	return time.Minute
}
