package github

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// runnerSpec is a runner of an assignment scenario.
type runnerSpec struct {
	scope   string // as in JITSpec.Scope
	name    string
	labels  []string
	group   string // runner group name in the scope ("" = Default)
	offline bool
}

func TestAssignment(t *testing.T) {
	tests := []struct {
		name    string
		runners []runnerSpec
		job     JobSpec
		failSw  bool
		// wantRunner is the name of the runner that gets the job ("" = none).
		wantRunner     string
		wantStatus     string
		wantConclusion string
	}{
		{
			name:       "labels match case-insensitively",
			runners:    []runnerSpec{{scope: "acme", name: "a", labels: []string{"Self-Hosted", "Linux", "GPU"}}},
			job:        JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux", "gpu"}},
			wantRunner: "a", wantStatus: StatusQueued,
		},
		{
			// GitHub adds no default labels to a JIT runner: it has only those it asked for.
			name:       "a JIT runner has no self-hosted, OS or architecture label it did not ask for",
			runners:    []runnerSpec{{scope: "acme", name: "a", labels: []string{"gpu"}}},
			job:        JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux", "x64", "gpu"}},
			wantStatus: StatusQueued,
		},
		{
			name:       "job waits for a label no runner has",
			runners:    []runnerSpec{{scope: "acme", name: "a", labels: []string{"gpu"}}},
			job:        JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "arm64"}},
			wantStatus: StatusQueued,
		},
		{
			name:    "lowest runner ID among matching idle runners",
			runners: []runnerSpec{{scope: "acme", name: "a", labels: []string{"x"}}, {scope: "acme", name: "b", labels: []string{"x"}}},
			job:     JobSpec{Repo: "acme/app", Labels: []string{"x"}}, wantRunner: "a", wantStatus: StatusQueued,
		},
		{
			name:    "offline runners get no job",
			runners: []runnerSpec{{scope: "acme", name: "a", labels: []string{"x"}, offline: true}},
			job:     JobSpec{Repo: "acme/app", Labels: []string{"x"}}, wantStatus: StatusQueued,
		},
		{
			name:    "runner group visible to the repository",
			runners: []runnerSpec{{scope: "acme", name: "a", labels: []string{"x"}, group: "app-only"}},
			job:     JobSpec{Repo: "acme/app", Labels: []string{"x"}}, wantRunner: "a", wantStatus: StatusQueued,
		},
		{
			name:    "runner group not visible to the repository",
			runners: []runnerSpec{{scope: "acme", name: "a", labels: []string{"x"}, group: "app-only"}},
			job:     JobSpec{Repo: "acme/lib", Labels: []string{"x"}}, wantStatus: StatusQueued,
		},
		{
			name:    "repository runners serve only their repository",
			runners: []runnerSpec{{scope: "acme/lib", name: "a", labels: []string{"x"}}},
			job:     JobSpec{Repo: "acme/app", Labels: []string{"x"}}, wantStatus: StatusQueued,
		},
		{
			name:    "enterprise runners serve the enterprise's organizations",
			runners: []runnerSpec{{scope: "enterprises/ent", name: "a", labels: []string{"x"}}},
			job:     JobSpec{Repo: "acme/app", Labels: []string{"x"}}, wantRunner: "a", wantStatus: StatusQueued,
		},
		{
			name:    "enterprise runners do not serve other organizations",
			runners: []runnerSpec{{scope: "enterprises/ent", name: "a", labels: []string{"x"}}},
			job:     JobSpec{Repo: "other/site", Labels: []string{"x"}}, wantStatus: StatusQueued,
		},
		{
			name:    "switch fails a job no runner could take",
			runners: []runnerSpec{{scope: "acme", name: "a", labels: []string{"x"}}},
			job:     JobSpec{Repo: "acme/app", Labels: []string{"y"}}, failSw: true,
			wantStatus: StatusCompleted, wantConclusion: ConclusionFailure,
		},
		{
			name:    "switch keeps a job an offline runner could take",
			runners: []runnerSpec{{scope: "acme", name: "a", labels: []string{"x"}, offline: true}},
			job:     JobSpec{Repo: "acme/app", Labels: []string{"x"}}, failSw: true, wantStatus: StatusQueued,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOpts{opts: Options{FailJobsWithoutRunner: tc.failSw}})
			must(w.sim.CreateRunnerGroup(RunnerGroupSpec{Org: "acme", Name: "app-only", Visibility: "selected", Repositories: []string{"app"}}))
			names := map[int64]string{}
			for _, rs := range tc.runners {
				cfg := w.addRunner(t, rs)
				names[cfg.RunnerID] = rs.name
			}
			j := must(w.sim.QueueJob(tc.job))
			got, _ := w.sim.Job(j.ID)
			if diff := cmp.Diff([]string{tc.wantRunner, tc.wantStatus, tc.wantConclusion}, []string{names[got.RunnerID], got.Status, got.Conclusion}); diff != "" {
				t.Errorf("runner, status, conclusion (-want +got):\n%s", diff)
			}
		})
	}
}

