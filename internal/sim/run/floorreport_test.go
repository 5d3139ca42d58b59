package run

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// syntheticRun is n jobs queued at once, each taken by its own pod: the pod is seen
// react seconds after the job, Running 1 s later, the job started 0.5 s after that
// and done 10 s later; pods appear one per podEvery seconds.
func syntheticRun(n int, react, podEvery float64, prefix string) ([]simgithub.Job, []agent.Event) {
	var jobs []simgithub.Job
	var events []agent.Event
	for i := range n {
		pod := fmt.Sprintf("%s%d", prefix, i)
		created := react + float64(i)*podEvery
		started := created + 1.5
		jobs = append(jobs, job(int64(i+1), 0, started, started+10, "success"))
		events = append(events,
			agent.Event{Kind: agent.EventCreated, Pod: pod, At: at(created)},
			agent.Event{Kind: agent.EventRunning, Pod: pod, At: at(created + 1)},
			agent.Event{Kind: agent.EventJobStarted, Pod: pod, Job: int64(i + 1), At: at(started)},
		)
	}
	return jobs, events
}

func TestFloorReportRatios(t *testing.T) {
	gJobs, gEvents := syntheticRun(100, 2, 0.1, "linux-")
	fJobs, fEvents := syntheticRun(100, 1, 0.05, floorPodPrefix)
	gantry := buildReport(Scenario{Name: "burst"}, reportInputs{start: t0, jobs: gJobs, events: gEvents,
		controller: Controller{CPUSeconds: 1.2, Processes: 1}})
	fl := floorReport(floorRun{start: t0, end: at(30), jobs: fJobs, events: fEvents, finished: true, clusterDrained: true,
		cpuSeconds: 0.15}, nil, gantry)

	// Gantry reacts in 2 + 0.1 i s, the floor in 1 + 0.05 i s (i = 0..99).
	if want := (Quantiles{P50: 6.9, P95: 11.4, P99: 11.8, Max: 11.9}); gantry.ReactionSeconds != want {
		t.Errorf("Gantry's reaction = %+v, want %+v", gantry.ReactionSeconds, want)
	}
	if want := (Quantiles{P50: 3.45, P95: 5.7, P99: 5.9, Max: 5.95}); fl.ReactionSeconds != want {
		t.Errorf("the floor's reaction = %+v, want %+v", fl.ReactionSeconds, want)
	}
	f := func(x float64) *float64 { return &x }
	want := FloorRatio{
		ReactionSeconds: Ratios{P50: f(2), P95: f(2), P99: f(2), Max: f(2)},
		// Pickup adds 1.5 s to each: (3.5+0.1 i)/(2.5+0.05 i): 8.4/4.95 at p50 (i = 49),
		// 12.9/7.2 at p95, 13.3/7.4 at p99, 13.4/7.45 at the max.
		PickupSeconds: Ratios{P50: f(1.7), P95: f(1.79), P99: f(1.8), Max: f(1.8)},
		// The controller's 12 ms per job over the oracle's 1.5.
		CPUMsPerJob: f(8),
	}
	if diff := cmp.Diff(want, fl.Ratio); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	if fl.JobsTotal != 100 || fl.JobsNeverPickedUp != 0 || !fl.Finished || !fl.ClusterDrained || fl.WallSeconds != 30 {
		t.Errorf("floor = %+v", fl)
	}
	if fl.CPUMsPerJob == nil || *fl.CPUMsPerJob != 1.5 {
		t.Errorf("the floor's CPU per job = %v, want 1.5 ms", num(fl.CPUMsPerJob))
	}
	if fig := FiguresOf(&Report{Floor: fl, JobsTotal: 100}); fig.FloorCPUMsPerJob == nil || *fig.FloorCPUMsPerJob != 1.5 {
		t.Errorf("figures' floor CPU per job = %v, want 1.5", num(fig.FloorCPUMsPerJob))
	}
	// An oracle that did not run to its end has no CPU figure.
	if fl := floorReport(floorRun{start: t0, end: at(30), jobs: fJobs, events: fEvents, finished: true}, nil, gantry); fl.CPUMsPerJob != nil || fl.Ratio.CPUMsPerJob != nil {
		t.Errorf("no oracle CPU: floor CPU %v, ratio %v; want both null", num(fl.CPUMsPerJob), num(fl.Ratio.CPUMsPerJob))
	}
}

