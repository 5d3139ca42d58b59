package run

import (
	"encoding/json"
	"slices"
)

// A bench may run a scenario several times (`make bench BENCH_REPEAT=3`): on a shared
// two-core machine a burst's p99 moves by half from one run to the next, and its
// floor's with it. Several runs of a scenario are compared as one: each figure is the
// median of the runs' (the floors' too), and a target relative to the floor is judged
// on the median of the runs' ratios, each run's figure over its own floor.

// MedianFigures merges the figures of several runs of one scenario: a figure is the
// median of the runs that measured it (the mean of the middle two for an even count),
// except what one bad run must show — jobs never picked up, lost or left over, busy
// runners killed: the worst run's; a recovery or a wait that never ended (-1) if any
// run's did not, else the longest — and the job count, the first run's. The conditions
// are the first run's, with the load at its start and at the last run's end. One run
// is returned as it is.
func MedianFigures(runs []Figures) Figures {
	if len(runs) == 1 {
		return runs[0]
	}
	values := map[string][]float64{}
	for _, f := range runs {
		for k, v := range figureMap(f) {
			if x, ok := v.(float64); ok {
				values[k] = append(values[k], x)
			}
		}
	}
	merged := figureMap(runs[0])
	for k, xs := range values {
		switch {
		case k == "jobs_total" || isCondition(k):
		case worstCount[k]:
			merged[k] = slices.Max(xs)
		case neverOrLongest[k]:
			merged[k] = slices.Max(xs)
			if slices.Contains(xs, -1) {
				merged[k] = -1.0
			}
		default:
			merged[k] = median(xs)
		}
	}
	var out Figures
	b, _ := json.Marshal(merged)
	_ = json.Unmarshal(b, &out)
	out.Load = [2]float64{runs[0].Load[0], runs[len(runs)-1].Load[1]}
	return out
}

// worstCount are counts of what went wrong: the runs' largest stands for them all.
var worstCount = map[string]bool{"jobs_never_picked_up": true, "busy_runners_killed": true, "leftover": true, "jobs_lost": true}

// neverOrLongest are durations where -1 means it never ended.
var neverOrLongest = map[string]bool{"recovery_seconds": true, "sessions_open_seconds": true}

// figureMap is f as JSON's generic map: numbers as float64, absent figures absent.
func figureMap(f Figures) map[string]any {
	b, _ := json.Marshal(f)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// isCondition: the figure describes how the run was made, not what it measured.
func isCondition(key string) bool {
	switch key {
	case "demand_source", "measured_at", "cpus", "load_avg_1m":
		return true
	}
	return false
}

// median of xs (not empty): the middle value, or the mean of the middle two.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// JudgeRuns judges the targets of a scenario run several times: on the median figures
// (MedianFigures), except that a target relative to the floor is met when the median of
// the runs' ratios is within it. Each such verdict lists the runs' ratios.
func JudgeRuns(scenario string, runs []Figures, peers map[string]Figures) []Verdict {
	verdicts := Judge(scenario, MedianFigures(runs), peers)
	if len(runs) < 2 {
		return verdicts
	}
	for i, v := range verdicts {
		if !v.Target.OfFloor {
			continue
		}
		fig, ok := figureNamed(v.Target.Figure)
		if !ok || fig.floor == nil {
			continue
		}
		ratios, all := runRatios(fig, runs)
		v.RunRatios = ratios
		v.Met = all && median(ratios) <= v.Target.Max
		verdicts[i] = v
	}
	return verdicts
}

// runRatios are each run's figure over that run's floor, for the runs that measured
// both (a zero floor gives none); all reports whether every run did.
func runRatios(fig figure, runs []Figures) (ratios []float64, all bool) {
	for _, f := range runs {
		value, floor := fig.value(f), fig.floor(f)
		if value == nil || floor == nil {
			continue
		}
		if r := ratio(*value, *floor); r != nil {
			ratios = append(ratios, *r)
		}
	}
	return ratios, len(ratios) > 0 && len(ratios) == len(runs)
}
