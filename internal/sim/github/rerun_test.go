package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// testPATNoRepo is a classic PAT without the repo scope.
const testPATNoRepo = "ghp_testtokenwithoutreposcope0000000000"

var runnerSeq atomic.Int64

// startJob has a new runner of scope acme carrying label take the oldest waiting job of
// that label and start it; it returns the job's ID and the runner.
func (w *world) startJob(t *testing.T, label string) (int64, *runnerapi.Client) {
	t.Helper()
	cfg := w.addRunner(t, runnerSpec{scope: "acme", name: fmt.Sprintf("rerun-r%d", runnerSeq.Add(1)), labels: []string{label}})
	c := runnerapi.NewClient(cfg, nil)
	j, err := c.NextJob(t.Context(), 0)
	if err != nil || j == nil {
		t.Fatalf("no %s job for a new runner: %+v, %v", label, j, err)
	}
	if err := c.StartJob(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	return j.ID, c
}

// playJob runs the oldest waiting job of label to conclusion and returns its ID.
func (w *world) playJob(t *testing.T, label, conclusion string) int64 {
	t.Helper()
	id, c := w.startJob(t, label)
	if err := c.CompleteJob(t.Context(), id, conclusion); err != nil {
		t.Fatal(err)
	}
	return id
}

// pipeline queues a run of acme/app: lint and unit (unit is a matrix of 2) need
// nothing, build needs both, deploy needs build; each job's only label is its key (the
// matrix's, "unit").
func (w *world) pipeline(t *testing.T) Run {
	t.Helper()
	return must(w.sim.QueueRun(RunSpec{Repo: "acme/app", Jobs: []JobSpec{
		{Key: "lint", Name: "lint", Labels: []string{"lint"}},
		{Key: "unit-1", Name: "unit (1)", Labels: []string{"unit"}},
		{Key: "unit-2", Name: "unit (2)", Labels: []string{"unit"}},
		{Key: "build", Name: "build", Labels: []string{"build"}, Needs: []string{"lint", "unit-1", "unit-2"}},
		{Key: "deploy", Name: "deploy", Labels: []string{"deploy"}, Needs: []string{"build"}},
	}}))
}

// jobsOf reads a run's jobs over REST (filter as given, "" for the default).
func (w *world) jobsOf(t *testing.T, path string) []map[string]any {
	t.Helper()
	resp := w.do(t, "GET", path, "token "+testPAT, "")
	if resp.code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.code, resp.body)
	}
	var out struct {
		TotalCount int              `json:"total_count"`
		Jobs       []map[string]any `json:"jobs"`
	}
	decodeJSON(t, resp.body, &out)
	if out.TotalCount != len(out.Jobs) {
		t.Fatalf("GET %s: total_count %d, %d jobs", path, out.TotalCount, len(out.Jobs))
	}
	return out.Jobs
}

// jobLine is a job as a short line: "name attempt status/conclusion".
func jobLine(j map[string]any) string {
	concl, _ := j["conclusion"].(string)
	return fmt.Sprintf("%s #%v %s/%s", j["name"], j["run_attempt"], j["status"], concl)
}

func jobLines(jobs []map[string]any) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, jobLine(j))
	}
	return out
}

