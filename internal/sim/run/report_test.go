package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func atp(s float64) *time.Time { v := at(s); return &v }

// job is a simulator job queued at q, started at st (<0: never), completed at c (<0:
// never) with conclusion.
func job(id int64, q, st, c float64, conclusion string, timeline ...simgithub.TimelineEvent) simgithub.Job {
	j := simgithub.Job{ID: id, QueuedAt: at(q), Status: simgithub.StatusQueued, Timeline: timeline}
	if st >= 0 {
		j.StartedAt, j.Status = atp(st), simgithub.StatusInProgress
	}
	if c >= 0 {
		j.DoneAt, j.Status, j.Conclusion = atp(c), simgithub.StatusCompleted, conclusion
	}
	return j
}

func TestBuildReportCountsJobs(t *testing.T) {
	jobs := []simgithub.Job{
		job(1, 0, 2, 12, "success"),
		job(2, 0, 3, 13, "failure"), // asked to fail: not a failure of the system
		job(3, 0, 4, 14, "failure"), // asked to succeed
		job(4, 0, 5, 9, "failure", simgithub.TimelineEvent{Type: simgithub.EventRunnerLost, Time: at(8)}),
		job(5, 1, 6, -1, ""),  // started, never completed
		job(6, 1, -1, -1, ""), // never started
	}
	queued := []queuedJob{{1, "success"}, {2, "failure"}, {3, "success"}, {4, "success"}, {5, "success"}, {6, "success"}}
	r := buildReport(Scenario{Name: "t"}, reportInputs{start: t0, jobs: jobs, queued: queued})
	got := map[string]int{
		"total": r.JobsTotal, "never picked up": r.JobsNeverPickedUp, "unfinished": r.JobsUnfinished, "failed": r.JobsFailed,
	}
	want := map[string]int{"total": 6, "never picked up": 1, "unfinished": 1, "failed": 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job counts (-want +got):\n%s", diff)
	}
	if r.PickupSeconds.Max != 5 || r.PickupSeconds.P50 != 4 {
		t.Errorf("pickup %+v: want p50 4 (of 2,3,4,5,5), max 5", r.PickupSeconds)
	}
	if r.Clean() {
		t.Error("a report with a job never picked up is clean")
	}
}

func TestBusyRunnerKillDetection(t *testing.T) {
	ev := func(kind, pod, node, cause string, s float64, job int64) agent.Event {
		return agent.Event{Kind: kind, Pod: pod, Node: node, Cause: cause, At: at(s), Job: job}
	}
	events := []agent.Event{
		// Killed mid-job because its pod was deleted (by anyone): counted.
		ev(agent.EventRunning, "a", "n1", "", 1, 0), ev(agent.EventJobStarted, "a", "n1", "", 2, 11),
		ev(agent.EventKilled, "a", "n1", agent.CausePodDeleted, 5, 11),
		// Killed while idle (a retired runner): not a busy runner.
		ev(agent.EventRunning, "b", "n1", "", 1, 0), ev(agent.EventKilled, "b", "n1", agent.CausePodDeleted, 3, 0),
		// Killed mid-job by the node the schedule lost: the fault's.
		ev(agent.EventRunning, "c", "n2", "", 1, 0), ev(agent.EventKilled, "c", "n2", agent.CauseNodeLost, 10, 12),
		// Its pod deleted after its node was lost: the fault's too.
		ev(agent.EventRunning, "d", "n2", "", 1, 0), ev(agent.EventKilled, "d", "n2", agent.CausePodDeleted, 11, 13),
		// A pod on that node deleted mid-job before the loss: counted.
		ev(agent.EventRunning, "e", "n2", "", 1, 0), ev(agent.EventKilled, "e", "n2", agent.CausePodDeleted, 9, 14),
		// Stopped with the run: not counted.
		ev(agent.EventRunning, "f", "n1", "", 1, 0), ev(agent.EventKilled, "f", "n1", agent.CauseStopped, 30, 15),
		// Finished its job: nothing.
		ev(agent.EventRunning, "g", "n1", "", 1, 0), ev(agent.EventJobStarted, "g", "n1", "", 2, 16),
		ev(agent.EventJobCompleted, "g", "n1", "", 4, 16), ev(agent.EventExited, "g", "n1", "", 4, 0),
	}
	inj := []fault.Injection{{Kind: fault.KindNodeLost, Node: "n2", Injected: true, StartSeconds: 10, EndSeconds: 10}}
	r := buildReport(Scenario{Name: "t", Faults: &fault.Schedule{}}, reportInputs{start: t0, events: events, injections: inj})
	if r.BusyRunnersKilled != 2 {
		t.Errorf("busy runners killed = %d, want 2 (a, e): %+v", r.BusyRunnersKilled, r.BusyRunnerKills)
	}
	if r.Faults == nil || r.Faults.BusyRunnersLostWithNode != 2 || r.Faults.BusyRunnersKilled != 2 {
		t.Errorf("faults %+v: want 2 busy runners lost with their node (c, d), 2 killed", r.Faults)
	}
	var pods []string
	for _, k := range r.BusyRunnerKills {
		pods = append(pods, k.Pod)
	}
	if diff := cmp.Diff([]string{"a", "c", "d", "e"}, pods); diff != "" {
		t.Errorf("busy runner kills listed (-want +got):\n%s", diff)
	}
	// Idle time: from running to the job (a: 1s, g: 1s), to the kill (b: 2s, c: 9s,
	// d: 10s, e: 8s, f: 29s).
	if r.IdleRunnerSeconds != 60 {
		t.Errorf("idle runner-seconds = %v, want 60", r.IdleRunnerSeconds)
	}
}