func TestRatioOfZeroFloorIsNull(t *testing.T) {
	got := ratios(Quantiles{P50: 1, P99: 2}, Quantiles{P50: 0, P99: 4})
	if got.P50 != nil || got.P99 == nil || *got.P99 != 0.5 {
		t.Errorf("ratios = %+v: want p50 null (floor 0), p99 0.5", got)
	}
}

func TestFloorReportSaysWhatFailed(t *testing.T) {
	fl := floorReport(floorRun{start: t0, end: at(1), errors: 3, firstErr: fmt.Errorf("creating pod floor-1: forbidden")}, nil, &Report{})
	if fl.Errors != 3 || fl.Error != "creating pod floor-1: forbidden" {
		t.Errorf("floor errors = %d %q", fl.Errors, fl.Error)
	}
	if f := FiguresOf(&Report{Floor: fl}); f.FloorPickupP99 != nil {
		t.Error("a floor that did not finish gives a figure")
	}
}

func TestJobTimes(t *testing.T) {
	jobs := []simgithub.Job{job(2, 1, 4, 9, "success"), job(1, 0, 3, -1, ""), job(3, 2, -1, -1, "")}
	events := []agent.Event{
		{Kind: agent.EventCreated, Pod: "a", At: at(1.5)}, {Kind: agent.EventRunning, Pod: "a", At: at(2.5)},
		{Kind: agent.EventJobStarted, Pod: "a", Job: 1, At: at(3)},
		{Kind: agent.EventCreated, Pod: "b", At: at(2)}, {Kind: agent.EventRunning, Pod: "b", At: at(3.5)},
		{Kind: agent.EventJobStarted, Pod: "b", Job: 2, At: at(4)},
		{Kind: agent.EventCreated, Pod: "c", At: at(2.5)}, // never took a job
	}
	f := func(x float64) *float64 { return &x }
	want := []JobTimes{
		{ID: 1, Queued: 0, Pod: f(1.5), Running: f(2.5), Started: f(3)},
		{ID: 2, Queued: 1, Pod: f(2), Running: f(3.5), Started: f(4), Done: f(9)},
		{ID: 3, Queued: 2},
	}
	if diff := cmp.Diff(want, jobTimes(jobs, events, t0)); diff != "" {
		t.Errorf("job times (-want +got):\n%s", diff)
	}
}

func TestFloorPodHasGantrysShape(t *testing.T) {
	pool := newPool(Scenarios["burst"], "http://127.0.0.1:1", poolName)
	pod := floorPod(pool, "floor-7")
	c := pod.Spec.Containers[0]
	got := []string{
		pod.Name, pod.Namespace, pod.Labels["app.kubernetes.io/managed-by"], string(pod.Spec.RestartPolicy),
		fmt.Sprint(*pod.Spec.SecurityContext.RunAsUser), fmt.Sprint(*c.SecurityContext.AllowPrivilegeEscalation),
		c.Env[0].Name, c.Env[0].ValueFrom.SecretKeyRef.Name, c.Env[0].ValueFrom.SecretKeyRef.Key,
	}
	want := []string{"floor-7", "ci", "gantry", "Never", "1001", "false", "ACTIONS_RUNNER_INPUT_JITCONFIG", "floor-7", "jitconfig"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("floor pod (-want +got):\n%s", diff)
	}
	if len(pool.Spec.Template.Spec.Containers[0].Env) != 0 {
		t.Error("floorPod changed the pool's template")
	}
}

