package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

func TestPoolNames(t *testing.T) {
	tests := []struct {
		name                 string
		pools, burstPools    int
		wantN                int
		wantFirst, wantLast  string
		wantBurst, wantBLast string
		wantBurstN           int
	}{
		{"default: one pool named linux", 0, 0, 1, "linux", "linux", "linux", "linux", 1},
		{"one pool", 1, 1, 1, "linux", "linux", "linux", "linux", 1},
		{"200 pools, burst over 50", 200, 50, 200, "linux-001", "linux-200", "linux-001", "linux-050", 50},
		{"burst over every pool by default", 3, 0, 3, "linux-001", "linux-003", "linux-001", "linux-003", 3},
		{"four digits past 999", 1000, 0, 1000, "linux-0001", "linux-1000", "linux-0001", "linux-1000", 1000},
	}
	for _, tc := range tests {
		sc := Scenario{Pools: tc.pools, BurstPools: tc.burstPools}
		names, burst := sc.poolNames(), sc.burstPools()
		got := []any{len(names), names[0], names[len(names)-1], len(burst), burst[0], burst[len(burst)-1]}
		want := []any{tc.wantN, tc.wantFirst, tc.wantLast, tc.wantBurstN, tc.wantBurst, tc.wantBLast}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
	// Every pool has the same spec but its name, which is its scale set's.
	pools := newPools(Scenarios["burst-scalesets-50"], "http://sim")
	for _, p := range pools[1:] {
		if diff := cmp.Diff(pools[0].Spec, p.Spec); diff != "" {
			t.Errorf("pool %s's spec differs from %s's (-first +this):\n%s", p.Name, pools[0].Name, diff)
		}
		if p.ScaleSetName() != p.Name || p.Namespace != namespace {
			t.Errorf("pool %s/%s: scale set %q", p.Namespace, p.Name, p.ScaleSetName())
		}
	}
}

func TestValidateManyPools(t *testing.T) {
	scaleSet := func(f func(*Scenario)) Scenario {
		sc := Scenario{Name: "t", Burst: 10, MaxRunners: 10, Nodes: 1, Timeout: time.Minute, DemandSource: v1alpha1.DemandSourceScaleSet, Pools: 4}
		f(&sc)
		return sc
	}
	tests := []struct {
		name    string
		sc      Scenario
		wantErr string // "": valid
	}{
		{"many scale-set pools", scaleSet(func(*Scenario) {}), ""},
		{"burst over some", scaleSet(func(s *Scenario) { s.BurstPools = 2 }), ""},
		{"idle only", scaleSet(func(s *Scenario) { s.Burst, s.Idle = 0, time.Minute }), ""},
		{"a single webhook pool idle", Scenario{Idle: time.Minute, MaxRunners: 1, Nodes: 1, Timeout: time.Minute}, ""},
		{"no jobs, no idle", scaleSet(func(s *Scenario) { s.Burst = 0 }), "queues no jobs and measures no idle window"},
		{"webhook pools", scaleSet(func(s *Scenario) { s.DemandSource = v1alpha1.DemandSourceWebhook }), "pools 4 needs demand_source ScaleSet"},
		{"webhook by default", scaleSet(func(s *Scenario) { s.DemandSource = "" }), "pools 4 needs demand_source ScaleSet"},
		{"more burst pools than pools", scaleSet(func(s *Scenario) { s.BurstPools = 5 }), "burst_pools 5 is more than the scenario's 4 pool(s)"},
		{"burst pools of one pool", Scenario{Burst: 1, BurstPools: 2, MaxRunners: 1, Nodes: 1, Timeout: time.Minute}, "burst_pools 2 is more than the scenario's 1 pool(s)"},
		{"steady arrivals", scaleSet(func(s *Scenario) { s.Rate, s.Steady = 1, time.Minute }), "pools 4 takes a burst only"},
		{"negative", scaleSet(func(s *Scenario) { s.Pools = -1 }), "must not be negative"},
	}
	for _, tc := range tests {
		err := tc.sc.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: Validate() = %v, want an error saying %q", tc.name, err, tc.wantErr)
		}
	}
	// The built-in many-pool scenarios cannot be moved to webhooks.
	if err := WithDemandSource(Scenarios["idle-scalesets"], v1alpha1.DemandSourceWebhook).Validate(); err == nil {
		t.Error("idle-scalesets on Webhook is valid")
	}
}

// recordingQueue records the runs and jobs queued, giving each job an id.
type recordingQueue struct {
	runs []simgithub.RunSpec
	next int64
}

