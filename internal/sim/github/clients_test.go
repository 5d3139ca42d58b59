package github

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-cmp/cmp"
	gh "github.com/google/go-github/v88/github"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// appClient is a go-github client authenticated as the world's App installation
// through ghinstallation, against baseURL (root or GHES /api/v3/).
func appClient(t *testing.T, w *world, baseURL string) (*gh.Client, *ghinstallation.Transport) {
	t.Helper()
	tr, err := ghinstallation.New(http.DefaultTransport, w.app.ID, w.inst.ID, []byte(w.keyPM))
	if err != nil {
		t.Fatal(err)
	}
	tr.BaseURL = baseURL
	return newGH(t, tr, baseURL), tr
}

// newGH is a go-github client at baseURL: the root (api.github.com layout) or
// root/api/v3/ (GHES, through WithEnterpriseURLs as the controller does).
func newGH(t *testing.T, tr http.RoundTripper, baseURL string) *gh.Client {
	t.Helper()
	opt := gh.WithURLs(&baseURL, &baseURL)
	if strings.HasSuffix(baseURL, "/api/v3/") {
		root := strings.TrimSuffix(baseURL, "api/v3/")
		opt = gh.WithEnterpriseURLs(root, root)
	}
	c, err := gh.NewClient(gh.WithHTTPClient(&http.Client{Transport: tr}), opt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientsEndToEnd drives a whole ephemeral-runner life with the clients the
// controller uses: ghinstallation for App auth, go-github for REST, both at the
// api.github.com layout and the GHES /api/v3 prefix.
func TestClientsEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		name, base string
	}{
		{"dotcom", "/"},
		{"ghes", "/api/v3/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOpts{realClock: true})
			hooks := newHookRecorder(t)
			must(w.sim.CreateHook(HookSpec{Org: "acme", URL: hooks.srv.URL, Secret: "s3cret"}))
			c, tr := appClient(t, w, w.srv.URL+tc.base)
			ctx := t.Context()

			groups, _, err := c.Actions.ListOrganizationRunnerGroups(ctx, "acme", &gh.ListOrgRunnerGroupOptions{VisibleToRepository: "app"})
			if err != nil {
				t.Fatalf("listing runner groups: %v", err)
			}
			if diff := cmp.Diff([]string{"Default", "Default"}, groupNames(groups.RunnerGroups)); diff != "" {
				t.Errorf("runner groups (-want +got):\n%s", diff)
			}

			jit, resp, err := c.Actions.GenerateOrgJITConfig(ctx, "acme", &gh.GenerateJITConfigRequest{
				Name: "pool-a-1", RunnerGroupID: 1, Labels: []string{"self-hosted", "linux", "X64", "GPU", "gpu"},
			})
			if err != nil {
				t.Fatalf("generating JIT config: %v", err)
			}
			if resp.Rate.Limit != 5000 || resp.Rate.Remaining >= 5000 {
				t.Errorf("rate = %+v, want limit 5000 and some used", resp.Rate)
			}
			gotLabels := []string{}
			for _, l := range jit.Runner.Labels {
				gotLabels = append(gotLabels, l.GetName()+":"+l.GetType())
			}
			// Exactly the requested labels, as GitHub registers a JIT runner: no default
			// labels added; "gpu" duplicates "GPU" case-insensitively and is dropped; the
			// system labels are read-only even when the request names them.
			wantLabels := []string{"self-hosted:read-only", "linux:read-only", "X64:read-only", "GPU:custom"}
			if diff := cmp.Diff(wantLabels, gotLabels); diff != "" {
				t.Errorf("runner labels (-want +got):\n%s", diff)
			}

			_, _, err = c.Actions.GenerateOrgJITConfig(ctx, "acme", &gh.GenerateJITConfigRequest{Name: "pool-a-1", RunnerGroupID: 1, Labels: []string{"x"}})
			var ge *gh.ErrorResponse
			if !errors.As(err, &ge) || ge.Response.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("duplicate name: err = %v, want 422", err)
			}

			// The job lasts long enough for the delete below to find its runner still busy.
			job := must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "gpu"}, Duration: Duration(2 * time.Second)}))

			agent, err := runnerapi.NewClientFromJITConfig(jit.GetEncodedJITConfig(), nil)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := agent.Run(ctx, runnerapi.RunOptions{PollWait: 5 * time.Second})
				done <- err
			}()

			// While the job runs the runner is busy and cannot be deleted.
			waitFor(t, func() bool { j, _ := w.sim.Job(job.ID); return j.Status != StatusQueued })
			if j, _ := w.sim.Job(job.ID); j.Status == StatusInProgress {
				_, err := c.Actions.RemoveOrganizationRunner(ctx, "acme", jit.Runner.GetID())
				if !errors.As(err, &ge) || ge.Response.StatusCode != http.StatusUnprocessableEntity {
					t.Errorf("deleting a busy runner: err = %v, want 422", err)
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("agent: %v", err)
			}

			got, _ := w.sim.Job(job.ID)
			var types []string
			for _, e := range got.Timeline {
				types = append(types, e.Type)
			}
			if diff := cmp.Diff([]string{EventQueued, EventAssigned, EventStarted, EventCompleted}, types); diff != "" {
				t.Errorf("timeline (-want +got):\n%s", diff)
			}
			if got.Conclusion != ConclusionSuccess || got.RunnerID != jit.Runner.GetID() {
				t.Errorf("job = %+v, want success on runner %d", got, jit.Runner.GetID())
			}

			// The ephemeral runner is gone: 404 on get and delete.
			_, resp, err = c.Actions.GetOrganizationRunner(ctx, "acme", jit.Runner.GetID())
			if err == nil || resp.StatusCode != http.StatusNotFound {
				t.Errorf("get removed runner: err = %v, want 404", err)
			}
			resp, err = c.Actions.RemoveOrganizationRunner(ctx, "acme", jit.Runner.GetID())
			if err == nil || resp.StatusCode != http.StatusNotFound {
				t.Errorf("delete removed runner: err = %v, want 404", err)
			}

			// A registration token, and an idle runner that is deleted with 204.
			tok, _, err := c.Actions.CreateOrganizationRegistrationToken(ctx, "acme")
			if err != nil || tok.GetToken() == "" || tok.GetExpiresAt().Before(time.Now().Add(50*time.Minute)) {
				t.Fatalf("registration token: %v (expires %v)", err, tok.GetExpiresAt())
			}
			reg, err := runnerapi.Register(ctx, w.srv.URL, runnerapi.RegisterRequest{Token: tok.GetToken(), Name: "static-1", Labels: []string{"linux"}}, nil)
			if err != nil {
				t.Fatalf("registering: %v", err)
			}
			list, _, err := c.Actions.ListOrganizationRunners(ctx, "acme", &gh.ListRunnersOptions{Name: gh.Ptr("static-1")})
			if err != nil || list.TotalCount != 1 || list.Runners[0].GetStatus() != "offline" {
				t.Fatalf("listing runners: %v %+v", err, list)
			}
			if _, err := reg.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			r, _, err := c.Actions.GetOrganizationRunner(ctx, "acme", reg.Config().RunnerID)
			if err != nil || r.GetStatus() != "online" || r.GetBusy() {
				t.Errorf("runner = %+v, %v; want online and idle", r, err)
			}
			// config.sh registers the default labels first; "linux" duplicates "Linux".
			if diff := cmp.Diff([]string{"self-hosted", "Linux", "X64"}, runnerLabelNames(r)); diff != "" {
				t.Errorf("config.sh runner labels (-want +got):\n%s", diff)
			}
			bare, err := runnerapi.Register(ctx, w.srv.URL, runnerapi.RegisterRequest{Token: tok.GetToken(), Name: "static-2", Labels: []string{"gpu"}, NoDefaultLabels: true}, nil)
			if err != nil {
				t.Fatalf("registering with --no-default-labels: %v", err)
			}
			r, _, err = c.Actions.GetOrganizationRunner(ctx, "acme", bare.Config().RunnerID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"gpu"}, runnerLabelNames(r)); diff != "" {
				t.Errorf("config.sh --no-default-labels runner labels (-want +got):\n%s", diff)
			}
			resp, err = c.Actions.RemoveOrganizationRunner(ctx, "acme", reg.Config().RunnerID)
			if err != nil || resp.StatusCode != http.StatusNoContent {
				t.Errorf("delete idle runner: %v", err)
			}
			if _, err := reg.NextJob(ctx, 0); !errors.Is(err, runnerapi.ErrRunnerRemoved) {
				t.Errorf("polling a deleted runner: err = %v, want ErrRunnerRemoved", err)
			}

			// Resync: the run is listed as completed, with its job.
			runs, _, err := c.Actions.ListRepositoryWorkflowRuns(ctx, "acme", "app", &gh.ListWorkflowRunsOptions{Status: "completed"})
			if err != nil || runs.GetTotalCount() != 1 {
				t.Fatalf("listing runs: %v %+v", err, runs)
			}
			jobs, _, err := c.Actions.ListWorkflowJobs(ctx, "acme", "app", runs.WorkflowRuns[0].GetID(), nil)
			if err != nil || jobs.GetTotalCount() != 1 || jobs.Jobs[0].GetRunnerName() != "pool-a-1" {
				t.Fatalf("listing jobs: %v %+v", err, jobs)
			}

			// Webhooks: queued, in_progress, completed, signed, in the delivery log.
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := w.sim.FlushWebhooks(fctx); err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, h := range hooks.received() {
				if !VerifySignature("s3cret", h.body, h.header.Get("X-Hub-Signature-256")) {
					t.Errorf("bad signature on delivery %s", h.header.Get("X-GitHub-Delivery"))
				}
				var ev gh.WorkflowJobEvent
				if err := json.Unmarshal(h.body, &ev); err != nil {
					t.Fatal(err)
				}
				actions = append(actions, ev.GetAction())
			}
			// Senders work in parallel, so, as on GitHub, order is not guaranteed.
			slices.Sort(actions)
			if diff := cmp.Diff([]string{"completed", "in_progress", "queued"}, actions); diff != "" {
				t.Errorf("webhook actions (-want +got):\n%s", diff)
			}

			appTr := ghinstallation.NewAppsTransportFromPrivateKey(http.DefaultTransport, w.app.ID, w.key)
			appTr.BaseURL = w.srv.URL + tc.base
			ac := newGH(t, appTr, w.srv.URL+tc.base)
			inst, _, err := ac.Apps.GetOrganizationInstallation(ctx, "acme")
			if err != nil || inst.GetID() != w.inst.ID {
				t.Errorf("find installation: %v %+v", err, inst)
			}
			a, _, err := ac.Apps.Get(ctx, "")
			if err != nil || a.GetID() != w.app.ID {
				t.Errorf("get app: %v %+v", err, a)
			}
			if _, err := tr.Token(ctx); err != nil {
				t.Errorf("installation token: %v", err)
			}
		})
	}
}

func groupNames(gs []*gh.RunnerGroup) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.GetName())
	}
	return out
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// runnerLabelNames lists the names of r's labels, in order.
func runnerLabelNames(r *gh.Runner) []string {
	out := []string{}
	for _, l := range r.Labels {
		out = append(out, l.GetName())
	}
	return out
}
