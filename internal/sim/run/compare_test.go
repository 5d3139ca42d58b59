package run

import (
	"strings"
	"testing"
)

func TestCompareShowsBaselineAndChange(t *testing.T) {
	base := Baseline{"burst": {PickupP99: 10, RESTCallsPerJob: 1.0, PeakRSSMiB: 64, CPUs: 2, Load: [2]float64{0.5, 1.5}}}
	r := &Report{Scenario: "burst", PickupSeconds: Quantiles{P99: 5}, RESTCallsPerJob: 1.0, Controller: Controller{PeakRSSBytes: 96 << 20},
		Host: Host{CPUs: 2, LoadAvgStart: [3]float64{3.2}, LoadAvgEnd: [3]float64{4.1}}}
	out := Compare(base, []*Report{r, {Scenario: "fresh"}})
	for _, want := range []string{
		"pickup p99 (s)", "10.00", "5.00", "-50%",
		"controller peak RSS (MiB)", "+50%",
		"fresh", "new",
		"Measured on", "baseline: 0001-01-01 00:00Z, 2 CPUs, load 0.5→1.5", "now: 0001-01-01 00:00Z, 2 CPUs, load 3.2→4.1", "fresh                baseline: no baseline",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
}

func TestCompareJudgesTargets(t *testing.T) {
	burst := &Report{Scenario: "burst", PickupSeconds: Quantiles{P99: 4}, ReactionSeconds: Quantiles{P99: 1.5}, RESTCallsPerJob: 1.1}
	scale := &Report{Scenario: "scale", Controller: Controller{PeakRSSBytes: 600 << 20}, Leftover: Leftover{Pods: 1}}
	out := Compare(Baseline{}, []*Report{burst, scale})
	for _, want := range []string{
		"MISSED    burst                reaction p99 (s)",
		"met       burst                pickup p99 (s)",
		"met       burst                REST calls per job",
		"MISSED    scale                controller peak RSS (MiB)",
		"MISSED    scale                left over",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("targets lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "faults") {
		t.Errorf("targets of a scenario not run are listed:\n%s", out)
	}
	// A faults run without its faults section measured nothing: missed, not met.
	if out := Compare(Baseline{}, []*Report{{Scenario: "faults"}}); !strings.Contains(out, "MISSED    faults               jobs lost") {
		t.Errorf("a faults report without faults passes its target:\n%s", out)
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

func TestParseKubeRequests(t *testing.T) {
	text := `# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 12
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 500
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="POST"} 3
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 1e+03
rest_client_request_duration_seconds_bucket{le="0.1"} 7
`
	got := parseKubeRequests(text)
	want := map[string]int64{"GET": 12, "POST": 503, "PATCH": 1000}
	if len(got) != len(want) {
		t.Fatalf("parseKubeRequests = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses, as /proc allows.
	line := "4242 (kube-apiserver (x)) S 100 4242 4242 0 -1 4194560 1 0 0 0 1234 567 0 0 20 0 12 0 100 0 0"
	name, ppid, cpu, ok := parseStat(line)
	if !ok || name != "kube-apiserver (x)" || ppid != 100 || cpu != 18.01 {
		t.Errorf("parseStat = %q, %d, %v, %v; want kube-apiserver (x), 100, 18.01", name, ppid, cpu, ok)
	}
	if _, _, _, ok := parseStat("garbage"); ok {
		t.Error("parseStat accepted garbage")
	}
	if _, ok := processCPU()["harness"]; !ok {
		t.Error("processCPU lacks this process")
	}
}
