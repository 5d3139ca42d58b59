package run

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		max       float64
		wantEnd   float64
		wantTicks []float64
		wantLabel string // of the second tick
	}{
		{max: 11.4, wantEnd: 12, wantTicks: []float64{0, 2, 4, 6, 8, 10, 12}, wantLabel: "2"},
		{max: 100, wantEnd: 100, wantTicks: []float64{0, 20, 40, 60, 80, 100}, wantLabel: "20"},
		{max: 0.7, wantEnd: 0.8, wantTicks: []float64{0, 0.2, 0.4, 0.6, 0.8}, wantLabel: "0.2"},
		{max: 500, wantEnd: 500, wantTicks: []float64{0, 100, 200, 300, 400, 500}, wantLabel: "100"},
		{max: 0, wantEnd: 1, wantTicks: []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, wantLabel: "0.2"},
	}
	for _, tc := range tests {
		end, ticks := niceTicks(tc.max)
		if end != tc.wantEnd {
			t.Errorf("niceTicks(%v) ends at %v, want %v", tc.max, end, tc.wantEnd)
		}
		if diff := cmp.Diff(tc.wantTicks, ticks); diff != "" {
			t.Errorf("niceTicks(%v) (-want +got):\n%s", tc.max, diff)
		}
		if got := tickLabel(ticks[1], ticks); got != tc.wantLabel {
			t.Errorf("niceTicks(%v): second tick labeled %q, want %q", tc.max, got, tc.wantLabel)
		}
	}
}

func TestCDF(t *testing.T) {
	// Three jobs, one never picked up: the distribution stops at two thirds.
	px, py := cdf([]float64{2, 1}, 3)
	if diff := cmp.Diff([]float64{0, 1, 1, 2, 2}, px); diff != "" {
		t.Errorf("cdf x (-want +got):\n%s", diff)
	}
	want := []float64{0, 0, 100.0 / 3, 100.0 / 3, 200.0 / 3}
	if diff := cmp.Diff(want, py, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("cdf y (-want +got):\n%s", diff)
	}
}

func TestTimelineRows(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	jobs := []JobTimes{
		{ID: 1, Queued: 0, Pod: f(1), Running: f(2), Started: f(3), Done: f(10)},
		{ID: 2, Queued: 0, Started: f(4)}, // no pod known: waiting until started
		{ID: 3, Queued: 1},                // never picked up: no segment
	}
	c := timeline("t", jobs, 10)
	if c == nil {
		t.Fatal("no timeline for 3 jobs")
	}
	segs := map[string]int{}
	for _, p := range c.Paths {
		segs[p.Class] = strings.Count(p.D, "M")
	}
	if diff := cmp.Diff(map[string]int{"tw": 2, "ts": 1, "ti": 1, "tr": 1}, segs); diff != "" {
		t.Errorf("segments by kind (-want +got):\n%s", diff)
	}
	if timeline("t", make([]JobTimes, maxTimelineJobs+1), 10) != nil {
		t.Error("a timeline of more jobs than it can show")
	}
}
