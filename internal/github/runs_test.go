package github

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A run is polled with its last ETag: an unchanged run answers 304, served from the
// last answer; a completed run is kept no longer.
func TestGetWorkflowRunIsConditionalUntilCompleted(t *testing.T) {
	f := newFakeGitHub(t)
	status := "in_progress"
	var sent []string // If-None-Match of each request
	f.handle("GET /repos/acme/api/actions/runs/7", func(w http.ResponseWriter, r *http.Request) {
		sent = append(sent, r.Header.Get("If-None-Match"))
		etag := `"` + status + `"`
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		body := map[string]any{"id": 7, "run_attempt": 2, "status": status}
		if status == "completed" {
			body["conclusion"] = "failure"
		}
		writeJSON(w, http.StatusOK, body)
	})
	c := newTokenClient(t, "ci/creds", newClock())
	repo := f.scope("acme/api")
	ctx := context.Background()
	var got []WorkflowRun
	for i := range 4 {
		if i == 2 {
			status = "completed"
		}
		run, err := c.GetWorkflowRun(ctx, repo, 7)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, run)
	}
	running := WorkflowRun{ID: 7, RunAttempt: 2, Status: "in_progress"}
	done := WorkflowRun{ID: 7, RunAttempt: 2, Status: "completed", Conclusion: "failure"}
	if diff := cmp.Diff([]WorkflowRun{running, running, done, done}, got); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	// The second read sends the first's ETag; the third the same (answered 200, the run
	// changed); the fourth none: the completed run was not kept.
	if diff := cmp.Diff([]string{"", `"in_progress"`, `"in_progress"`, ""}, sent); diff != "" {
		t.Errorf("If-None-Match sent (-want +got):\n%s", diff)
	}
	if !done.Completed() || running.Completed() {
		t.Error("Completed is wrong")
	}
}

// Every execution of every attempt is listed, page by page.
func TestListWorkflowRunJobsReadsEveryPageOfEveryAttempt(t *testing.T) {
	f := newFakeGitHub(t)
	f.handle("GET /repos/acme/api/actions/runs/7/jobs", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("filter") != "all" {
			t.Errorf("filter = %q, want all", r.URL.Query().Get("filter"))
		}
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page == 0 {
			page = 1
		}
		if page == 1 {
			w.Header().Set("Link", fmt.Sprintf(`<%s/api/v3/repos/acme/api/actions/runs/7/jobs?filter=all&per_page=100&page=2>; rel="next"`, f.srv.URL))
			writeJSON(w, http.StatusOK, map[string]any{"total_count": 2, "jobs": []any{
				map[string]any{"id": 11, "run_id": 7, "run_attempt": 1, "name": "build", "status": "completed", "conclusion": "failure",
					"runner_name": "linux-abcde", "completed_at": "2026-05-01T12:10:00Z"},
			}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"total_count": 2, "jobs": []any{
			map[string]any{"id": 12, "run_id": 7, "run_attempt": 2, "name": "build", "status": "queued"},
		}})
	})
	c := newTokenClient(t, "ci/creds", newClock())
	got, err := c.ListWorkflowRunJobs(context.Background(), f.scope("acme/api"), 7)
	if err != nil {
		t.Fatal(err)
	}
	want := []WorkflowJob{
		{ID: 11, RunID: 7, RunAttempt: 1, Name: "build", Status: "completed", Conclusion: "failure", RunnerName: "linux-abcde",
			CompletedAt: newClock().Now().Add(10 * 60 * 1e9)},
		{ID: 12, RunID: 7, RunAttempt: 2, Name: "build", Status: "queued"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

// GitHub's answers to a re-run, each as callers act on it.
func TestRerunAnswers(t *testing.T) {
	tests := []struct {
		name   string
		status int
		msg    string
		is     func(error) bool
	}{
		{"re-run", http.StatusCreated, "", nil},
		{"run still running", http.StatusForbidden, "The workflow run containing this job is already running", IsRunInProgress},
		{"run still running (run)", http.StatusForbidden, "This workflow is already running", IsRunInProgress},
		{"50 re-runs", http.StatusForbidden, "This workflow run cannot be retried", IsNotRerunnable},
		{"no Actions write", http.StatusForbidden, "Resource not accessible by integration", IsUnauthorized},
		{"no such job", http.StatusNotFound, "Not Found", IsNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			answer := func(w http.ResponseWriter, _ *http.Request) {
				if tt.status == http.StatusCreated {
					writeJSON(w, tt.status, map[string]any{})
					return
				}
				ghError(w, tt.status, tt.msg)
			}
			f.handle("POST /repos/acme/api/actions/jobs/11/rerun", answer)
			f.handle("POST /repos/acme/api/actions/runs/7/rerun-failed-jobs", answer)
			c := newTokenClient(t, "ci/creds", newClock())
			for _, err := range []error{
				c.RerunJob(context.Background(), f.scope("acme/api"), 11),
				c.RerunFailedJobs(context.Background(), f.scope("acme/api"), 7),
			} {
				switch {
				case tt.is == nil && err != nil:
					t.Errorf("err = %v, want none", err)
				case tt.is != nil && !tt.is(err):
					t.Errorf("err = %v (reason %q), want the other kind", err, ReasonOf(err))
				}
			}
		})
	}
}

// Runs belong to repositories: an organization scope is refused before any request.
func TestRunsNeedARepositoryScope(t *testing.T) {
	f := newFakeGitHub(t)
	c := newTokenClient(t, "ci/creds", newClock())
	if _, err := c.GetWorkflowRun(context.Background(), f.scope("acme"), 7); err == nil {
		t.Error("GetWorkflowRun on an organization scope: no error")
	}
	if len(f.gotCalls()) != 0 {
		t.Errorf("calls: %v", f.gotCalls())
	}
}

// What the credentials may do with workflow runs, as GitHub tells it: the installation
// token's permissions for an App, X-OAuth-Scopes for a classic token, nothing for a
// fine-grained one.
func TestActionsWrite(t *testing.T) {
	rateLimit := func(scopes *string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if scopes != nil {
				w.Header().Set("X-OAuth-Scopes", *scopes)
			}
			// GHES with rate limits off: the scopes come with the 404.
			ghError(w, http.StatusNotFound, "Rate limiting is not enabled.")
		}
	}
	withRepo, withoutRepo := "repo, admin:org", "admin:org, workflow"
	tests := []struct {
		name   string
		scopes *string
		want   Permission
	}{
		{"classic token with repo", &withRepo, Permission{Known: true, Granted: true, Has: "scopes: repo, admin:org"}},
		{"classic token without repo", &withoutRepo, Permission{Known: true, Has: "scopes: admin:org, workflow"}},
		{"fine-grained token", nil, Permission{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			f.handle("GET /rate_limit", rateLimit(tt.scopes))
			c := newTokenClient(t, "ci/creds", newClock())
			got, err := c.(Inspector).ActionsWrite(context.Background(), f.scope("acme"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("permission (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("GitHub App", func(t *testing.T) {
		f := newFakeGitHub(t)
		appServer(t, f) // its tokens carry organization_self_hosted_runners only
		c, err := NewClient(appCredentials(t, testKey(), testInstallationID), Options{Name: "ns/app", Clock: newClock()})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.(Inspector).ActionsWrite(context.Background(), f.scope("acme"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Permission{Known: true, Has: "no actions permission"}, got); diff != "" {
			t.Errorf("permission (-want +got):\n%s", diff)
		}
	})
}