func TestRecovery(t *testing.T) {
	jobs := []simgithub.Job{
		job(1, 5, 6, 10, "success"),
		job(2, 9, 14, 20, "success"),  // queued during the fault, picked up 4 s after its end
		job(3, 12, 30, 40, "success"), // queued after the end: not the fault's backlog
	}
	events := []agent.Event{{Kind: agent.EventDeleted, Pod: "p", Node: "n", At: at(25)}, {Kind: agent.EventDeleted, Pod: "q", Node: "m", At: at(50)}}
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name string
		inj  fault.Injection
		jobs []simgithub.Job
		left map[string]int
		want *float64
	}{
		{"backlog picked up", fault.Injection{Kind: fault.KindWebhookDrop, Injected: true, StartSeconds: 0, EndSeconds: 10}, jobs, nil, f(4)},
		{"nothing waiting", fault.Injection{Kind: fault.KindAPIErrors, Injected: true, StartSeconds: 0, EndSeconds: 8}, jobs[:1], nil, f(0)},
		{"a job never picked up", fault.Injection{Kind: fault.KindWebhookDrop, Injected: true, EndSeconds: 10},
			[]simgithub.Job{job(9, 9, -1, -1, "")}, nil, nil},
		{"node: until its last pod is gone", fault.Injection{Kind: fault.KindNodeLost, Node: "n", Injected: true, StartSeconds: 10, EndSeconds: 10}, jobs, nil, f(15)},
		{"node: pods left on it", fault.Injection{Kind: fault.KindNodeLost, Node: "n", Injected: true, EndSeconds: 10}, jobs, map[string]int{"n": 1}, nil},
		{"never injected", fault.Injection{Kind: fault.KindWebhookDrop, EndSeconds: 10}, jobs, nil, nil},
	}
	for _, tc := range tests {
		got := recovery(tc.inj, t0, tc.jobs, events, tc.left)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: recovery (-want +got):\n%s", tc.name, diff)
		}
	}
}

