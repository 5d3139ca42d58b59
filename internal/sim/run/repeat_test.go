package run

import (
	"strings"
	"testing"
)

func burstRun(reaction, floor float64, leftover int) *Report {
	return &Report{Scenario: "burst", JobsTotal: 500, ReactionSeconds: Quantiles{P99: reaction}, PickupSeconds: Quantiles{P99: 10},
		KubeWritesPerJob: 6, Leftover: Leftover{Pods: leftover},
		Floor: &Floor{Finished: true, ReactionSeconds: Quantiles{P99: floor}, PickupSeconds: Quantiles{P99: 9}}}
}

// Three runs of a burst: the floor target is judged on the median of each run's own
// ratio, the figures are medians, and one run's leftovers are not outvoted (the merged
// figures say 2).
func TestRepeatedRunsAreJudgedOnTheirMedians(t *testing.T) {
	runs := []*Report{
		burstRun(6.0, 1.8, 0), // 3.33×
		burstRun(4.5, 3.0, 0), // 1.50×
		burstRun(4.0, 2.9, 2), // 1.38×
	}
	out := Compare(Baseline{}, runs)
	for _, want := range []string{
		// Medians of the runs' own ratios, not the ratio of the medians (4.5 / 2.9 = 1.55).
		"met       burst                reaction p99 (s)                         4.50  (target ≤ 1.5× floor: median 1.50× of 3.33×, 1.50×, 1.38×)",
		"now: median of 3 runs from",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}

	var figs []Figures
	for _, r := range runs {
		figs = append(figs, FiguresOf(r))
	}
	m := MedianFigures(figs)
	if m.ReactionP99 != 4.5 || *m.FloorReactionP99 != 2.9 || m.Leftover != 2 || m.JobsTotal != 500 || m.KubeWritesPerJob != 6 {
		t.Errorf("merged figures: reaction %v floor %v leftover %d jobs %d writes %v; want 4.5, 2.9, 2, 500, 6",
			m.ReactionP99, *m.FloorReactionP99, m.Leftover, m.JobsTotal, m.KubeWritesPerJob)
	}

	// Two runs of three over the target: missed.
	out = Compare(Baseline{}, []*Report{burstRun(6.0, 1.8, 0), burstRun(4.8, 3.0, 0), burstRun(4.0, 2.9, 0)})
	if !strings.Contains(out, "MISSED    burst                reaction p99 (s)") {
		t.Errorf("a median ratio of 1.60× passes a 1.5× target:\n%s", out)
	}
}

func TestMedianFiguresKeepsNeverAndEvenCounts(t *testing.T) {
	rec := func(x float64) *float64 { return &x }
	m := MedianFigures([]Figures{
		{PickupP99: 1, RecoverySeconds: rec(30)},
		{PickupP99: 2, RecoverySeconds: rec(-1)},
		{PickupP99: 4, RecoverySeconds: rec(50)},
		{PickupP99: 8},
	})
	if m.PickupP99 != 3 {
		t.Errorf("median of 1, 2, 4, 8: %v, want 3", m.PickupP99)
	}
	if m.RecoverySeconds == nil || *m.RecoverySeconds != -1 {
		t.Errorf("a run that never recovered: worst recovery %v, want -1", m.RecoverySeconds)
	}
	one := Figures{PickupP99: 7, CPUs: 2}
	if got := MedianFigures([]Figures{one}); got != one {
		t.Errorf("one run: %+v, want it unchanged", got)
	}
}