// TestRunNeedsAndRerun plays a run through GitHub's rules: jobs queued once their needs
// succeeded, skipped when one failed; a re-run of the failed jobs in a new attempt with
// new job IDs, their dependents re-run with them, the other jobs kept; each read back
// through the run, its attempts and its jobs.
func TestRunNeedsAndRerun(t *testing.T) {
	w := newWorld(t, worldOpts{})
	run := w.pipeline(t)
	if diff := cmp.Diff([]string{"build", "deploy"}, run.Waiting); diff != "" {
		t.Errorf("jobs waiting on their needs (-want +got):\n%s", diff)
	}
	if len(run.Jobs) != 3 {
		t.Fatalf("queued %d jobs at once, want lint and unit (1), (2)", len(run.Jobs))
	}
	runPath := "/repos/acme/app/actions/runs/" + itoa(run.ID)

	w.playJob(t, "lint", ConclusionSuccess)
	w.playJob(t, "unit", ConclusionSuccess)
	if got := jobLines(w.jobsOf(t, runPath+"/jobs")); len(got) != 3 {
		t.Errorf("build was queued before all its needs completed: %v", got)
	}
	failedUnit := w.playJob(t, "unit", ConclusionFailure)
	want := []string{"lint #1 completed/success", "unit (1) #1 completed/success", "unit (2) #1 completed/failure",
		"build #1 completed/skipped", "deploy #1 completed/skipped"}
	if diff := cmp.Diff(want, jobLines(w.jobsOf(t, runPath+"/jobs"))); diff != "" {
		t.Fatalf("attempt 1 (-want +got):\n%s", diff)
	}
	w.wantRun(t, runPath, 1, StatusCompleted, ConclusionFailure)

	resp := w.do(t, "POST", runPath+"/rerun-failed-jobs", "token "+testPAT, "")
	if resp.code != http.StatusCreated || string(resp.body) != "{}" {
		t.Fatalf("rerun-failed-jobs: %d %s, want 201 {}", resp.code, resp.body)
	}
	w.wantRun(t, runPath, 2, StatusQueued, "")
	attempt2 := w.jobsOf(t, runPath+"/attempts/2/jobs")
	if diff := cmp.Diff([]string{"unit (2) #2 queued/"}, jobLines(attempt2)); diff != "" {
		t.Errorf("attempt 2 before its first job completed (-want +got):\n%s", diff)
	}
	if id := int64(attempt2[0]["id"].(float64)); id == failedUnit {
		t.Errorf("the re-run job kept its ID %d, want a new one", id)
	}
	w.playJob(t, "unit", ConclusionSuccess)
	w.playJob(t, "build", ConclusionSuccess)
	w.wantRun(t, runPath, 2, StatusInProgress, "")
	w.playJob(t, "deploy", ConclusionSuccess)
	w.wantRun(t, runPath, 2, StatusCompleted, ConclusionSuccess)

	want = []string{"lint #1 completed/success", "unit (1) #1 completed/success",
		"unit (2) #2 completed/success", "build #2 completed/success", "deploy #2 completed/success"}
	if diff := cmp.Diff(want, jobLines(w.jobsOf(t, runPath+"/jobs?filter=latest"))); diff != "" {
		t.Errorf("latest executions (-want +got):\n%s", diff)
	}
	if got := len(w.jobsOf(t, runPath+"/jobs?filter=all")); got != 8 {
		t.Errorf("filter=all lists %d executions, want 5 of attempt 1 and 3 of attempt 2", got)
	}
	if got := len(w.jobsOf(t, runPath+"/attempts/1/jobs")); got != 5 {
		t.Errorf("attempt 1 lists %d jobs, want 5", got)
	}
	var a1 map[string]any
	decodeJSON(t, w.do(t, "GET", runPath+"/attempts/1", "token "+testPAT, "").body, &a1)
	if a1["run_attempt"] != 1.0 || a1["conclusion"] != ConclusionFailure || a1["previous_attempt_url"] != nil {
		t.Errorf("attempt 1: run_attempt %v, conclusion %v, previous %v; want 1, failure, null", a1["run_attempt"], a1["conclusion"], a1["previous_attempt_url"])
	}
	var latest map[string]any
	decodeJSON(t, w.do(t, "GET", runPath, "token "+testPAT, "").body, &latest)
	if p, _ := latest["previous_attempt_url"].(string); p != w.srv.URL+runPath+"/attempts/1" {
		t.Errorf("previous_attempt_url = %q, want %s", p, w.srv.URL+runPath+"/attempts/1")
	}
	var old map[string]any
	decodeJSON(t, w.do(t, "GET", "/repos/acme/app/actions/jobs/"+itoa(failedUnit), "token "+testPAT, "").body, &old)
	if old["run_attempt"] != 1.0 || old["conclusion"] != ConclusionFailure {
		t.Errorf("the failed job of attempt 1 now reads attempt %v, %v; want 1, failure", old["run_attempt"], old["conclusion"])
	}
	rv, _ := w.sim.Workflows().Run(run.ID)
	if a := rv.Attempts[1]; a.How != HowRerunFailedJobs || !slices.Equal(a.Requested, []int64{failedUnit}) || len(a.Jobs) != 3 || a.DoneAt == nil {
		t.Errorf("attempt 2 = %+v, want rerun_failed_jobs of [%d], 3 jobs, completed", a, failedUnit)
	}
}