// report.json has every field the issue asks for, under its documented name.
func TestReportJSONFields(t *testing.T) {
	sc := Scenario{Name: "faults", Faults: &fault.Schedule{Steps: []fault.Step{{At: 0, For: sec(1), WebhookDrop: &fault.WebhookDrop{Rate: 0.5}}}}}
	r := buildReport(sc, reportInputs{start: t0,
		jobs:       []simgithub.Job{job(1, 0, 1, 2, "success")},
		injections: []fault.Injection{{Step: 0, Name: "drop", Kind: fault.KindWebhookDrop, Injected: true, EndSeconds: 1, WebhooksDropped: 3}},
		controller: Controller{CPUSeconds: 1.5, PeakRSSBytes: 64 << 20, Processes: 2},
		drained:    true, finished: true, lastJobDone: at(2), drainedAt: at(3),
	})
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
	for _, k := range []string{"scenario", "jobs_total", "jobs_never_picked_up", "pickup_seconds", "reaction_seconds",
		"drain_seconds", "runners_created", "idle_runner_seconds", "rest_calls_per_job", "leftover", "busy_runners_killed",
		"controller", "faults", "host", "jobs_failed", "jobs_unfinished",
		"demand_source", "actions_service_calls_per_job", "github_calls_per_job", "actions_service_calls_by_endpoint"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report.json lacks %q", k)
		}
	}
	for obj, keys := range map[string][]string{
		"pickup_seconds":   {"p50", "p95", "p99", "max"},
		"reaction_seconds": {"p50", "p95", "p99", "max"},
		"leftover":         {"runners", "pods", "secrets", "github_runners"},
		"controller":       {"cpu_seconds", "peak_rss_bytes", "processes"},
		"faults":           {"injections", "jobs_lost", "leftover", "busy_runners_killed", "recovery_seconds"},
	} {
		sub, _ := m[obj].(map[string]any)
		for _, k := range keys {
			if _, ok := sub[k]; !ok {
				t.Errorf("report.json %s lacks %q", obj, k)
			}
		}
	}
	if got := m["demand_source"]; got != "Webhook" {
		t.Errorf("demand_source = %v, want Webhook (the default)", got)
	}
	if got := m["drain_seconds"]; got != 1.0 {
		t.Errorf("drain_seconds = %v, want 1", got)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Faults</h2>", "drop", "recovered after"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q:\n%s", want, string(html))
		}
	}
	if strings.Contains(string(html), "0xc") {
		t.Error("report.html prints a pointer")
	}
}

// GitHub calls are counted per API: REST, the Actions service, and both.
func TestReportCountsGitHubCallsPerAPI(t *testing.T) {
	calls := map[string]simgithub.CallCount{
		"POST /orgs/{org}/actions/runners/registration-token":              {Total: 2},
		"GET /repos/{owner}/{repo}/actions/runs":                           {Total: 3},
		"unmatched":                                                        {Total: 1},
		"POST /actions/runner-registration":                                {Total: 2},
		"POST /_apis/runtime/runnerscalesets/{id}/generatejitconfig":       {Total: 10},
		"GET /_apis/runtime/runnerscalesets/{id}/messages":                 {Total: 4},
		"DELETE /_apis/runtime/runnerscalesets/{id}/messages/{message_id}": {Total: 3},
		"POST /_apis/runtime/runnerscalesets/{id}/acquirejobs":             {Total: 1},
	}
	var jobs []simgithub.Job
	for i := range 10 {
		jobs = append(jobs, job(int64(i+1), 0, 1, 2, "success"))
	}
	r := buildReport(Scenarios["burst-scaleset"], reportInputs{start: t0, jobs: jobs, calls: calls})
	got := map[string]float64{"REST": r.RESTCallsPerJob, "service": r.ActionsServiceCallsPerJob, "GitHub": r.GitHubCallsPerJob}
	want := map[string]float64{"REST": 0.6, "service": 2, "GitHub": 2.6}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls per job (-want +got):\n%s", diff)
	}
	wantREST := map[string]int64{"POST /orgs/{org}/actions/runners/registration-token": 2, "GET /repos/{owner}/{repo}/actions/runs": 3, "unmatched": 1}
	if diff := cmp.Diff(wantREST, r.RESTCallsByRoute); diff != "" {
		t.Errorf("REST calls by endpoint (-want +got):\n%s", diff)
	}
	if len(r.ActionsServiceCallsByRoute) != 5 || r.ActionsServiceCallsByRoute["POST /actions/runner-registration"] != 2 {
		t.Errorf("Actions service calls by endpoint: %v", r.ActionsServiceCallsByRoute)
	}
	if r.DemandSource != "ScaleSet" || !strings.Contains(r.Summary(), "demand: ScaleSet") ||
		!strings.Contains(r.Summary(), "GitHub calls per job 2.60 (REST 0.60, Actions service 2.00)") {
		t.Errorf("demand source %q; summary:\n%s", r.DemandSource, r.Summary())
	}
	var html strings.Builder
	if err := r.writeHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Demand source: <strong>ScaleSet</strong>", "a runner scale set",
		"<th>GitHub calls per job</th><td>2.6 ", "<th>Actions service calls per job</th><td>2</td>", "<th>GitHub REST calls per job</th><td>0.6</td>",
		"<h2>Actions service calls by endpoint</h2>", "acquirejobs",
		// Judged beside burst's report only: listed, not judged.
		"≤ 1.2× burst's in the same bench run",
	} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("report.html lacks %q:\n%s", want, html.String())
		}
	}
}

