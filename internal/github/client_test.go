package github

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGenerateJITConfig(t *testing.T) {
	tests := []struct {
		name      string
		path      string // scope on the fake host
		route     string
		status    int
		respond   any
		wantBody  map[string]any
		want      JITConfig
		wantErrIs func(error) bool
	}{
		{
			name:   "organization",
			path:   "acme",
			route:  "POST /orgs/acme/actions/runners/generate-jitconfig",
			status: http.StatusCreated,
			respond: map[string]any{
				"runner":             runnerJSON(42, "pool-abc", "offline", false, "self-hosted", "linux", "gpu"),
				"encoded_jit_config": "ZW5jb2RlZA==",
			},
			wantBody: map[string]any{"name": "pool-abc", "runner_group_id": float64(3), "labels": []any{"gpu"}, "work_folder": "_work"},
			want: JITConfig{
				Runner:           Runner{ID: 42, Name: "pool-abc", OS: "linux", Status: RunnerOffline, Labels: []string{"self-hosted", "linux", "gpu"}},
				EncodedJITConfig: "ZW5jb2RlZA==",
			},
		},
		{
			name:   "repository",
			path:   "acme/app",
			route:  "POST /repos/acme/app/actions/runners/generate-jitconfig",
			status: http.StatusCreated,
			respond: map[string]any{
				"runner":             runnerJSON(7, "pool-abc", "offline", false, "gpu"),
				"encoded_jit_config": "cmVwbw==",
			},
			wantBody: map[string]any{"name": "pool-abc", "runner_group_id": float64(3), "labels": []any{"gpu"}, "work_folder": "_work"},
			want: JITConfig{
				Runner:           Runner{ID: 7, Name: "pool-abc", OS: "linux", Status: RunnerOffline, Labels: []string{"gpu"}},
				EncodedJITConfig: "cmVwbw==",
			},
		},
		{
			name:   "enterprise",
			path:   "enterprises/big",
			route:  "POST /enterprises/big/actions/runners/generate-jitconfig",
			status: http.StatusCreated,
			respond: map[string]any{
				"runner":             runnerJSON(9, "pool-abc", "offline", false, "gpu"),
				"encoded_jit_config": "ZW50",
			},
			wantBody: map[string]any{"name": "pool-abc", "runner_group_id": float64(3), "labels": []any{"gpu"}, "work_folder": "_work"},
			want: JITConfig{
				Runner:           Runner{ID: 9, Name: "pool-abc", OS: "linux", Status: RunnerOffline, Labels: []string{"gpu"}},
				EncodedJITConfig: "ZW50",
			},
		},
		{
			name:      "duplicate name is AlreadyExists",
			path:      "acme",
			route:     "POST /orgs/acme/actions/runners/generate-jitconfig",
			status:    http.StatusUnprocessableEntity,
			respond:   map[string]string{"message": "Already exists - A runner with the name pool-abc already exists."},
			wantBody:  map[string]any{"name": "pool-abc", "runner_group_id": float64(3), "labels": []any{"gpu"}, "work_folder": "_work"},
			wantErrIs: IsAlreadyExists,
		},
		{
			// The simulator's shape: found by the reliability suite, where a JIT call that
			// timed out had registered the runner and every retry was refused this way.
			name:      "duplicate name as Validation Failed is AlreadyExists",
			path:      "acme",
			route:     "POST /orgs/acme/actions/runners/generate-jitconfig",
			status:    http.StatusUnprocessableEntity,
			respond:   map[string]any{"message": "Validation Failed", "errors": []string{"A runner with the name pool-abc already exists."}},
			wantBody:  map[string]any{"name": "pool-abc", "runner_group_id": float64(3), "labels": []any{"gpu"}, "work_folder": "_work"},
			wantErrIs: IsAlreadyExists,
		},
		{
			name:     "bad group is an ordinary error",
			path:     "acme",
			route:    "POST /orgs/acme/actions/runners/generate-jitconfig",
			status:   http.StatusUnprocessableEntity,
			respond:  map[string]string{"message": "Invalid runner group id"},
			wantBody: map[string]any{"name": "pool-abc", "runner_group_id": float64(3), "labels": []any{"gpu"}, "work_folder": "_work"},
			wantErrIs: func(err error) bool {
				return err != nil && ReasonOf(err) == "" && strings.Contains(err.Error(), "Invalid runner group id")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			bodies := make(chan map[string]any, 1)
			f.handle(tt.route, func(w http.ResponseWriter, r *http.Request) {
				var body map[string]any
				if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
					t.Errorf("decoding request body: %v", err)
				}
				bodies <- body
				writeJSON(w, tt.status, tt.respond)
			})
			c := newTokenClient(t, "ns/jit-"+strings.ReplaceAll(tt.name, " ", "-"), newClock())

			got, err := c.GenerateJITConfig(context.Background(), f.scope(tt.path), JITConfigRequest{
				Name: "pool-abc", RunnerGroupID: 3, Labels: []string{"gpu"}, WorkFolder: "_work",
			})
			var gotBody map[string]any
			select {
			case gotBody = <-bodies:
			default:
			}
			if diff := cmp.Diff(tt.wantBody, gotBody); diff != "" {
				t.Errorf("request body (-want +got):\n%s", diff)
			}
			if tt.wantErrIs != nil {
				if !tt.wantErrIs(err) {
					t.Fatalf("GenerateJITConfig() error = %v, not the expected kind", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("GenerateJITConfig() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GenerateJITConfig() (-want +got):\n%s", diff)
			}
			if s := fmt.Sprintf("%v %+v %#v", got, got, got); strings.Contains(s, tt.want.EncodedJITConfig) {
				t.Errorf("formatting a JITConfig printed the encoded config: %s", s)
			}
		})
	}
}

func TestGenerateJITConfigValidatesLocally(t *testing.T) {
	f := newFakeGitHub(t)
	c := newTokenClient(t, "ns/jit-local", newClock())
	for _, req := range []JITConfigRequest{
		{Name: "", Labels: []string{"a"}},
		{Name: "r", Labels: nil},
		{Name: "r", Labels: make([]string, 101)},
	} {
		if _, err := c.GenerateJITConfig(context.Background(), f.scope("acme"), req); err == nil {
			t.Errorf("GenerateJITConfig(%+v) = nil error, want a validation error", req)
		}
	}
	if calls := f.gotCalls(); len(calls) != 0 {
		t.Errorf("invalid requests reached GitHub: %v", calls)
	}
}

func TestCreateRegistrationTokenIsCachedUntilNearExpiry(t *testing.T) {
	f := newFakeGitHub(t)
	clk := newClock()
	var n atomic.Int32
	f.handle("POST /orgs/acme/actions/runners/registration-token", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusCreated, map[string]any{
			"token":      fmt.Sprintf("AABBREGTOKEN%d", n.Add(1)),
			"expires_at": clk.Now().Add(time.Hour).Format(time.RFC3339),
		})
	})
	c := newTokenClient(t, "ns/regtoken", clk)
	scope := f.scope("acme")
	start := clk.Now()

	steps := []struct {
		after     time.Duration
		wantToken string
	}{
		{0, "AABBREGTOKEN1"},
		{time.Minute, "AABBREGTOKEN1"},
		{54 * time.Minute, "AABBREGTOKEN1"},
		{55*time.Minute + time.Second, "AABBREGTOKEN2"}, // within 5 minutes of expiry
		{56 * time.Minute, "AABBREGTOKEN2"},
	}
	for _, s := range steps {
		clk.SetTime(start.Add(s.after))
		got, err := c.CreateRegistrationToken(context.Background(), scope)
		if err != nil {
			t.Fatalf("at +%v: CreateRegistrationToken() error = %v", s.after, err)
		}
		if got.Token != s.wantToken {
			t.Errorf("at +%v: token = %q, want %q", s.after, got.Token, s.wantToken)
		}
		if strings.Contains(fmt.Sprintf("%v %#v", got, got), got.Token) {
			t.Errorf("formatting a RegistrationToken printed the token")
		}
	}
	if got := n.Load(); got != 2 {
		t.Errorf("GitHub got %d registration-token calls, want 2", got)
	}
}