func (w *world) wantRun(t *testing.T, path string, attempt int, status, conclusion string) {
	t.Helper()
	var got struct {
		RunAttempt int     `json:"run_attempt"`
		Status     string  `json:"status"`
		Conclusion *string `json:"conclusion"`
	}
	decodeJSON(t, w.do(t, "GET", path, "token "+testPAT, "").body, &got)
	concl := ""
	if got.Conclusion != nil {
		concl = *got.Conclusion
	}
	if got.RunAttempt != attempt || got.Status != status || concl != conclusion {
		t.Errorf("run: attempt %d %s/%s, want attempt %d %s/%s", got.RunAttempt, got.Status, concl, attempt, status, conclusion)
	}
}

// TestRerunRules: each answer of the re-run endpoints, over HTTP.
func TestRerunRules(t *testing.T) {
	type state struct {
		w    *world
		run  Run
		jobs map[string]int64 // by key, attempt 1
	}
	// completed plays the pipeline to the end: unit (2) fails, build and deploy skip.
	completed := func(t *testing.T, w *world) state {
		st := state{w: w, run: w.pipeline(t), jobs: map[string]int64{}}
		st.jobs["lint"] = w.playJob(t, "lint", ConclusionSuccess)
		st.jobs["unit-1"] = w.playJob(t, "unit", ConclusionSuccess)
		st.jobs["unit-2"] = w.playJob(t, "unit", ConclusionFailure)
		for _, j := range w.sim.Jobs() {
			if j.RunID == st.run.ID && (j.Key == "build" || j.Key == "deploy") {
				st.jobs[j.Key] = j.ID
			}
		}
		return st
	}
	running := func(t *testing.T, w *world) state {
		st := state{w: w, run: w.pipeline(t), jobs: map[string]int64{}}
		st.jobs["lint"] = w.playJob(t, "lint", ConclusionFailure)
		st.jobs["unit-1"], _ = w.startJob(t, "unit")
		return st
	}
	green := func(t *testing.T, w *world) state {
		st := state{w: w, run: must(w.sim.QueueRun(RunSpec{Repo: "acme/app", Jobs: []JobSpec{{Key: "lint", Labels: []string{"lint"}}}})), jobs: map[string]int64{}}
		st.jobs["lint"] = w.playJob(t, "lint", ConclusionSuccess)
		return st
	}
	runPath := func(st state) string { return "/repos/acme/app/actions/runs/" + itoa(st.run.ID) }
	jobPath := func(key string) func(state) string {
		return func(st state) string { return "/repos/acme/app/actions/jobs/" + itoa(st.jobs[key]) + "/rerun" }
	}
	readOnly := func(t *testing.T) *world {
		w := newWorld(t, worldOpts{})
		w.inst = must(w.sim.CreateInstallation(InstallationSpec{AppID: w.app.ID, Org: "other",
			Permissions: map[string]string{PermActions: "read", PermAdministration: "write"}}))
		return w
	}
	tests := []struct {
		name  string
		world func(t *testing.T) *world
		setup func(*testing.T, *world) state
		path  func(state) string
		auth  func(*testing.T, *world) string
		body  string
		// want: status, message, and the jobs re-run (keys) in attempt 2 (nil: no
		// attempt 2).
		wantCode    int
		wantMessage string
		wantDocs    string
		wantRerun   []string
	}{
		{name: "job of a running run", setup: running, path: jobPath("lint"),
			wantCode: 403, wantMessage: msgJobRunRunning, wantDocs: docsRerunJob},
		{name: "failed jobs of a running run", setup: running, path: func(st state) string { return runPath(st) + "/rerun-failed-jobs" },
			wantCode: 403, wantMessage: msgRunRunning, wantDocs: docsRerunFailed},
		{name: "a running run", setup: running, path: func(st state) string { return runPath(st) + "/rerun" },
			wantCode: 403, wantMessage: msgRunRunning, wantDocs: docsRerunRun},
		{name: "a job re-runs the jobs that need it", setup: completed, path: jobPath("unit-2"),
			wantCode: 201, wantRerun: []string{"unit-2"}},
		{name: "a successful job can be re-run", setup: completed, path: jobPath("lint"),
			wantCode: 201, wantRerun: []string{"lint"}},
		{name: "failed jobs", setup: completed, path: func(st state) string { return runPath(st) + "/rerun-failed-jobs" },
			body: `{"enable_debug_logging": true}`, wantCode: 201, wantRerun: []string{"unit-2"}},
		{name: "the whole run", setup: completed, path: func(st state) string { return runPath(st) + "/rerun" },
			wantCode: 201, wantRerun: []string{"lint", "unit-1", "unit-2", "build", "deploy"}},
		{name: "failed jobs of a green run", setup: green, path: func(st state) string { return runPath(st) + "/rerun-failed-jobs" },
			wantCode: 403, wantMessage: msgRunNotRetriable, wantDocs: docsRerunFailed},
		{name: "unknown job", setup: completed, path: func(state) string { return "/repos/acme/app/actions/jobs/999999999/rerun" },
			wantCode: 404, wantMessage: msgNotFound, wantDocs: docsREST},
		{name: "job of another repository", setup: completed, path: func(st state) string { return "/repos/acme/lib/actions/jobs/" + itoa(st.jobs["lint"]) + "/rerun" },
			wantCode: 404, wantMessage: msgNotFound, wantDocs: docsREST},
		{name: "unknown run", setup: completed, path: func(state) string { return "/repos/acme/app/actions/runs/999999999/rerun-failed-jobs" },
			wantCode: 404, wantMessage: msgNotFound, wantDocs: docsREST},
		{name: "a body of the wrong shape", setup: completed, path: jobPath("unit-2"), body: `{"enable_debug_logging": "yes"}`,
			wantCode: 422, wantMessage: "Invalid request.\n\nFor 'properties/enable_debug_logging', a string is not a boolean.", wantDocs: docsREST},
		{name: "installation without actions write", world: readOnly, setup: completed, path: jobPath("unit-2"),
			auth:     func(t *testing.T, w *world) string { return "token " + w.installationToken(t) },
			wantCode: 403, wantMessage: msgIntegration, wantDocs: docsREST},
		{name: "PAT without the repo scope", setup: completed, path: jobPath("unit-2"),
			auth:     func(*testing.T, *world) string { return "token " + testPATNoRepo },
			wantCode: 403, wantMessage: msgPATScope, wantDocs: docsREST},
		{name: "installation with actions write", setup: completed, path: jobPath("unit-2"),
			auth:     func(t *testing.T, w *world) string { return "token " + w.installationToken(t) },
			wantCode: 201, wantRerun: []string{"unit-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w *world
			if tc.world != nil {
				w = tc.world(t)
			} else {
				w = newWorld(t, worldOpts{opts: Options{PATs: []PAT{{Token: testPATNoRepo, Scopes: []string{"admin:org"}}}}})
			}
			st := tc.setup(t, w)
			auth := "token " + testPAT
			if tc.auth != nil {
				auth = tc.auth(t, w)
			}
			resp := w.do(t, "POST", tc.path(st), auth, tc.body)
			if resp.code != tc.wantCode {
				t.Fatalf("status %d, want %d: %s", resp.code, tc.wantCode, resp.body)
			}
			if tc.wantMessage != "" {
				want := errorBody{Message: tc.wantMessage, DocumentationURL: tc.wantDocs, Status: strconv.Itoa(tc.wantCode)}
				if diff := cmp.Diff(want, decodeError(t, resp.body)); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
			}
			rv, _ := w.sim.Workflows().Run(st.run.ID)
			if tc.wantRerun == nil {
				if len(rv.Attempts) != 1 {
					t.Errorf("refused, yet the run has %d attempts", len(rv.Attempts))
				}
				return
			}
			if len(rv.Attempts) != 2 {
				t.Fatalf("run has %d attempts, want 2", len(rv.Attempts))
			}
			var requested []int64
			for _, k := range tc.wantRerun {
				requested = append(requested, st.jobs[k])
			}
			if diff := cmp.Diff(requested, rv.Attempts[1].Requested); diff != "" {
				t.Errorf("jobs the re-run named (-want +got):\n%s", diff)
			}
			// The re-run jobs are queued again under new IDs; those that need them wait.
			for _, id := range rv.Attempts[1].Jobs {
				j, _ := w.sim.Job(id)
				if j.RunAttempt != 2 || slices.Contains(requested, id) {
					t.Errorf("job %d (%s) of attempt 2: attempt %d, want 2 and an ID of its own", id, j.Key, j.RunAttempt)
				}
			}
		})
	}
}