// addRunner registers a JIT runner and, unless offline, brings it online.
func (w *world) addRunner(t *testing.T, rs runnerSpec) runnerapi.Config {
	t.Helper()
	group := int64(1)
	if rs.group != "" || rs.scope == "enterprises/ent" {
		w.sim.lock()
		sc, _ := w.sim.st.resolveSpec(rs.scope)
		for _, g := range sc.groups() {
			if g.name == rs.group || (rs.group == "" && g.isDefault) {
				group = g.id
			}
		}
		w.sim.unlock()
	}
	cfg := must(w.sim.GenerateJITConfig(JITSpec{Scope: rs.scope, Name: rs.name, Labels: rs.labels, GroupID: group}))
	cfg.URL = w.srv.URL
	if !rs.offline {
		if _, err := runnerapi.NewClient(cfg, nil).Connect(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

func TestIdleRunnerTakesOldestWaitingJob(t *testing.T) {
	w := newWorld(t, worldOpts{})
	first := must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"x"}}))
	must(w.sim.QueueJob(JobSpec{Repo: "acme/lib", Labels: []string{"x", "y"}}))
	cfg := w.addRunner(t, runnerSpec{scope: "acme", name: "a", labels: []string{"x", "y"}})
	c := runnerapi.NewClient(cfg, nil)
	j, err := c.NextJob(t.Context(), 0)
	if err != nil || j == nil || j.ID != first.ID {
		t.Fatalf("NextJob = %+v, %v; want job %d", j, err, first.ID)
	}
	// Going offline before starting puts the job back; another runner gets it.
	if err := c.Disconnect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.sim.Job(first.ID); got.RunnerID != 0 {
		t.Fatalf("job still assigned to %d after its runner went offline", got.RunnerID)
	}
	cfg2 := w.addRunner(t, runnerSpec{scope: "acme", name: "b", labels: []string{"x"}})
	if got, _ := w.sim.Job(first.ID); got.RunnerID != cfg2.RunnerID {
		t.Errorf("job runner = %d, want %d", got.RunnerID, cfg2.RunnerID)
	}
}