func TestGetRunner(t *testing.T) {
	f := newFakeGitHub(t)
	f.handle("GET /repos/acme/app/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "5" {
			ghError(w, http.StatusNotFound, "Not Found")
			return
		}
		writeJSON(w, http.StatusOK, runnerJSON(5, "r5", "online", true, "self-hosted", "gpu"))
	})
	c := newTokenClient(t, "ns/getrunner", newClock())
	scope := f.scope("acme/app")

	got, err := c.GetRunner(context.Background(), scope, 5)
	if err != nil {
		t.Fatalf("GetRunner(5) error = %v", err)
	}
	want := Runner{ID: 5, Name: "r5", OS: "linux", Status: RunnerOnline, Busy: true, Labels: []string{"self-hosted", "gpu"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetRunner(5) (-want +got):\n%s", diff)
	}
	if _, err := c.GetRunner(context.Background(), scope, 6); !IsNotFound(err) {
		t.Errorf("GetRunner(6) error = %v, want NotFound", err)
	}
	if auths := f.gotAuths(); auths[0] != "Bearer "+testToken {
		t.Errorf("Authorization header = %q, want the bearer token", auths[0])
	}
}

func TestListRunnersFollowsLinkPages(t *testing.T) {
	f := newFakeGitHub(t)
	all := []map[string]any{}
	for i := 1; i <= 250; i++ {
		all = append(all, runnerJSON(int64(i), fmt.Sprintf("r%d", i), "online", false, "gpu"))
	}
	f.handle("GET /orgs/acme/actions/runners", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if name := q.Get("name"); name != "" {
			var match []map[string]any
			for _, rn := range all {
				if rn["name"] == name {
					match = append(match, rn)
				}
			}
			writeJSON(w, http.StatusOK, map[string]any{"total_count": len(match), "runners": match})
			return
		}
		per, _ := strconv.Atoi(q.Get("per_page"))
		page, _ := strconv.Atoi(q.Get("page"))
		if page == 0 {
			page = 1
		}
		lo, hi := (page-1)*per, min(page*per, len(all))
		last := (len(all) + per - 1) / per
		if page < last {
			next := *r.URL
			next.Scheme, next.Host = "http", r.Host
			next.RawQuery = url.Values{"per_page": {strconv.Itoa(per)}, "page": {strconv.Itoa(page + 1)}}.Encode()
			lastURL := next
			lastURL.RawQuery = url.Values{"per_page": {strconv.Itoa(per)}, "page": {strconv.Itoa(last)}}.Encode()
			w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, next.String(), lastURL.String()))
		}
		writeJSON(w, http.StatusOK, map[string]any{"total_count": len(all), "runners": all[lo:hi]})
	})
	c := newTokenClient(t, "ns/listrunners", newClock())
	scope := f.scope("acme")

	got, err := c.ListRunners(context.Background(), scope, "")
	if err != nil {
		t.Fatalf("ListRunners() error = %v", err)
	}
	if len(got) != 250 || got[0].ID != 1 || got[249].ID != 250 {
		t.Errorf("ListRunners() returned %d runners (first %v), want ids 1..250", len(got), got[0].ID)
	}
	wantCalls := []string{
		"GET /orgs/acme/actions/runners?per_page=100",
		"GET /orgs/acme/actions/runners?page=2&per_page=100",
		"GET /orgs/acme/actions/runners?page=3&per_page=100",
	}
	if diff := cmp.Diff(wantCalls, f.gotCalls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	byName, err := c.ListRunners(context.Background(), scope, "r17")
	if err != nil {
		t.Fatalf("ListRunners(r17) error = %v", err)
	}
	want := []Runner{{ID: 17, Name: "r17", OS: "linux", Status: RunnerOnline, Labels: []string{"gpu"}}}
	if diff := cmp.Diff(want, byName); diff != "" {
		t.Errorf("ListRunners(r17) (-want +got):\n%s", diff)
	}
}