// TestRerunCap: a run re-run 50 times is refused a 51st time.
func TestRerunCap(t *testing.T) {
	w := newWorld(t, worldOpts{opts: Options{FailJobsWithoutRunner: true}})
	// No runner could take it: it fails at once, so its run completes at once.
	run := must(w.sim.QueueRun(RunSpec{Repo: "acme/app", Jobs: []JobSpec{{Labels: []string{"nowhere"}}}}))
	for i := range maxReruns {
		if err := w.sim.Workflows().RerunFailedJobs(run.ID); err != nil {
			t.Fatalf("re-run %d: %v", i+1, err)
		}
	}
	rv, _ := w.sim.Workflows().Run(run.ID)
	if len(rv.Attempts) != maxReruns+1 {
		t.Fatalf("%d attempts, want %d", len(rv.Attempts), maxReruns+1)
	}
	resp := w.do(t, "POST", "/repos/acme/app/actions/runs/"+itoa(run.ID)+"/rerun-failed-jobs", "token "+testPAT, "")
	want := errorBody{Message: msgRunNotRetriable, DocumentationURL: docsRerunFailed, Status: "403"}
	if diff := cmp.Diff(want, decodeError(t, resp.body)); resp.code != 403 || diff != "" {
		t.Errorf("51st re-run: %d, (-want +got):\n%s", resp.code, diff)
	}
	last := rv.Attempts[len(rv.Attempts)-1].Jobs[0]
	resp = w.do(t, "POST", "/repos/acme/app/actions/jobs/"+itoa(last)+"/rerun", "token "+testPAT, "")
	if resp.code != 403 {
		t.Errorf("re-run of the job of attempt 51: %d, want 403", resp.code)
	}
	// A job of an earlier attempt is no longer the one to re-run.
	first := rv.Attempts[0].Jobs[0]
	if err := w.sim.Workflows().RerunJob(first); err == nil {
		t.Error("re-running a job of attempt 1 after 50 re-runs succeeded")
	}
}