func TestJobFeed(t *testing.T) {
	f := newJobFeed()
	ctx := t.Context()
	got := make(chan int64, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			j, ok := f.next(ctx)
			if !ok {
				return
			}
			got <- j.id
		}
	}()
	for i := range int64(5) {
		f.add(queuedJob{id: i})
	}
	f.close()
	f.add(queuedJob{id: 99}) // after close: dropped
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not finish after the feed closed")
	}
	close(got)
	var ids []int64
	for id := range got {
		ids = append(ids, id)
	}
	if diff := cmp.Diff([]int64{0, 1, 2, 3, 4}, ids); diff != "" {
		t.Errorf("jobs taken (-want +got):\n%s", diff)
	}
}

func TestAuditCounts(t *testing.T) {
	lines := []string{
		`{"verb":"create","requestURI":"/api/v1/namespaces/ci/pods","stageTimestamp":"2026-03-10T12:00:01Z","objectRef":{"resource":"pods","namespace":"ci"}}`,
		`{"verb":"create","requestURI":"/api/v1/namespaces/ci/secrets","stageTimestamp":"2026-03-10T12:00:01Z","objectRef":{"resource":"secrets","namespace":"ci"}}`,
		`{"verb":"get","requestURI":"/api/v1/namespaces/ci/secrets/x","stageTimestamp":"2026-03-10T12:00:01Z","objectRef":{"resource":"secrets","namespace":"ci","name":"x"}}`,
		`{"verb":"list","requestURI":"/api/v1/namespaces/ci/pods","stageTimestamp":"2026-03-10T12:00:01Z","objectRef":{"resource":"pods","namespace":"ci"}}`,
		`{"verb":"watch","requestURI":"/api/v1/namespaces/ci/pods?watch=true","stageTimestamp":"2026-03-10T12:00:01Z","objectRef":{"resource":"pods","namespace":"ci"}}`,
		`{"verb":"get","requestURI":"/apis","stageTimestamp":"2026-03-10T12:00:00Z"}`,
		`{"verb":"delete","requestURI":"/api/v1/namespaces/ci/pods/x","stageTimestamp":"2026-03-10T12:00:02Z","objectRef":{"resource":"pods","namespace":"ci","name":"x"}}`,
		// The garbage collector's deletes in the run's namespace are the controller's
		// cost; elsewhere (kube-system's leases, say) they are not.
		`{"user":{"username":"system:serviceaccount:kube-system:generic-garbage-collector"},"verb":"delete","requestURI":"/api/v1/namespaces/ci/pods/y","stageTimestamp":"2026-03-10T12:00:03Z","objectRef":{"resource":"pods","namespace":"ci","name":"y"}}`,
		`{"user":{"username":"system:serviceaccount:kube-system:generic-garbage-collector"},"verb":"delete","requestURI":"/api/v1/namespaces/ci/secrets/y","stageTimestamp":"2026-03-10T12:00:03Z","objectRef":{"resource":"secrets","namespace":"ci","name":"y"}}`,
		`{"user":{"username":"system:serviceaccount:kube-system:generic-garbage-collector"},"verb":"delete","requestURI":"/api/v1/namespaces/ci/secrets/z","stageTimestamp":"2026-03-10T12:00:03Z","objectRef":{"resource":"secrets","namespace":"ci","name":"z"}}`,
		`{"user":{"username":"system:serviceaccount:kube-system:generic-garbage-collector"},"verb":"delete","requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n","stageTimestamp":"2026-03-10T12:00:03Z","objectRef":{"resource":"leases","namespace":"kube-node-lease","name":"n"}}`,
	}
	// Pool status: 12 patches of ci/linux within 4 s, then one more at 20 s.
	for i := range 12 {
		lines = append(lines, fmt.Sprintf(`{"verb":"patch","requestURI":"/x","stageTimestamp":"2026-03-10T12:00:%02d.%dZ","objectRef":{"resource":"runnerpools","subresource":"status","namespace":"ci","name":"linux"}}`, 1+i/3, i%3))
	}
	lines = append(lines, `{"verb":"patch","requestURI":"/x","stageTimestamp":"2026-03-10T12:00:20Z","objectRef":{"resource":"runnerpools","subresource":"status","namespace":"ci","name":"linux"}}`)
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := readAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	got := a.kubeAPI(2, 1, t0, at(26))
	want := &KubeAPI{
		Requests: map[string]int64{
			"create pods": 1, "create secrets": 1, "get secrets": 1, "list pods": 1, "watch pods": 1, "get /apis": 1,
			"delete pods": 1, "patch runnerpools/status": 13,
		},
		WritesPerJob:              8, // 2 creates, a delete, 13 status patches for 2 jobs
		CollectorDeletes:          map[string]int64{"delete pods": 1, "delete secrets": 2},
		CollectorDeletesPerJob:    1.5,
		AllWritesPerJob:           9.5,
		UncachedReadsPerJob:       1,  // a get and a list, not the watch nor discovery
		PoolStatusWrites:          13, // 13 in 26 s
		PoolStatusWritesPerSecond: 0.5,
		PoolStatusWritesPeak:      1.2, // 12 in the busiest 10 s
		WorkloadWritesPerJob:      9.5, // every write is from the workload's start on
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit counts (-want +got):\n%s", diff)
	}
	// With the workload from 2 s on, what came before is start-up: 2 creates and 3 status
	// patches; after it, 9 patches, a delete and the collector's 3 deletes, 14 for 2 jobs.
	if got := a.kubeAPI(2, 1, at(2), at(26)); got.StartupWrites != 5 || got.WorkloadWritesPerJob != 7 {
		t.Errorf("from 2 s on: start-up writes %d, workload writes per job %v; want 5 and 7", got.StartupWrites, got.WorkloadWritesPerJob)
	}
	// The peak counts the writes while jobs ran: from 2 s on, 9 in the busiest 10 s.
	if got := a.kubeAPI(2, 1, at(2), at(26)).PoolStatusWritesPeak; got != 0.9 {
		t.Errorf("pool status writes peak from 2 s on: %v, want 0.9", got)
	}
	// The mean is per pool of the scenario, those that wrote no status included.
	if got := a.kubeAPI(2, 2, t0, at(26)).PoolStatusWritesPerSecond; got != 0.25 {
		t.Errorf("pool status writes per second per pool, of 2 pools one of which wrote: %v, want 0.25", got)
	}
	if _, err := readAudit(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing audit log reads")
	}
	// Split at 10 s (a fleet's single-pool burst's start): the last status patch, at
	// 20 s, is after it; everything else is before, in both the counts and the writes;
	// so is a watch opened before 10 s and ended after it.
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"+
		`{"verb":"watch","requestURI":"/api/v1/nodes?watch=true","requestReceivedTimestamp":"2026-03-10T12:00:05Z","stageTimestamp":"2026-03-10T12:00:30Z","objectRef":{"resource":"nodes"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, after, err := readAuditSplit(path, at(10))
	if err != nil {
		t.Fatal(err)
	}
	wantBefore := maps.Clone(want.Requests)
	wantBefore["patch runnerpools/status"] = 12
	wantBefore["watch nodes"] = 1
	got2 := []map[string]int64{before.requests, after.requests, {"before": int64(len(before.writes)), "after": int64(len(after.writes))}}
	want2 := []map[string]int64{wantBefore, {"patch runnerpools/status": 1}, {"before": 19, "after": 1}} // 2 creates, a delete, 12 patches, the collector's 4 deletes (a lease's too)
	if diff := cmp.Diff(want2, got2); diff != "" {
		t.Errorf("the audit log split at 10 s: requests before, after, writes (-want +got):\n%s", diff)
	}
}

func TestPeakRate(t *testing.T) {
	ts := func(secs ...float64) []time.Time {
		var out []time.Time
		for _, s := range secs {
			out = append(out, at(s))
		}
		return out
	}
	tests := []struct {
		name string
		ts   []time.Time
		want float64
	}{
		{"none", nil, 0},
		{"one", ts(5), 0.1},
		{"window is half-open", ts(0, 10, 20), 0.1},
		{"unsorted", ts(30, 1, 2, 3, 29.5, 2.5), 0.4},
	}
	for _, tc := range tests {
		if got := peakRate(tc.ts, 10*time.Second); got != tc.want {
			t.Errorf("%s: peakRate = %v, want %v", tc.name, got, tc.want)
		}
	}
}
