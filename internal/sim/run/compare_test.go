package run

import (
	"strings"
	"testing"
)

func TestCompareShowsBaselineAndChange(t *testing.T) {
	base := Baseline{"burst": {PickupP99: 10, RESTCallsPerJob: 1.0, PeakRSSMiB: 64}}
	r := &Report{Scenario: "burst", PickupSeconds: Quantiles{P99: 5}, RESTCallsPerJob: 1.0, Controller: Controller{PeakRSSBytes: 96 << 20}}
	out := Compare(base, []*Report{r, {Scenario: "fresh"}})
	for _, want := range []string{
		"pickup p99 (s)", "10.00", "5.00", "-50%",
		"controller peak RSS (MiB)", "+50%",
		"fresh", "new",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
}

func TestQuantiles(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	q := quantiles(xs)
	if q.P50 != 50 || q.P95 != 95 || q.P99 != 99 || q.Max != 100 {
		t.Errorf("quantiles of 1..100 = %+v", q)
	}
	if q := quantiles(nil); q != (Quantiles{}) {
		t.Errorf("quantiles of nothing = %+v", q)
	}
}
