package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/sim/trace"
)

// export-trace reads the simulator as it would read GitHub, and never prints its token.
func TestExportTraceCommand(t *testing.T) {
	const token = "ghp_exportcommandtesttoken0000000000000"
	sim := simgithub.New(simgithub.Options{RateLimits: simgithub.RateLimits{Disabled: true},
		PATs: []simgithub.PAT{{Token: token, Login: "exporter", Scopes: []string{"repo"}}}})
	defer sim.Close()
	srv := httptest.NewServer(sim)
	defer srv.Close()
	if _, err := sim.CreateOrg(simgithub.OrgSpec{Login: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "app"}); err != nil {
		t.Fatal(err)
	}
	job, err := sim.QueueJob(simgithub.JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux"}, Name: "build"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sim.GenerateJITConfig(simgithub.JITSpec{Scope: "acme", Name: "r1", Labels: []string{"self-hosted", "linux"}, GroupID: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.URL = srv.URL
	if _, err := runnerapi.NewClient(cfg, nil).Run(t.Context(), runnerapi.RunOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Setenv("GITHUB_TOKEN", token)
	out := filepath.Join(t.TempDir(), "trace.jsonl")
	cmd := newSimExportTraceCommand()
	var stderr bytes.Buffer
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--org", "acme", "--since", "1h", "--api-url", srv.URL, "--out", out})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("export-trace: %v\n%s", err, stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != 1 || tr.Jobs[0].Name != "build" || tr.Jobs[0].Repo != "acme/app" || tr.Header.Source != "https://github.com/acme" {
		t.Errorf("exported %+v, want job %d (build of acme/app)", tr, job.ID)
	}
	if !strings.Contains(stderr.String(), "1 written") {
		t.Errorf("summary %q lacks the count written", stderr.String())
	}
	data, _ := os.ReadFile(out)
	if strings.Contains(stderr.String()+string(data), token) {
		t.Error("the token appears in the output")
	}

	t.Setenv("GITHUB_TOKEN", "")
	cmd = newSimExportTraceCommand()
	cmd.SetArgs([]string{"--org", "acme"})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Errorf("without a token: %v, want an error naming GITHUB_TOKEN", err)
	}
}