func (q *recordingQueue) QueueRun(spec simgithub.RunSpec) (simgithub.Run, error) {
	q.runs = append(q.runs, spec)
	var run simgithub.Run
	for _, js := range spec.Jobs {
		q.next++
		run.Jobs = append(run.Jobs, simgithub.Job{ID: q.next, Labels: js.Labels})
	}
	for range spec.Matrix {
		q.next++
		run.Jobs = append(run.Jobs, simgithub.Job{ID: q.next, Labels: spec.Template.Labels})
	}
	return run, nil
}

func (q *recordingQueue) QueueJob(simgithub.JobSpec) (simgithub.Job, error) {
	q.next++
	return simgithub.Job{ID: q.next}, nil
}

// burst-scalesets-50's burst: 500 jobs in runs of at most 256, round-robin over the
// first 50 pools, each job's runs-on its pool's scale set alone.
func TestBurstSpreadOverPools(t *testing.T) {
	sc := Scenarios["burst-scalesets-50"]
	q := &recordingQueue{}
	queued, err := queueWorkload(context.Background(), q, sc.workload(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != 500 || len(q.runs) != 2 || len(q.runs[0].Jobs) != 256 || len(q.runs[1].Jobs) != 244 {
		t.Fatalf("%d jobs in %d runs; want 500 in runs of 256 and 244", len(queued), len(q.runs))
	}
	perPool := map[string]int{}
	k := 0
	for _, run := range q.runs {
		if run.Matrix != 0 {
			t.Errorf("a spread burst queued a matrix of %d", run.Matrix)
		}
		for _, j := range run.Jobs {
			want := fmt.Sprintf("linux-%03d", k%50+1)
			if diff := cmp.Diff([]string{want}, j.Labels); diff != "" {
				t.Errorf("job %d's runs-on (-want +got):\n%s", k, diff)
			}
			if j.Duration != simgithub.Duration(sc.JobDuration) || j.Repo != org+"/app" {
				t.Errorf("job %d: %+v", k, j)
			}
			perPool[j.Labels[0]]++
			k++
		}
	}
	if len(perPool) != 50 {
		t.Errorf("the burst went to %d pools, want 50", len(perPool))
	}
	for name, n := range perPool {
		if n != 10 {
			t.Errorf("pool %s got %d jobs, want 10", name, n)
		}
	}
	// A single pool's burst is still matrices of the one job.
	q = &recordingQueue{}
	if _, err := queueWorkload(context.Background(), q, Scenarios["burst-scaleset"].workload(), 1, nil); err != nil {
		t.Fatal(err)
	}
	if len(q.runs) != 2 || q.runs[0].Matrix != 256 || q.runs[1].Matrix != 244 || len(q.runs[0].Jobs) != 0 {
		t.Errorf("burst-scaleset's runs: %+v", q.runs)
	}
}

func TestSessionsOpen(t *testing.T) {
	sets := []simgithub.ScaleSet{
		{Name: "linux-001", Session: "gantry"}, {Name: "linux-002"}, {Name: "linux-003", Session: "gantry"},
		{Name: "other", Session: "someone"},
	}
	if got := sessionsOpen(sets, []string{"linux-001", "linux-002", "linux-003", "linux-004"}); got != 2 {
		t.Errorf("sessions open = %d, want 2 (linux-001, linux-003; not other's)", got)
	}
}

// fakeScaleSets opens one more session at each look, up to n.
type fakeScaleSets struct {
	names []string
	open  int
}

func (f *fakeScaleSets) ScaleSets() []simgithub.ScaleSet {
	var out []simgithub.ScaleSet
	for i, n := range f.names {
		ss := simgithub.ScaleSet{Name: n}
		if i < f.open {
			ss.Session = "gantry"
		}
		out = append(out, ss)
	}
	f.open = min(f.open+1, len(f.names))
	return out
}

func TestWaitSessions(t *testing.T) {
	names := []string{"linux-001", "linux-002"}
	s := waitSessions(context.Background(), &fakeScaleSets{names: names}, names, time.Minute, io.Discard)
	if s.Pools != 2 || s.Open != 2 || s.Seconds == nil {
		t.Errorf("sessions %+v: want 2 of 2 open, with the time it took", s)
	}
	s = waitSessions(context.Background(), &fakeScaleSets{names: names[:1]}, names, 300*time.Millisecond, io.Discard)
	if s.Open != 1 || s.Seconds != nil {
		t.Errorf("sessions %+v: want 1 of 2 open and no time (never all)", s)
	}
}

func TestIdleReport(t *testing.T) {
	from := idleSnapshot{at: t0, cpuSeconds: 10, goroutines: 900, calls: map[string]simgithub.CallCount{
		"GET /_apis/runtime/runnerscalesets/{id}/messages": {Total: 1000},
		"GET /orgs/{org}/actions/runners":                  {Total: 5},
	}}
	to := idleSnapshot{at: at(120), cpuSeconds: 11.5, goroutines: 910, calls: map[string]simgithub.CallCount{
		"GET /_apis/runtime/runnerscalesets/{id}/messages":     {Total: 1480}, // 480 long polls in 2 min
		"PATCH /_apis/runtime/runnerscalesets/{id}/sessions/x": {Total: 20},
		"GET /orgs/{org}/actions/runners":                      {Total: 5}, // none in the window
		"POST /actions/runner-registration":                    {Total: 2},
	}}
	got := idleReport(200, 199, from, to, 80<<20)
	want := &IdleReport{
		Pools: 200, SessionsOpen: 199, WindowSeconds: 120, GoroutinesStart: 900, Goroutines: 910, RSSBytes: 80 << 20,
		CPUSecondsPerMinute:          0.75,
		ActionsServiceCallsPerMinute: 251, ActionsServiceCallsPerMinutePerPool: 1.255, RESTCallsPerMinute: 0,
		ActionsServiceCallsByRoute: map[string]int64{
			"GET /_apis/runtime/runnerscalesets/{id}/messages": 480, "PATCH /_apis/runtime/runnerscalesets/{id}/sessions/x": 20,
			"POST /actions/runner-registration": 2,
		},
		RESTCallsByRoute: map[string]int64{},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(IdleReport{})); diff != "" {
		t.Errorf("idle report (-want +got):\n%s", diff)
	}
}

func TestParseGauge(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines 1234\ngo_goroutines_other 7\ngo_threads 12\n"
	if v, ok := parseGauge(text, "go_goroutines"); !ok || v != 1234 {
		t.Errorf("go_goroutines = %v, %v; want 1234", v, ok)
	}
	if _, ok := parseGauge(text, "go_missing"); ok {
		t.Error("a missing metric parses")
	}
}

// measureIdle reads this process as the controller and a metrics endpoint as its.
func TestMeasureIdle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "go_goroutines 42")
	}))
	defer srv.Close()
	sim := simgithub.New(simgithub.Options{})
	defer sim.Close()
	probe := idleProbe{sim: sim, pid: os.Getpid, metricsURL: srv.URL}
	var out strings.Builder
	r := measureIdle(context.Background(), probe, &fakeScaleSets{names: []string{"linux"}, open: 1}, []string{"linux"}, 50*time.Millisecond, &out)
	if r.Goroutines != 42 || r.GoroutinesStart != 42 || r.RSSBytes <= 0 || r.Pools != 1 || r.SessionsOpen != 1 || r.Error != "" {
		t.Errorf("idle report %+v", r)
	}
	if !strings.Contains(out.String(), "Idle: 1 pools, 1 sessions open") {
		t.Errorf("progress:\n%s", out.String())
	}
	// Without metrics: measured as far as it goes, and says what is missing.
	probe.metricsURL = srv.URL + "/gone"
	srv.Close()
	r = measureIdle(context.Background(), probe, &fakeScaleSets{}, []string{"linux"}, time.Millisecond, io.Discard)
	if r.Error == "" || r.RSSBytes <= 0 || !strings.Contains(r.summary(), "not all measured") {
		t.Errorf("idle report without metrics %+v", r)
	}
}

