package trace

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gogithub "github.com/google/go-github/v88/github"
	clocktesting "k8s.io/utils/clock/testing"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

const exportToken = "ghp_exporttesttoken000000000000000000000"

// exportWorld is the GitHub simulator on a fake clock with org acme and its repos.
type exportWorld struct {
	sim *simgithub.Sim
	srv *httptest.Server
	clk *clocktesting.FakeClock
}

func newExportWorld(t *testing.T) *exportWorld {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	sim := simgithub.New(simgithub.Options{Clock: clk, RateLimits: simgithub.RateLimits{Disabled: true},
		PATs: []simgithub.PAT{{Token: exportToken, Login: "exporter", Scopes: []string{"repo", "read:org"}}}})
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	for _, err := range []error{
		func() error { _, err := sim.CreateOrg(simgithub.OrgSpec{Login: "acme"}); return err }(),
		func() error { _, err := sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "app"}); return err }(),
		func() error { _, err := sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "lib"}); return err }(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return &exportWorld{sim: sim, srv: srv, clk: clk}
}

// run has a runner take job id after wait, run it for dur and complete it.
func (w *exportWorld) run(t *testing.T, name string, labels []string, id int64, wait, dur time.Duration, conclusion string) {
	t.Helper()
	cfg, err := w.sim.GenerateJITConfig(simgithub.JITSpec{Scope: "acme", Name: name, Labels: labels, GroupID: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.URL = w.srv.URL
	w.clk.Step(wait)
	c := runnerapi.NewClient(cfg, nil)
	j, err := c.NextJob(t.Context(), 0)
	if err != nil || j == nil || j.ID != id {
		t.Fatalf("runner %s got %+v, %v; want job %d", name, j, err, id)
	}
	if err := c.StartJob(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	w.clk.Step(dur)
	if err := c.CompleteJob(t.Context(), id, conclusion); err != nil {
		t.Fatal(err)
	}
}

func (w *exportWorld) client(t *testing.T) *gogithub.Client {
	t.Helper()
	base := w.srv.URL + "/api/v3/" // the GHES layout, as for a GHES host
	gh, err := gogithub.NewClient(gogithub.WithAuthToken(exportToken), gogithub.WithURLs(&base, nil))
	if err != nil {
		t.Fatal(err)
	}
	return gh
}

func TestExportFromTheSimulator(t *testing.T) {
	w := newExportWorld(t)
	sh := []string{"self-hosted", "linux"}

	// Before the window: not exported.
	old, _ := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/app", Labels: sh, Name: "old"})
	w.run(t, "r0", sh, old.ID, time.Second, time.Second, "")
	w.clk.Step(time.Hour)
	since := w.clk.Now()

	// A matrix of two in acme/app: picked up after 3 s and 5 s, running 10 s and 20 s.
	run, err := w.sim.QueueRun(simgithub.RunSpec{Repo: "acme/app", Workflow: "Tests", Matrix: 2,
		Template: simgithub.JobSpec{Labels: sh, Name: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	w.run(t, "r1", sh, run.Jobs[0].ID, 3*time.Second, 10*time.Second, "")
	w.run(t, "r2", sh, run.Jobs[1].ID, 2*time.Second, 20*time.Second, "failure")
	// acme/lib: one self-hosted job, one for a hosted runner, one still queued.
	libJob, _ := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/lib", Labels: sh, Name: "build", Workflow: "CI", Branch: "dev"})
	w.run(t, "r3", sh, libJob.ID, time.Second, 4*time.Second, "")
	hosted, _ := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/lib", Labels: []string{"ubuntu-latest"}, Name: "hosted"})
	w.run(t, "r4", []string{"ubuntu-latest"}, hosted.ID, time.Second, time.Second, "")
	if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/lib", Labels: sh, Name: "waiting"}); err != nil {
		t.Fatal(err)
	}

	tr, st, err := Export(t.Context(), w.client(t), ExportOptions{Org: "acme", Since: since, Until: w.clk.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	wantStats := ExportStats{Repos: 2, Runs: 4, Jobs: 5, Unfinished: 1, NotSelfHosted: 1}
	if diff := cmp.Diff(wantStats, st); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	runKey := RunKey("app#" + itoa(run.ID))
	want := []Job{
		{At: 0, Repo: "acme/app", Labels: sh, Duration: 10, Run: runKey, Workflow: "Tests", Name: "test (1)", Branch: "main", Pickup: secs(3)},
		{At: 0, Repo: "acme/app", Labels: sh, Duration: 20, Run: runKey, Workflow: "Tests", Name: "test (2)", Branch: "main", Conclusion: "failure", Pickup: secs(15)},
		{At: 35, Repo: "acme/lib", Labels: sh, Duration: 4, Run: RunKey("lib#" + itoa(libJob.RunID)), Workflow: "CI", Name: "build", Branch: "dev", Pickup: secs(1)},
	}
	if diff := cmp.Diff(want, tr.Jobs); diff != "" {
		t.Errorf("exported jobs (-want +got):\n%s", diff)
	}
	if tr.Header.Format != Format || tr.Header.Source != "https://github.com/acme" || tr.Header.Jobs != 3 || !tr.Header.Since.Equal(since) {
		t.Errorf("header %+v", tr.Header)
	}
}

func TestExportSplitsBusyWindows(t *testing.T) {
	old := maxRunsPerQuery
	maxRunsPerQuery = 1
	defer func() { maxRunsPerQuery = old }()
	w := newExportWorld(t)
	since := w.clk.Now()
	for i := range 3 {
		j, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/app", Labels: []string{"self-hosted"}})
		if err != nil {
			t.Fatal(err)
		}
		w.run(t, "r"+itoa(int64(i)), []string{"self-hosted", "linux"}, j.ID, time.Second, time.Second, "")
		w.clk.Step(10 * time.Minute)
	}
	tr, st, err := Export(t.Context(), w.client(t), ExportOptions{Org: "acme", Repos: []string{"app"}, Since: since, Until: w.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 3 || len(tr.Jobs) != 3 {
		t.Errorf("split windows found %d runs and %d jobs, want 3 and 3 (each once)", st.Runs, len(tr.Jobs))
	}
}

func TestExportRefusesAnEmptyWindow(t *testing.T) {
	now := time.Now()
	gh, err := gogithub.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Export(t.Context(), gh, ExportOptions{Org: "acme", Since: now, Until: now}); err == nil {
		t.Error("Export accepted since == until")
	}
	if _, _, err := Export(t.Context(), gh, ExportOptions{Since: now.Add(-time.Hour)}); err == nil {
		t.Error("Export accepted no organization")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