func TestDeleteRunner(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		wantErr func(error) bool
	}{
		{"deleted", http.StatusNoContent, func(err error) bool { return err == nil }},
		{"already gone", http.StatusNotFound, IsNotFound},
		{"running a job", http.StatusUnprocessableEntity, IsBusy},
		{"server error", http.StatusBadGateway, func(err error) bool { return err != nil && ReasonOf(err) == "" }},
		{"bad credentials", http.StatusUnauthorized, IsUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			f.handle("DELETE /enterprises/big/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
				if tt.status == http.StatusNoContent {
					w.WriteHeader(tt.status)
					return
				}
				ghError(w, tt.status, http.StatusText(tt.status))
			})
			c := newTokenClient(t, "ns/delete", newClock())
			err := c.DeleteRunner(context.Background(), f.scope("enterprises/big"), 12)
			if !tt.wantErr(err) {
				t.Errorf("DeleteRunner() error = %v (reason %q), not the expected kind", err, ReasonOf(err))
			}
			if diff := cmp.Diff([]string{"DELETE /enterprises/big/actions/runners/12"}, f.gotCalls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunnerGroupID(t *testing.T) {
	f := newFakeGitHub(t)
	f.handle("GET /orgs/acme/actions/runner-groups", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"total_count": 2, "runner_groups": []map[string]any{
			{"id": 1, "name": "Default", "visibility": "all", "default": true},
			{"id": 4, "name": "GPU Runners", "visibility": "selected", "default": false},
		}})
	})
	f.handle("GET /enterprises/big/actions/runner-groups", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"total_count": 1, "runner_groups": []map[string]any{
			{"id": 9, "name": "ent-group", "visibility": "all", "default": false},
		}})
	})
	clk := newClock()
	c := newTokenClient(t, "ns/groups", clk)
	ctx := context.Background()

	tests := []struct {
		scope   string
		group   string
		want    int64
		wantErr func(error) bool
	}{
		{"acme", "Default", 1, nil},
		{"acme", "gpu runners", 4, nil},
		{"acme", "GPU Runners", 4, nil},
		{"acme/app", "anything", 1, nil},
		{"enterprises/big", "ent-group", 9, nil},
		{"acme", "missing", 0, IsNotFound},
	}
	for _, tt := range tests {
		got, err := c.RunnerGroupID(ctx, f.scope(tt.scope), tt.group)
		if tt.wantErr != nil {
			if !tt.wantErr(err) {
				t.Errorf("RunnerGroupID(%s, %q) error = %v, not the expected kind", tt.scope, tt.group, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("RunnerGroupID(%s, %q) = %d, %v; want %d", tt.scope, tt.group, got, err, tt.want)
		}
	}
	// Known names come from the cache; the unknown one forced one more listing.
	wantCalls := []string{
		"GET /orgs/acme/actions/runner-groups?per_page=100",
		"GET /enterprises/big/actions/runner-groups?per_page=100",
		"GET /orgs/acme/actions/runner-groups?per_page=100",
	}
	if diff := cmp.Diff(wantCalls, f.gotCalls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// After the TTL the cache is refreshed.
	clk.SetTime(clk.Now().Add(11 * time.Minute))
	if _, err := c.RunnerGroupID(ctx, f.scope("acme"), "Default"); err != nil {
		t.Fatalf("RunnerGroupID after TTL: %v", err)
	}
	if got := len(f.gotCalls()); got != 4 {
		t.Errorf("after the TTL, %d calls, want 4", got)
	}
}

// A burst of runners on a cold cache looks the group up once, not once per runner.
func TestRunnerGroupIDSharesOneListing(t *testing.T) {
	f := newFakeGitHub(t)
	release := make(chan struct{})
	f.handle("GET /orgs/acme/actions/runner-groups", func(w http.ResponseWriter, r *http.Request) {
		<-release
		writeJSON(w, http.StatusOK, map[string]any{"total_count": 1, "runner_groups": []map[string]any{
			{"id": 1, "name": "Default", "visibility": "all", "default": true},
		}})
	})
	c := newTokenClient(t, "ns/burst", newClock())
	const n = 20
	errs := make(chan error, n)
	for range n {
		go func() {
			id, err := c.RunnerGroupID(context.Background(), f.scope("acme"), "Default")
			if err == nil && id != 1 {
				err = fmt.Errorf("id %d, want 1", id)
			}
			errs <- err
		}()
	}
	time.Sleep(100 * time.Millisecond) // let every lookup find the cache cold
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := len(f.gotCalls()); got != 1 {
		t.Errorf("%d concurrent lookups made %d calls, want 1", n, got)
	}
}

// ListQueuedJobs lists the jobs of queued and in-progress runs with conditional
// requests: unchanged pages come back 304 and are read from the copy kept; a run the
// caller skips is named, not listed.
func TestListQueuedJobs(t *testing.T) {
	f := newFakeGitHub(t)
	// conditional answers 304 when the request names the page's ETag, else v.
	conditional := func(w http.ResponseWriter, r *http.Request, etag string, v any) {
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		writeJSON(w, http.StatusOK, v)
	}
	f.handle("GET /repos/acme/app/actions/runs", func(w http.ResponseWriter, r *http.Request) {
		status := r.URL.Query().Get("status")
		runs := map[string][]map[string]any{
			"queued":      {{"id": 100, "status": "queued", "run_attempt": 1}},
			"in_progress": {{"id": 200, "status": "in_progress", "run_attempt": 1}},
		}[status]
		conditional(w, r, `W/"runs-`+status+`"`, map[string]any{"total_count": len(runs), "workflow_runs": runs})
	})
	created := "2026-05-01T11:59:00Z"
	f.handle("GET /repos/acme/app/actions/runs/{run}/jobs", func(w http.ResponseWriter, r *http.Request) {
		run, _ := strconv.Atoi(r.PathValue("run"))
		jobs := []map[string]any{
			{"id": run + 1, "run_id": run, "run_attempt": 1, "name": "build", "workflow_name": "CI", "status": "queued", "labels": []string{"self-hosted", "gpu"}, "created_at": created},
			{"id": run + 2, "run_id": run, "run_attempt": 1, "name": "lint", "workflow_name": "CI", "status": "in_progress", "labels": []string{"self-hosted"}, "created_at": created},
		}
		conditional(w, r, `W/"jobs-`+r.PathValue("run")+`"`, map[string]any{"total_count": len(jobs), "jobs": jobs})
	})
	c := newTokenClient(t, "ns/jobs", newClock())

	at, _ := time.Parse(time.RFC3339, created)
	job101 := Job{ID: 101, RunID: 100, RunAttempt: 1, Name: "build", WorkflowName: "CI", Owner: "acme", Repo: "app", Labels: []string{"self-hosted", "gpu"}, Status: "queued", CreatedAt: at}
	job201 := Job{ID: 201, RunID: 200, RunAttempt: 1, Name: "build", WorkflowName: "CI", Owner: "acme", Repo: "app", Labels: []string{"self-hosted", "gpu"}, Status: "queued", CreatedAt: at}
	tests := []struct {
		name string
		skip func(int64) bool
		want QueuedJobs
	}{
		{"first listing", nil, QueuedJobs{Jobs: []Job{job101, job201}, Requests: 4}},
		{"unchanged: every page 304", nil, QueuedJobs{Jobs: []Job{job101, job201}, Requests: 4, NotModified: 4}},
		{"run 200 skipped", func(id int64) bool { return id == 200 }, QueuedJobs{Jobs: []Job{job101}, Skipped: []int64{200}, Requests: 3, NotModified: 3}},
		{"run 200's pages kept while skipped", nil, QueuedJobs{Jobs: []Job{job101, job201}, Requests: 4, NotModified: 4}},
	}
	for _, tc := range tests {
		got, err := c.ListQueuedJobs(context.Background(), f.scope("acme/app"), tc.skip)
		if err != nil {
			t.Fatalf("%s: ListQueuedJobs() error = %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: ListQueuedJobs() (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, err := c.ListQueuedJobs(context.Background(), f.scope("acme"), nil); err == nil {
		t.Errorf("ListQueuedJobs(org scope) = nil error, want one that asks for a repository scope")
	}
}

func TestTokenCannotReadAppHookDeliveries(t *testing.T) {
	f := newFakeGitHub(t)
	c := newTokenClient(t, "ns/hooks-pat", newClock())
	if _, err := c.ListHookDeliveries(context.Background(), f.scope("acme"), ""); !IsUnauthorized(err) {
		t.Errorf("ListHookDeliveries with a token: error = %v, want Unauthorized", err)
	}
	if calls := f.gotCalls(); len(calls) != 0 {
		t.Errorf("calls = %v, want none", calls)
	}
}

// TestDotcomBaseURL checks a github.com scope talks to https://api.github.com/ with no
// /api/v3 prefix; a transport redirects the requests to the loopback fake.
func TestDotcomBaseURL(t *testing.T) {
	f := newFakeGitHub(t)
	f.handle("GET /orgs/acme/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, runnerJSON(3, "r3", "online", false))
	})
	target, _ := url.Parse(f.srv.URL)
	var gotHosts []string
	redirect := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		gotHosts = append(gotHosts, r.URL.Scheme+"://"+r.URL.Host+r.URL.Path)
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host = target.Scheme, target.Host
		r.URL.Path = "/api/v3" + r.URL.Path
		return http.DefaultTransport.RoundTrip(r)
	})
	c, err := NewClient(Credentials{Token: testToken}, Options{Name: "ns/dotcom", Clock: newClock(), Transport: redirect})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := ParseURL("https://github.com/acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRunner(context.Background(), scope, 3); err != nil {
		t.Fatalf("GetRunner() error = %v", err)
	}
	if diff := cmp.Diff([]string{"https://api.github.com/orgs/acme/actions/runners/3"}, gotHosts); diff != "" {
		t.Errorf("requested URLs (-want +got):\n%s", diff)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