// The idle window and the sessions are in report.json, the summary, the HTML report,
// the comparison's figures and targets, and in whether the run was clean.
func TestReportOfManyPoolsIdle(t *testing.T) {
	secs := 12.5
	in := reportInputs{
		start: t0, finished: true, drained: true,
		sessions: &Sessions{Pools: 200, Open: 200, Seconds: &secs},
		idle: &IdleReport{
			Pools: 200, SessionsOpen: 200, WindowSeconds: 120, GoroutinesStart: 1700, Goroutines: 1710, RSSBytes: 90 << 20,
			CPUSecondsPerMinute: 0.4, ActionsServiceCallsPerMinute: 240, ActionsServiceCallsPerMinutePerPool: 1.2, RESTCallsPerMinute: 0.5,
			ActionsServiceCallsByRoute: map[string]int64{"GET /_apis/runtime/runnerscalesets/{id}/messages": 480},
		},
	}
	r := buildReport(Scenarios["idle-scalesets"], in)
	if !r.Clean() || r.Pools != 200 {
		t.Errorf("clean %v, pools %d: want a clean run of 200 pools", r.Clean(), r.Pools)
	}
	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["pools"] != 200.0 {
		t.Errorf("report.json pools = %v", m["pools"])
	}
	for obj, keys := range map[string][]string{
		"idle": {"pools", "sessions_open", "window_seconds", "goroutines", "goroutines_start", "rss_bytes", "cpu_seconds_per_minute",
			"actions_service_calls_per_minute", "actions_service_calls_per_minute_per_pool", "rest_calls_per_minute", "actions_service_calls_by_endpoint"},
		"sessions": {"pools", "open", "seconds"},
	} {
		sub, _ := m[obj].(map[string]any)
		for _, k := range keys {
			if _, ok := sub[k]; !ok {
				t.Errorf("report.json %s lacks %q", obj, k)
			}
		}
	}
	for _, want := range []string{
		"200 pools: 200 scale-set sessions open before the workload (all open 12.5s after the controller was ready)",
		"idle: 200 pools, 200 sessions open, 120 s window: goroutines 1710 (1700 at its start), RSS 90.0 MiB, CPU 0.400 s/min, Actions service calls 240.00/min (1.200 per pool), REST calls 0.50/min",
	} {
		if !strings.Contains(r.Summary(), want) {
			t.Errorf("summary lacks %q:\n%s", want, r.Summary())
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"200 pools.", "all 12.50 s after the controller was ready", "<h2>Idle</h2>",
		`<th>goroutines</th><td class="n">1710</td>`, `<th>resident memory (MiB)</th><td class="n">90.0</td>`,
		`<th>CPU-seconds per minute</th><td class="n">0.400</td>`, `<th>Actions service calls per minute</th><td class="n">240.00</td><td>1.200 per pool`,
		"idle: Actions service calls/min per pool", // its target
	} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}

	out := Compare(Baseline{}, []*Report{r})
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`met\s+idle-scalesets\s+idle: Actions service calls/min per pool\s+1\.20\s+\(target ≤ 2\)`),
		regexp.MustCompile(`idle-scalesets\s+idle: goroutines\s+—\s+1710\.00\s+new`),
		regexp.MustCompile(`idle-scalesets\s+idle: controller RSS \(MiB\)\s+—\s+90\.00`),
		regexp.MustCompile(`idle-scalesets\s+idle: controller CPU \(s/min\)\s+—\s+0\.40`),
		regexp.MustCompile(`idle-scalesets\s+sessions all open \(s, -1 never\)\s+—\s+12\.50`),
	} {
		if !want.MatchString(out) {
			t.Errorf("comparison does not match %s:\n%s", want, out)
		}
	}

	// A session not open: not clean, and the target judged on what was measured.
	in.idle.SessionsOpen, in.sessions.Open, in.sessions.Seconds = 199, 199, nil
	in.idle.ActionsServiceCallsPerMinutePerPool = 3
	r = buildReport(Scenarios["idle-scalesets"], in)
	if r.Clean() {
		t.Error("a run with a session not open is clean")
	}
	if !strings.Contains(r.Summary(), "199 scale-set sessions open before the workload (not all within 5m)") {
		t.Errorf("summary:\n%s", r.Summary())
	}
	out = Compare(Baseline{}, []*Report{r})
	if !regexp.MustCompile(`MISSED\s+idle-scalesets\s+idle: Actions service calls/min per pool\s+3\.00`).MatchString(out) ||
		!regexp.MustCompile(`sessions all open \(s, -1 never\)\s+—\s+-1\.00`).MatchString(out) {
		t.Errorf("comparison:\n%s", out)
	}
}

func TestBurstOverManyPoolsTargets(t *testing.T) {
	r := &Report{Scenario: "burst-scalesets-50", DemandSource: v1alpha1.DemandSourceScaleSet, JobsTotal: 500, JobsNeverPickedUp: 1, Leftover: Leftover{Pods: 2}}
	verdicts := map[string]bool{}
	for _, v := range Judge(r.Scenario, FiguresOf(r), nil) {
		verdicts[v.Target.Figure] = v.Met
	}
	// No audit log: the writes per job are not measured, so not met.
	want := map[string]bool{"jobs never picked up": false, "left over": false, "writes per job from the workload's start": false}
	if diff := cmp.Diff(want, verdicts); diff != "" {
		t.Errorf("burst-scalesets-50's verdicts (-want +got):\n%s", diff)
	}
	r.JobsNeverPickedUp, r.Leftover, r.KubeAPI = 0, Leftover{}, &KubeAPI{WorkloadWritesPerJob: 6.9}
	for _, v := range Judge(r.Scenario, FiguresOf(r), nil) {
		if !v.Met {
			t.Errorf("missed %+v", v)
		}
	}
}