func TestLongPollWakesOnAssignment(t *testing.T) {
	w := newWorld(t, worldOpts{})
	cfg := w.addRunner(t, runnerSpec{scope: "acme", name: "a", labels: []string{"x"}})
	c := runnerapi.NewClient(cfg, nil)
	got := make(chan *runnerapi.Job, 1)
	go func() {
		j, err := c.NextJob(context.Background(), time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	job := must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"x"}, Duration: Duration(time.Second)}))
	select {
	case j := <-got:
		if j == nil || j.ID != job.ID || j.Duration() != time.Second {
			t.Errorf("long poll got %+v, want job %d lasting 1s", j, job.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll did not wake")
	}
	// With nothing assigned the poll ends with 204 when the (fake) clock passes the wait.
	if err := c.StartJob(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.CompleteJob(t.Context(), job.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NextJob(t.Context(), 0); err == nil {
		t.Error("ephemeral runner still polls after its job")
	}
}

func TestWebhooks(t *testing.T) {
	w := newWorld(t, worldOpts{})
	hooks := newHookRecorder(t)
	_, _, pub := appKey(t)
	app := must(w.sim.CreateApp(AppSpec{Slug: "hooked", Owner: "acme", PublicKeyPEM: pub, WebhookURL: hooks.srv.URL, WebhookSecret: "app-secret"}))
	inst := must(w.sim.CreateInstallation(InstallationSpec{AppID: app.ID, Org: "acme"}))
	must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"x"}}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.sim.FlushWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	got := hooks.received()
	if len(got) != 1 {
		t.Fatalf("got %d deliveries, want 1", len(got))
	}
	h := got[0]
	if !VerifySignature("app-secret", h.body, h.header.Get("X-Hub-Signature-256")) {
		t.Error("X-Hub-Signature-256 does not verify")
	}
	var ev struct {
		Action       string
		WorkflowJob  map[string]any `json:"workflow_job"`
		Installation struct{ ID int64 }
		Enterprise   struct{ Slug string }
	}
	decodeJSON(t, h.body, &ev)
	wantNull := map[string]any{"runner_id": nil, "runner_name": nil, "runner_group_id": nil, "runner_group_name": nil}
	gotNull := map[string]any{}
	for k := range wantNull {
		gotNull[k] = ev.WorkflowJob[k]
	}
	if diff := cmp.Diff(wantNull, gotNull); diff != "" {
		t.Errorf("runner fields while queued (-want +got):\n%s", diff)
	}
	if ev.Action != "queued" || ev.Installation.ID != inst.ID || ev.Enterprise.Slug != "ent" {
		t.Errorf("event = %+v", ev)
	}

	// The delivery log shows it; a redelivery sends it again with the same GUID.
	auth := "Bearer " + must(signJWT(w.key, app.ID, w.now()))
	resp := w.do(t, "GET", "/app/hook/deliveries", auth, "")
	var log []struct {
		ID         int64
		GUID       string
		StatusCode int `json:"status_code"`
		Redelivery bool
	}
	decodeJSON(t, resp.body, &log)
	if len(log) != 1 || log[0].StatusCode != 200 || log[0].GUID != h.header.Get("X-GitHub-Delivery") {
		t.Fatalf("delivery log = %+v", log)
	}
	hooks.mu.Lock()
	hooks.status = http.StatusInternalServerError
	hooks.mu.Unlock()
	if resp := w.do(t, "POST", "/app/hook/deliveries/"+itoa(log[0].ID)+"/attempts", auth, ""); resp.code != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", resp.code, resp.body)
	}
	if err := w.sim.FlushWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, w.do(t, "GET", "/app/hook/deliveries", auth, "").body, &log)
	if len(log) != 2 || !log[0].Redelivery || log[0].StatusCode != 500 || log[0].GUID != log[1].GUID {
		t.Errorf("delivery log after redelivery = %+v", log)
	}
}

func TestWebhookFaults(t *testing.T) {
	w := newWorld(t, worldOpts{})
	hooks := newHookRecorder(t)
	must(w.sim.CreateHook(HookSpec{Org: "acme", URL: hooks.srv.URL, Secret: "s"}))
	w.sim.SetFaults(Faults{Seed: 1, Webhooks: WebhookFaults{DropRate: 1}})
	must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"x"}}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.sim.FlushWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(hooks.received()); n != 0 {
		t.Errorf("a dropped delivery arrived (%d)", n)
	}
	ds := w.sim.Deliveries()
	if len(ds) != 1 || !ds[0].Done || ds[0].StatusCode != 0 {
		t.Fatalf("deliveries = %+v, want one failed", ds)
	}

	// A delay holds deliveries back on the simulator's clock.
	w.sim.SetFaults(Faults{Seed: 1, Webhooks: WebhookFaults{DelayRate: 1, Delay: Duration(time.Minute)}})
	must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"x"}}))
	short, cancelShort := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancelShort()
	if err := w.sim.FlushWebhooks(short); err == nil {
		t.Fatal("delayed delivery was flushed before the clock moved")
	}
	waitFor(t, func() bool { return w.clk.HasWaiters() })
	w.clk.Step(time.Minute)
	if err := w.sim.FlushWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(hooks.received()); n != 1 {
		t.Errorf("got %d deliveries after the delay, want 1", n)
	}
}

