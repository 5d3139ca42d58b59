package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/run"
	"github.com/gantry-dev/gantry/internal/sim/trace"
	"github.com/gantry-dev/gantry/internal/testenv"
)

// asGantry, set in the environment of this test binary, makes it run as the gantry
// command: the end-to-end test starts "gantry controller" as this binary, so the
// controller under test is the code under test, built with the race detector.
const asGantry = "GANTRY_TEST_RUN_AS_GANTRY"

func TestMain(m *testing.M) {
	if os.Getenv(asGantry) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func dur(s string) simgithub.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return simgithub.Duration(d)
}

// simTestEnv is the repository's root, the Kubernetes binaries and this test binary,
// which runs as the gantry command (asGantry) for the controller and the oracle.
func simTestEnv(t *testing.T) (root, bins, exe string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if bins, err = testenv.AssetsDir(root); err != nil {
		t.Fatal(err)
	}
	if exe, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	return root, bins, exe
}

// runSim runs sc into a temporary directory within timeout, the controller and the
// oracle being this test binary, and returns the report, the directory and the
// progress it printed.
func runSim(t *testing.T, sc run.Scenario, timeout time.Duration) (*run.Report, string, *bytes.Buffer) {
	t.Helper()
	_, bins, exe := simTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := t.TempDir()
	var progress bytes.Buffer
	rep, err := run.Run(ctx, sc, run.Options{
		BinDir: bins, OutDir: out, Gantry: exe, GantryEnv: []string{asGantry + "=1"}, Out: &progress, Seed: 1,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	t.Logf("\n%s", rep.Summary())
	return rep, out, &progress
}

// TestSimRunReplaysATraceThroughFaults replays the sample trace four times faster
// while a short fault schedule plays every kind of fault: webhooks dropped, runner
// endpoints failing, a primary rate limit, the controller SIGKILLed and restarted, a
// node lost under busy runners. Nothing may be lost or left over, and no busy runner
// killed but those of the lost node. The controller writes its RunnerUsage events
// (--usage-events), which the run reads back as `gantry usage` does. About a minute
// and a half.
func TestSimRunReplaysATraceThroughFaults(t *testing.T) {
	root, _, _ := simTestEnv(t)
	f, err := os.Open(filepath.Join(root, "internal/sim/run/testdata/sample-trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Parse(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	sc := run.TraceScenario(tr, "sample-trace.jsonl", 4)
	sc.Nodes, sc.PodStartDelay = 3, 500*time.Millisecond
	sc.ResyncInterval = 10 * time.Second
	sc.NodeMonitorGracePeriod, sc.UnreachableToleration, sc.PodTerminationGracePeriod = 10*time.Second, 2*time.Second, time.Second
	sc.NodeLostTimeout, sc.FailedRunnerRetention, sc.RunnerLostTimeout = 5*time.Second, 5*time.Second, 10*time.Second
	sc.Timeout = 4 * time.Minute
	sc = run.WithUsageEvents(sc)
	sc.Faults = &fault.Schedule{Seed: 5, Steps: []fault.Step{
		{Name: "drop", At: dur("1s"), For: dur("8s"), WebhookDrop: &fault.WebhookDrop{Rate: 0.5}},
		{Name: "503", At: dur("3s"), For: dur("6s"), APIErrors: &fault.APIErrors{Rate: 0.5}},
		{Name: "primary", At: dur("9s"), For: dur("4s"), RateLimit: &fault.RateLimit{Kind: fault.RateLimitPrimary, Limit: 10}},
		{Name: "kill", At: dur("13s"), For: dur("2s"), ControllerKill: &fault.ControllerKill{}},
		{Name: "node", At: dur("17s"), NodeLost: &fault.NodeLost{}},
	}}
	rep, out, progress := runSim(t, sc, 6*time.Minute)
	defer func() {
		if t.Failed() {
			t.Logf("progress:\n%s", progress.String())
		}
	}()

	if !rep.Clean() {
		t.Errorf("the run did not end clean: finished %v, %d never picked up, %d unfinished, left over %+v, %d busy runners killed %+v",
			rep.Finished, rep.JobsNeverPickedUp, rep.JobsUnfinished, rep.Leftover, rep.BusyRunnersKilled, rep.BusyRunnerKills)
	}
	if rep.JobsTotal != len(tr.Jobs) || rep.Trace == nil || rep.Trace.Jobs != len(tr.Jobs) {
		t.Errorf("replayed %d jobs (trace section %+v), want the trace's %d", rep.JobsTotal, rep.Trace, len(tr.Jobs))
	}
	// --usage-events: `gantry usage` reads the cluster's RunnerUsage events, one per usage
	// log line (the killed controller may have logged one record and died before its
	// event).
	if u := rep.Usage; u == nil || !u.EventsWritten || u.EventsError != "" || u.Events == 0 || u.Events > u.Records || u.Events < u.Records-1 {
		t.Errorf("usage %+v: want as many RunnerUsage events as usage records, read back without error", u)
	} else if txt, err := os.ReadFile(filepath.Join(out, "usage.txt")); err != nil || !strings.Contains(string(txt), "RunnerUsage events") {
		t.Errorf("usage.txt: %v\n%s", err, txt)
	}
	fr := rep.Faults
	if fr == nil {
		t.Fatal("no faults section")
	}
	// The trace's own failures are what its jobs asked for; every other failure is a
	// job of a runner lost with its node.
	if rep.JobsFailed != fr.JobsFailedRunnerLost {
		t.Errorf("%d jobs failed, %d of them by the lost node: want no other failure", rep.JobsFailed, fr.JobsFailedRunnerLost)
	}
	if fr.JobsLost != 0 || fr.Leftover != 0 || fr.BusyRunnersKilled != 0 || fr.RecoverySeconds == nil {
		t.Errorf("faults: %d jobs lost, %d left over, %d busy runners killed, recovery %v; want 0, 0, 0 and a recovery",
			fr.JobsLost, fr.Leftover, fr.BusyRunnersKilled, fr.RecoverySeconds)
	}
	byName := map[string]fault.Injection{}
	for _, in := range fr.Injections {
		byName[in.Name] = in
		if !in.Injected || in.Error != "" {
			t.Errorf("step %s: injected %v, error %q", in.Name, in.Injected, in.Error)
		}
	}
	if byName["drop"].WebhooksDropped == 0 {
		t.Error("no webhook delivery dropped while half were to be")
	}
	if byName["503"].ErrorAnswers == 0 {
		t.Error("no runner call failed while half were to")
	}
	if k := byName["kill"]; k.KilledPID == 0 || k.StartedPID == 0 || k.StartedPID == k.KilledPID || rep.Controller.Processes != 2 {
		t.Errorf("controller_kill %+v, %d controller processes: want one killed, another started", k, rep.Controller.Processes)
	}
	if n := byName["node"]; n.Node == "" || n.PodsOnNode == 0 || n.RecoverySeconds == nil {
		t.Errorf("node_lost %+v: want a node with runner pods, recovered", n)
	}

	// report.json on disk is the report; the controller's log has no race.
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk run.Report
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk.Faults == nil || onDisk.JobsTotal != rep.JobsTotal {
		t.Errorf("report.json: %v, %d jobs", err, onDisk.JobsTotal)
	}
	logs, err := os.ReadFile(filepath.Join(out, "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logs), "DATA RACE") {
		t.Error("the controller's log reports a data race")
	}
	for _, secret := range []string{"ghp_gantrysimulatedtoken", "gantry-sim-webhook-secret", "simr_"} {
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(logs, []byte(secret)) || strings.Contains(progress.String(), secret) {
			t.Errorf("a secret (%s…) appears in the report, the controller's log or the progress", secret[:8])
		}
	}
}

// TestSimRunMeasuresTheFloor runs a small burst and its floor: the oracle, a process
// of its own, serves the same jobs, and the report sets its latencies and its CPU per
// job beside Gantry's. About half a minute.
func TestSimRunMeasuresTheFloor(t *testing.T) {
	sc, err := run.Lookup("burst")
	if err != nil {
		t.Fatal(err)
	}
	sc.Burst, sc.MaxRunners, sc.Nodes, sc.JobDuration, sc.Timeout = 30, 40, 3, 2*time.Second, 3*time.Minute
	rep, _, _ := runSim(t, sc, 5*time.Minute)
	fl := rep.Floor
	if fl == nil {
		t.Fatal("no floor in the report")
	}
	if !fl.Finished || fl.Error != "" || fl.Errors != 0 || fl.JobsTotal != 30 || fl.JobsNeverPickedUp != 0 || !fl.CleanedUp {
		t.Errorf("floor: finished %v, %d errors (%q), %d jobs, %d never picked up, cleaned up %v; want 30 jobs served cleanly",
			fl.Finished, fl.Errors, fl.Error, fl.JobsTotal, fl.JobsNeverPickedUp, fl.CleanedUp)
	}
	if fl.CPUMsPerJob == nil || *fl.CPUMsPerJob <= 0 || fl.Ratio.CPUMsPerJob == nil || fl.Ratio.ReactionSeconds.P99 == nil {
		t.Errorf("floor CPU per job %v, ratios: CPU %v, reaction p99 %v; want all measured",
			fl.CPUMsPerJob, fl.Ratio.CPUMsPerJob, fl.Ratio.ReactionSeconds.P99)
	}
	if fig := run.FiguresOf(rep); fig.FloorCPUMsPerJob == nil || fig.FloorReactionP99 == nil {
		t.Errorf("figures: floor CPU %v, floor reaction %v; want both", fig.FloorCPUMsPerJob, fig.FloorReactionP99)
	}
}

func TestWithFaultsFillsRecoverySettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(path, []byte(`{"steps": [{"at": "5s", "node_lost": {}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sc, err := withFaults(run.Scenarios["burst"], path)
	if err != nil {
		t.Fatal(err)
	}
	ref := run.Scenarios["faults"]
	if sc.Faults == nil || len(sc.Faults.Steps) != 1 || sc.NodeLostTimeout != ref.NodeLostTimeout ||
		sc.FailedRunnerRetention != ref.FailedRunnerRetention || sc.RunnerLostTimeout != run.Scenarios["burst"].RunnerLostTimeout {
		t.Errorf("withFaults = %+v", sc)
	}
	if err := os.WriteFile(path, []byte(`{"steps": [{"at": "5s"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := withFaults(run.Scenarios["burst"], path); err == nil || !strings.Contains(err.Error(), "exactly one of") {
		t.Errorf("withFaults of an invalid schedule: %v", err)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"7d":                   now.AddDate(0, 0, -7),
		"36h":                  now.Add(-36 * time.Hour),
		"2026-03-01":           time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		"2026-03-01T10:00:00Z": time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
	} {
		got, err := parseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0d", "-1h", "last week", "7x"} {
		if _, err := parseSince(bad, now); err == nil {
			t.Errorf("parseSince(%q) accepted", bad)
		}
	}
}

func TestDemandSourceFlag(t *testing.T) {
	burst := run.Scenarios["burst"]
	for flag, want := range map[string]string{"": "burst", "Webhook": "burst", "ScaleSet": "burst-scaleset", "scaleset": "burst-scaleset"} {
		sc, err := withDemandSource(burst, flag)
		if err != nil || sc.Name != want {
			t.Errorf("--demand-source %q on burst: %s, %v; want %s", flag, sc.Name, err, want)
		}
	}
	if sc, _ := withDemandSource(burst, "ScaleSet"); sc.DemandSource != v1alpha1.DemandSourceScaleSet || sc.Description != run.Scenarios["burst-scaleset"].Description {
		t.Errorf("--demand-source ScaleSet on burst = %+v, want burst-scaleset", sc)
	}
	// An invalid value fails the command before anything starts.
	cmd := newSimRunCommand()
	cmd.SetArgs([]string{"--demand-source", "webhooks", "--out", t.TempDir(), "--k8s-bins", t.TempDir()})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), `--demand-source: unknown demand source "webhooks": want Webhook or ScaleSet`) {
		t.Errorf("gantry sim run --demand-source webhooks: %v", err)
	}
}