// TestRerunEvents: a re-run job's life is told as a first attempt's — workflow_job
// webhooks queued, in_progress, completed (run_attempt 2, its new ID) and the scale
// set's job messages — while a job skipped because its need failed is told only as
// completed, conclusion skipped.
func TestRerunEvents(t *testing.T) {
	w := newWorld(t, worldOpts{realClock: true, opts: Options{ActionsPollHold: 100 * time.Millisecond}})
	hooks := newHookRecorder(t)
	must(w.sim.CreateHook(HookSpec{Org: "acme", URL: hooks.srv.URL, Secret: "s"}))
	c := newScaleSetClient(t, w, "acme")
	ss := createScaleSet(t, c, "pool")
	sess, err := c.MessageSessionClient(context.Background(), ss.ID, "listener")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })

	run := must(w.sim.QueueRun(RunSpec{Repo: "acme/app", Jobs: []JobSpec{
		{Key: "test", Labels: []string{"pool"}},
		{Key: "report", Labels: []string{"report"}, Needs: []string{"test"}},
	}}))
	first := run.Jobs[0].ID
	// The scale set's listener is offered the job, acquires it, and its runner fails it.
	last := w.runScaleSetJob(t, c, sess, ss.ID, 0, first, ConclusionFailure)
	if err := w.sim.Workflows().RerunJob(first); err != nil {
		t.Fatal(err)
	}
	rv, _ := w.sim.Workflows().Run(run.ID)
	second := rv.Attempts[1].Jobs[0]
	w.runScaleSetJob(t, c, sess, ss.ID, last, second, ConclusionSuccess)
	w.playJob(t, "report", ConclusionSuccess)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.sim.FlushWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	// In the order GitHub made them (deliveries are sent concurrently).
	order := map[string]int64{}
	for _, d := range w.sim.Deliveries() {
		order[d.GUID] = d.ID
	}
	received := hooks.received()
	slices.SortFunc(received, func(a, b receivedHook) int {
		return int(order[a.header.Get("X-GitHub-Delivery")] - order[b.header.Get("X-GitHub-Delivery")])
	})
	var got []string
	for _, h := range received {
		var p struct {
			Action string `json:"action"`
			Job    struct {
				ID         int64   `json:"id"`
				RunAttempt int     `json:"run_attempt"`
				Labels     []any   `json:"labels"`
				Conclusion *string `json:"conclusion"`
			} `json:"workflow_job"`
		}
		if err := json.Unmarshal(h.body, &p); err != nil {
			t.Fatal(err)
		}
		concl := ""
		if p.Job.Conclusion != nil {
			concl = "/" + *p.Job.Conclusion
		}
		name := map[int64]string{first: "test#1", second: "test#2"}[p.Job.ID]
		if name == "" {
			name = fmt.Sprintf("%v#%d", p.Job.Labels[0], p.Job.RunAttempt)
		}
		got = append(got, fmt.Sprintf("%s %s%s", name, p.Action, concl))
	}
	want := []string{
		"test#1 queued", "test#1 in_progress", "test#1 completed/failure", "report#1 completed/skipped",
		"test#2 queued", "test#2 in_progress", "test#2 completed/success",
		"report#2 queued", "report#2 in_progress", "report#2 completed/success",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workflow_job webhooks (-want +got):\n%s", diff)
	}
}