func TestAdminAPI(t *testing.T) {
	w := newWorld(t, worldOpts{})
	steps := []struct {
		method, path, body string
		wantCode           int
	}{
		{"POST", "/_sim/orgs", `{"login":"newco"}`, 201},
		{"POST", "/_sim/orgs", `{"login":"newco"}`, 409},
		{"POST", "/_sim/repos", `{"owner":"newco","name":"web"}`, 201},
		{"POST", "/_sim/repos", `{"owner":"ghost","name":"web"}`, 404},
		{"POST", "/_sim/pats", `{"token":"ghp_x","login":"u","scopes":["repo"]}`, 201},
		{"POST", "/_sim/runs", `{"repo":"newco/web","matrix":3,"template":{"labels":["linux"],"duration":"1s"}}`, 201},
		{"POST", "/_sim/jobs", `{"repo":"newco/web","labels":["linux"],"duration":250}`, 201},
		{"POST", "/_sim/jit", `{"scope":"newco","name":"r1","labels":["linux"]}`, 201},
		{"PUT", "/_sim/faults", `{"seed":7,"endpoints":{"*":{"latency":"1ms"}}}`, 200},
		{"PUT", "/_sim/faults", `{"endpoints":{"*":{"latency":"soon"}}}`, 422},
		{"PUT", "/_sim/rate-limits", `{"pat":10}`, 200},
		{"PUT", "/_sim/settings", `{"fail_jobs_without_runner":true}`, 200},
		{"GET", "/_sim/state", "", 200},
		{"GET", "/_sim/jobs", "", 200},
		{"GET", "/_sim/runners", "", 200},
		{"GET", "/_sim/calls", "", 200},
		{"GET", "/_sim/routes", "", 200},
		{"DELETE", "/_sim/calls", "", 204},
	}
	for _, st := range steps {
		if resp := w.do(t, st.method, st.path, "", st.body); resp.code != st.wantCode {
			t.Errorf("%s %s: %d, want %d (%s)", st.method, st.path, resp.code, st.wantCode, resp.body)
		}
	}
	var sum Summary
	decodeJSON(t, w.do(t, "GET", "/_sim/state", "", "").body, &sum)
	// The JIT runner never came online, so all 4 jobs wait.
	if diff := cmp.Diff(Summary{Enterprises: 1, Orgs: 3, Repos: 4, Apps: 1, Installations: 1, Runners: 1,
		Jobs: map[string]int{StatusQueued: 4}}, sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	jobs := w.sim.Jobs()
	var j Job
	decodeJSON(t, w.do(t, "GET", "/_sim/jobs/"+itoa(jobs[3].ID), "", "").body, &j)
	if j.Duration != Duration(250*time.Millisecond) || len(j.Timeline) != 1 {
		t.Errorf("job = %+v", j)
	}
	raw, _ := json.Marshal(w.sim.Faults())
	if string(raw) != `{"seed":7,"endpoints":{"*":{"latency":"1ms"}},"webhooks":{}}` {
		t.Errorf("faults = %s", raw)
	}
}

// A job's container and services reach its runner as they were queued, and the
// simulator refuses a service without an image.
func TestJobContainersReachTheRunner(t *testing.T) {
	w := newWorld(t, worldOpts{})
	spec := JobSpec{Repo: "acme/app", Labels: []string{"x"}, Container: "node:22", Services: map[string]string{"db": "postgres:17", "cache": "redis:7"}}
	queued := must(w.sim.QueueJob(spec))
	if diff := cmp.Diff(spec.Services, queued.Services); diff != "" || queued.Container != spec.Container {
		t.Errorf("queued job: container %q, services (-want +got):\n%s", queued.Container, diff)
	}
	c := runnerapi.NewClient(w.addRunner(t, runnerSpec{scope: "acme", name: "a", labels: []string{"x"}}), nil)
	j, err := c.NextJob(t.Context(), 0)
	if err != nil || j == nil {
		t.Fatalf("NextJob = %+v, %v", j, err)
	}
	if diff := cmp.Diff(spec.Services, j.Services); diff != "" || j.Container != spec.Container {
		t.Errorf("the runner's job: container %q, services (-want +got):\n%s", j.Container, diff)
	}
	if _, err := w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"x"}, Services: map[string]string{"db": ""}}); err == nil {
		t.Error("a service without an image was queued")
	}
}
