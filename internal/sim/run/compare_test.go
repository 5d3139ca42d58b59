package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	burst := &Report{Scenario: "burst", PickupSeconds: Quantiles{P99: 4}, ReactionSeconds: Quantiles{P99: 1.5}, RESTCallsPerJob: 1.1,
		KubeWritesPerJob: 7, KubeWritesPerJobWithCollector: val(9), KubeAPI: &KubeAPI{UncachedReadsPerJob: 0.5, PoolStatusWritesPeak: 0.8},
		Floor: &Floor{Finished: true, PickupSeconds: Quantiles{P99: 3.6}, ReactionSeconds: Quantiles{P99: 0.5}}}
	scale := &Report{Scenario: "scale", Controller: Controller{PeakRSSBytes: 600 << 20}, Leftover: Leftover{Pods: 1}}
	out := Compare(Baseline{}, []*Report{burst, scale})
	for _, want := range []string{
		// 1.5 s against 1.5 × 0.5 s; 4 s against 1.15 × 3.6 = 4.14 s.
		"MISSED    burst                reaction p99 (s)                         1.50  (target ≤ 1.5× floor (0.75))",
		"met       burst                pickup p99 (s)                           4.00  (target ≤ 1.15× floor (4.14))",
		"met       burst                REST calls per job",
		// The controller's 7 and the garbage collector's 2 deletes for it.
		"MISSED    burst                Kubernetes API writes per job            9.00  (target ≤ 8)",
		"met       burst                uncached reads per job",
		"met       burst                pool status writes/s (busiest 10 s)",
		"MISSED    scale                controller peak RSS (MiB)",
		"MISSED    scale                left over",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("targets lack %q:\n%s", want, out)
		}
	}
	// The table sets each figure beside its floor, the ratio, and its target.
	if !regexp.MustCompile(`burst\s+reaction p99 \(s\)\s+—\s+1\.50\s+new\s+0\.50\s+3\.00×\s+≤ 1\.5× floor \(0\.75\)\s+MISSED`).MatchString(out) {
		t.Errorf("the table lacks reaction p99 beside its floor, ratio and target:\n%s", out)
	}
	if strings.Contains(out, "faults") {
		t.Errorf("targets of a scenario not run are listed:\n%s", out)
	}
	// A faults run without its faults section measured nothing: missed, not met.
	if out := Compare(Baseline{}, []*Report{{Scenario: "faults"}}); !strings.Contains(out, "MISSED    faults               jobs lost (faults)") {
		t.Errorf("a faults report without faults passes its target:\n%s", out)
	}
}

func TestJudgeWithoutFloorOrAudit(t *testing.T) {
	// A run without a floor (or whose floor failed) and without an audit log measured
	// neither: the targets that need them are missed, never met by default. Writes
	// per job need the audit too: the garbage collector's deletes are counted there.
	for _, r := range []*Report{
		{Scenario: "burst", ReactionSeconds: Quantiles{P99: 0.1}},
		{Scenario: "burst", ReactionSeconds: Quantiles{P99: 0.1}, Floor: &Floor{Error: "boom", ReactionSeconds: Quantiles{P99: 1}}},
	} {
		got := map[string]bool{}
		for _, v := range Judge("burst", FiguresOf(r), nil) {
			got[v.Target.Figure] = v.Met
		}
		want := map[string]bool{
			"reaction p99 (s)": false, "pickup p99 (s)": false, "jobs never picked up": true, "REST calls per job": true,
			"Kubernetes API writes per job": false, "uncached reads per job": false, "pool status writes/s (busiest 10 s)": false,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("verdicts (-want +got):\n%s", diff)
		}
	}
}