func TestBuiltInScenariosAreValid(t *testing.T) {
	for name, sc := range Scenarios {
		if err := sc.Validate(); err != nil {
			t.Errorf("scenario %s: %v", name, err)
		}
		if sc.Name != name {
			t.Errorf("scenario %s is named %q", name, sc.Name)
		}
	}
	f := Scenarios["faults"]
	kinds := map[string]bool{}
	for _, st := range f.Faults.Steps {
		kinds[st.Kind()] = true
	}
	for _, k := range []string{fault.KindWebhookDrop, fault.KindAPIErrors, fault.KindRateLimit, fault.KindControllerKill, fault.KindNodeLost} {
		if !kinds[k] {
			t.Errorf("the faults scenario has no %s step", k)
		}
	}
	if f.NodeLostTimeout == 0 || f.RunnerLostTimeout == 0 || f.FailedRunnerRetention == 0 {
		t.Error("the faults scenario must shorten nodeLostTimeout, GitHub's runner-lost timeout and the failed-runner retention")
	}
	if err := (Scenario{Name: "empty", MaxRunners: 1, Nodes: 1, Timeout: time.Minute}).Validate(); err == nil {
		t.Error("a scenario without jobs is valid")
	}
}

// Calls answered 304 are not counted against the rate limit, so not in the REST
// figures; the queued webhooks' delivery time is reported from first attempts that
// were answered 2xx.
func TestReportNotModifiedAndWebhookDelivery(t *testing.T) {
	calls := map[string]simgithub.CallCount{
		"GET /repos/{owner}/{repo}/actions/runs":              {Total: 5, ByStatus: map[int]int64{200: 2, 304: 3}},
		"POST /orgs/{org}/actions/runners/generate-jitconfig": {Total: 2, ByStatus: map[int]int64{201: 2}},
	}
	delivery := func(action string, redelivery bool, code int, took time.Duration) simgithub.Delivery {
		return simgithub.Delivery{Event: "workflow_job", Action: action, Redelivery: redelivery, Done: true, StatusCode: code,
			CreatedAt: t0, DeliveredAt: t0.Add(took)}
	}
	deliveries := []simgithub.Delivery{
		delivery("queued", false, 202, 100*time.Millisecond),
		delivery("queued", false, 202, 300*time.Millisecond),
		delivery("queued", false, 0, time.Second),        // dropped: not delivered
		delivery("queued", true, 202, time.Minute),       // a redelivery: GitHub did not time it
		delivery("in_progress", false, 202, time.Minute), // not a queued event
	}
	jobs := []simgithub.Job{job(1, 0, 1, 2, "success"), job(2, 0, 1, 2, "success")}
	r := buildReport(Scenarios["steady"], reportInputs{start: t0, jobs: jobs, calls: calls, deliveries: deliveries})
	if r.RESTCallsPerJob != 2 || r.RESTNotModified != 3 || r.RESTCallsByRoute["GET /repos/{owner}/{repo}/actions/runs"] != 2 {
		t.Errorf("REST calls per job %v, not modified %d, runs listings counted %d; want 2, 3, 2",
			r.RESTCallsPerJob, r.RESTNotModified, r.RESTCallsByRoute["GET /repos/{owner}/{repo}/actions/runs"])
	}
	if r.WebhookDelivery == nil || r.WebhookDelivery.P50 != 0.1 || r.WebhookDelivery.Max != 0.3 {
		t.Fatalf("webhook delivery = %+v, want p50 0.1 s and max 0.3 s over the two delivered first attempts", r.WebhookDelivery)
	}
	if !strings.Contains(r.Summary(), "queued webhook delivered") {
		t.Errorf("summary lacks the webhook delivery line:\n%s", r.Summary())
	}
	if r := buildReport(Scenarios["steady"], reportInputs{start: t0, jobs: jobs}); r.WebhookDelivery != nil {
		t.Errorf("webhook delivery without deliveries = %+v, want none", r.WebhookDelivery)
	}
}