// runScaleSetJob reads the scale set's messages after last until one offers job id,
// acquires it, and has a new runner of the scale set run it to conclusion. It returns
// the last message read.
func (w *world) runScaleSetJob(t *testing.T, c *scaleset.Client, sess *scaleset.MessageSessionClient, setID int, last int, id int64, conclusion string) int {
	t.Helper()
	ctx := t.Context()
	var req int64
	for req == 0 {
		m := getMessage(t, sess, last)
		last = m.MessageID
		for _, a := range m.JobAvailableMessages {
			if a.JobID == itoa(id) {
				req = a.RunnerRequestID
			}
		}
		if err := sess.DeleteMessage(ctx, m.MessageID); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := sess.AcquireJobs(ctx, []int64{req}); err != nil || len(got) != 1 {
		t.Fatalf("acquiring job %d: %v, %v", id, got, err)
	}
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: fmt.Sprintf("ss-r%d", runnerSeq.Add(1))}, setID)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runnerapi.NewClientFromJITConfig(jit.EncodedJITConfig, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := rc.NextJob(ctx, 10*time.Second)
	if err != nil || j == nil || j.ID != id {
		t.Fatalf("the scale set's runner got %+v, %v; want job %d", j, err, id)
	}
	if err := rc.StartJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rc.CompleteJob(ctx, id, conclusion); err != nil {
		t.Fatal(err)
	}
	return last
}

// TestRunGraphChecks: a run's needs are checked as it is queued (422), and jobs without
// a key may share a name.
func TestRunGraphChecks(t *testing.T) {
	j := func(key, name string, needs ...string) JobSpec { return JobSpec{Key: key, Name: name, Needs: needs} }
	tests := []struct {
		name    string
		spec    RunSpec
		wantErr string // "" accepted
		waiting []string
	}{
		{"two jobs of one name, no key", RunSpec{Jobs: []JobSpec{j("", "test"), j("", "test")}}, "", nil},
		{"two jobs of one key", RunSpec{Jobs: []JobSpec{j("a", "x"), j("a", "y")}}, `two jobs of the run are keyed "a"`, nil},
		{"a need naming two jobs", RunSpec{Jobs: []JobSpec{j("", "test"), j("", "test"), j("", "report", "test")}}, "the name of several jobs", nil},
		{"an unknown need", RunSpec{Jobs: []JobSpec{j("a", "", "b")}}, `needs "b", which is not a job of the run`, nil},
		{"needs in a circle", RunSpec{Jobs: []JobSpec{j("a", "", "c"), j("b", "", "a"), j("c", "", "b")}}, "go round in a circle", nil},
		{"a need declared later", RunSpec{Jobs: []JobSpec{j("report", "", "build"), j("build", "")}}, "", []string{"report"}},
		{"a need naming a matrix", RunSpec{Matrix: 2, Template: j("unit", ""), Jobs: []JobSpec{j("report", "", "unit")}}, "", []string{"report"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOpts{})
			tc.spec.Repo = "acme/app"
			run, err := w.sim.QueueRun(tc.spec)
			if tc.wantErr != "" {
				var se *Error
				if !errors.As(err, &se) || se.Code != http.StatusUnprocessableEntity || !strings.Contains(se.Message, tc.wantErr) {
					t.Fatalf("QueueRun: %v, want 422 %q", err, tc.wantErr)
				}
				if n := len(w.sim.Workflows().Runs()); n != 0 {
					t.Errorf("a refused run left %d runs", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.waiting, run.Waiting); diff != "" {
				t.Errorf("waiting (-want +got):\n%s", diff)
			}
		})
	}
}