// A baseline written before the floor existed still reads, and its figures compare.
func TestOldBaselineReads(t *testing.T) {
	old := `{"burst": {"jobs_total": 500, "pickup_p99": 11.415, "reaction_p99": 9.953, "kube_api_writes_per_job": 11.06,
		"measured_at": "2026-11-22T13:41:56Z", "cpus": 2, "load_avg_1m": [1.9, 3.31]}}`
	var base Baseline
	if err := json.Unmarshal([]byte(old), &base); err != nil {
		t.Fatal(err)
	}
	if base["burst"].FloorPickupP99 != nil || base["burst"].UncachedReadsPerJob != nil {
		t.Errorf("an old baseline has figures it never measured: %+v", base["burst"])
	}
	r := &Report{Scenario: "burst", PickupSeconds: Quantiles{P99: 5.7}, KubeWritesPerJob: 5.53, KubeWritesPerJobWithCollector: val(7.53),
		KubeAPI: &KubeAPI{UncachedReadsPerJob: 0.2}, Floor: &Floor{Finished: true, PickupSeconds: Quantiles{P99: 5}}}
	out := Compare(base, []*Report{r})
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`burst\s+pickup p99 \(s\)\s+11\.41\s+5\.70\s+-50%\s+5\.00\s+1\.14×`),
		// The old baseline counted the controller's own writes only: they compare with
		// the same; every write on its behalf (the garbage collector's deletes
		// included) is new.
		regexp.MustCompile(`burst\s+Kubernetes API writes per job\s+—\s+7\.53\s+new\s+2\.00\s+3\.77×\s+≤ 8\s+met`),
		regexp.MustCompile(`burst\s+controller's own writes per job\s+11\.06\s+5\.53\s+-50%`),
		regexp.MustCompile(`burst\s+uncached reads per job\s+—\s+0\.20\s+new`),
	} {
		if !want.MatchString(out) {
			t.Errorf("comparison does not match %s:\n%s", want, out)
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

// burst-scaleset's pickup p99 is held to burst's of the same comparison, and is not
// judged without it.
func TestCompareJudgesScaleSetBesideBurst(t *testing.T) {
	burst := &Report{Scenario: "burst", DemandSource: "Webhook", PickupSeconds: Quantiles{P99: 4}}
	scaleSet := func(p99, calls float64) *Report {
		return &Report{Scenario: "burst-scaleset", DemandSource: "ScaleSet", PickupSeconds: Quantiles{P99: p99},
			RESTCallsPerJob: 0.01, ActionsServiceCallsPerJob: calls - 0.01, GitHubCallsPerJob: calls}
	}
	tests := []struct {
		name    string
		reports []*Report
		want    []*regexp.Regexp
	}{
		{"within 1.2× burst's", []*Report{burst, scaleSet(4.8, 1.2)}, []*regexp.Regexp{
			regexp.MustCompile(`met\s+burst-scaleset\s+pickup p99 \(s\)\s+4\.80\s+\(target ≤ 1\.2× burst \(4\.80\)\)`),
			regexp.MustCompile(`met\s+burst-scaleset\s+GitHub calls per job\s+1\.20\s+\(target ≤ 1\.3\)`),
			regexp.MustCompile(`burst-scaleset\s+pickup p99 \(s\)\s+—\s+4\.80\s+new\s+≤ 1\.2× burst \(4\.80\)\s+met`),
			regexp.MustCompile(`burst-scaleset\s+Actions service calls per job\s+—\s+1\.19\s+new`),
		}},
		{"slower", []*Report{scaleSet(4.9, 4.5), burst}, []*regexp.Regexp{
			regexp.MustCompile(`MISSED\s+burst-scaleset\s+pickup p99 \(s\)\s+4\.90\s+\(target ≤ 1\.2× burst \(4\.80\)\)`),
			regexp.MustCompile(`MISSED\s+burst-scaleset\s+GitHub calls per job\s+4\.50\s+\(target ≤ 1\.3\)`),
		}},
		{"without burst", []*Report{scaleSet(1, 1)}, []*regexp.Regexp{
			regexp.MustCompile(`not judged\s+burst-scaleset\s+pickup p99 \(s\)\s+target ≤ 1\.2× burst's: burst is not in this comparison`),
			regexp.MustCompile(`met\s+burst-scaleset\s+jobs never picked up`),
		}},
	}
	for _, tc := range tests {
		out := Compare(Baseline{}, tc.reports)
		for _, want := range tc.want {
			if !want.MatchString(out) {
				t.Errorf("%s: comparison does not match %s:\n%s", tc.name, want, out)
			}
		}
		if tc.name == "without burst" && regexp.MustCompile(`(?m)^(met|MISSED) +burst-scaleset +pickup`).MatchString(out) {
			t.Errorf("%s: pickup judged without burst:\n%s", tc.name, out)
		}
	}
	// One report alone (its HTML) judges no target relative to another scenario.
	for _, v := range Judge("burst-scaleset", FiguresOf(scaleSet(100, 1)), nil) {
		if v.Target.Of != "" {
			t.Errorf("judged without its reference: %+v", v)
		}
	}
}

// The comparison says which demand source each run and its baseline had, and flags a
// baseline of the other source.
func TestComparePrintsDemandSource(t *testing.T) {
	base := Baseline{
		"burst":          {CPUs: 2}, // before demand sources: Webhook
		"burst-scaleset": {CPUs: 2, DemandSource: "Webhook"},
	}
	out := Compare(base, []*Report{
		{Scenario: "burst", DemandSource: "Webhook", Host: Host{CPUs: 2}},
		{Scenario: "burst-scaleset", DemandSource: "ScaleSet", Host: Host{CPUs: 2}},
	})
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`burst\s+baseline: [^;]*, demand Webhook; now: [^\n]*, demand Webhook\n`),
		regexp.MustCompile(`burst-scaleset\s+baseline: [^;]*, demand Webhook — NOT COMPARABLE: another demand source; now: [^\n]*, demand ScaleSet\n`),
	} {
		if !want.MatchString(out) {
			t.Errorf("comparison does not match %s:\n%s", want, out)
		}
	}
	if strings.Count(out, "NOT COMPARABLE") != 1 {
		t.Errorf("want one NOT COMPARABLE:\n%s", out)
	}
}

// A report.json written before schema version 4 reads as a webhook run whose GitHub
// calls were all REST calls.
func TestReadReportBeforeDemandSources(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(path, []byte(`{"schema_version": 3, "scenario": "burst", "rest_calls_per_job": 1.02}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	f := FiguresOf(r)
	if r.DemandSource != "Webhook" || deref(f.GitHubCallsPerJob) != 1.02 || deref(f.ActionsServiceCallsPerJob) != 0 || f.DemandSource != "Webhook" {
		t.Errorf("an old report reads as demand %q, GitHub calls %v, service calls %v", r.DemandSource, num(f.GitHubCallsPerJob), num(f.ActionsServiceCallsPerJob))
	}
}
