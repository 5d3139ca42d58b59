package run

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/usage"
)

// usageRec is a record of a runner pod alive from s to e seconds after t0, of repo
// (empty: no job), requesting one core.
func usageRec(runner, repo, workflow string, s, e float64) usage.Record {
	return usage.Record{Version: 1, Namespace: "ci", Pool: "linux", Runner: runner, Repository: repo, Workflow: workflow,
		PodCreatedAt: at(s), EndedAt: at(e), RunnerSeconds: e - s, CPURequestCores: 1, RequestedCPUSeconds: e - s, RequestedMemoryGiBSeconds: 2 * (e - s)}
}

// The controller's log holds the usage records among its other lines and the run's
// markers between processes: a log pipeline's reading finds each record once.
func TestReadUsageLog(t *testing.T) {
	recs := []usage.Record{usageRec("linux-a", "acme/web", "CI", 0, 20), usageRec("linux-b", "", "", 1, 5)}
	var lines []string
	lines = append(lines, "--- gantry sim: starting the controller at 2026-03-10T12:00:00Z")
	lines = append(lines, `{"level":"info","msg":"Starting workers","controller":"runner"}`)
	for _, r := range recs {
		b, err := json.Marshal(map[string]any{"level": "info", "msg": usage.LogMessage, "controller": "runner", usage.LogKey: r})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b), `{"level":"info","msg":"Runner removed"}`)
	}
	path := filepath.Join(t.TempDir(), "controller.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readUsageLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(recs, got); d != "" {
		t.Errorf("readUsageLog (-want +got):\n%s", d)
	}
}

// The run's own total counts every runner pod the agents saw, from its creation to its
// runner's exit, else to its kill, else to its deletion; the agents' own shutdown and
// the workflow pods' events are no end of a runner pod.
func TestRunnerPodSeconds(t *testing.T) {
	ev := func(pod, kind string, s float64) agent.Event { return agent.Event{Pod: pod, Kind: kind, At: at(s)} }
	events := []agent.Event{
		ev("exited", agent.EventCreated, 0), ev("exited", agent.EventRunning, 1), ev("exited", agent.EventExited, 20), ev("exited", agent.EventDeleted, 21),
		ev("killed", agent.EventCreated, 2), {Pod: "killed", Kind: agent.EventKilled, Cause: agent.CausePodDeleted, At: at(12)}, ev("killed", agent.EventDeleted, 13),
		ev("pending", agent.EventCreated, 3), ev("pending", agent.EventDeleted, 8),
		ev("left", agent.EventCreated, 4), {Pod: "left", Kind: agent.EventKilled, Cause: agent.CauseStopped, At: at(100)},
		ev("exited", agent.EventWorkflowPodCreated, 5), ev("exited", agent.EventWorkflowPodDeleted, 19),
	}
	total, pods := runnerPodSeconds(events)
	if total != 20+10+5 || pods != 3 {
		t.Errorf("runnerPodSeconds = %v s over %d pods, want 35 s over 3 (the pod left over is not counted)", total, pods)
	}
}

// The report sums the records by repository and workflow, sets them beside the run's
// own total (the difference in percent), and counts the pods alive per repository at
// each step for the chart.
func TestUsageReport(t *testing.T) {
	recs := []usage.Record{
		usageRec("linux-a", "acme/web", "CI", 0, 20), usageRec("linux-b", "acme/web", "E2E", 2, 42),
		usageRec("linux-c", "acme/api", "CI", 5, 15), usageRec("linux-d", "", "", 1, 4),
	}
	var events []agent.Event
	for _, r := range recs {
		// The agents saw each pod 0.2 s after its creation and its runner exit 0.1 s
		// before the record's end: the run's total is 0.3 s shorter per pod.
		events = append(events,
			agent.Event{Pod: r.Runner, Kind: agent.EventCreated, At: r.PodCreatedAt.Add(200 * time.Millisecond)},
			agent.Event{Pod: r.Runner, Kind: agent.EventExited, At: r.EndedAt.Add(-100 * time.Millisecond)})
	}
	u := usageReport(usageInputs{records: recs, events: 4}, events, t0)
	if u.Records != 4 || u.Jobs != 3 || u.RunnerSeconds != 73 || u.RequestedCPUSeconds != 73 || u.RequestedMemoryGiBSeconds != 146 || u.Events != 4 {
		t.Errorf("sums = %+v", u)
	}
	if u.RunnerPods != 4 || u.RunTotalRunnerSeconds != 71.8 {
		t.Errorf("the run's total = %v s over %d pods, want 71.8 s over 4", u.RunTotalRunnerSeconds, u.RunnerPods)
	}
	if want := math.Round((73-71.8)/71.8*100*100) / 100; u.DifferencePercent == nil || *u.DifferencePercent != want {
		t.Errorf("difference = %v %%, want %v", u.DifferencePercent, want)
	}
	if got := []string{u.Repositories[0].Repository, u.Repositories[1].Repository, u.Repositories[2].Repository}; !cmp.Equal(got, []string{"acme/web", "acme/api", usage.None}) {
		t.Errorf("repositories by runner-seconds: %v", got)
	}
	ot := u.OverTime
	if ot == nil || ot.Step != 1 {
		t.Fatalf("over time = %+v, want a step of 1 s", ot)
	}
	alive := map[string]float64{}
	for _, s := range ot.Series {
		alive[s.Repository] = s.Runners[10] // 10 s in: linux-a and -b of web, linux-c of api
	}
	if d := cmp.Diff(map[string]float64{"acme/web": 2, "acme/api": 1, usage.None: 0}, alive); d != "" {
		t.Errorf("runner pods alive at 10 s (-want +got):\n%s", d)
	}
	if c := usageChart(u); c == nil || len(c.Areas) != 3 || len(c.Legend) != 3 {
		t.Errorf("the chart has %v layers, want one per series", c)
	}
}

// The organization's jobs come from its repositories and workflows by weight, each
// workflow's job running its scale of the mean, and the mean job the scenario's
// JobDuration: the load is the scenario's, spread as an organization's.
func TestOrgDraws(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	repos := map[string]int{}
	var total time.Duration
	for i := range n {
		j := AcmeOrg.draw(rng, 20*time.Second, i)
		repos[j.repo]++
		total += j.duration
	}
	if mean := total / n; mean < 19*time.Second || mean > 21*time.Second {
		t.Errorf("mean job duration %s, want about 20s", mean)
	}
	if len(repos) != 8 || repos["web"] < repos["api"] || repos["api"] < repos["design-system"] {
		t.Errorf("jobs by repository %v: want all 8, the busiest first", repos)
	}
	if got := repoNames(Scenarios["steady"]); len(got) != 8 || got[0] != "web" {
		t.Errorf("steady's repositories %v, want the organization's 8", got)
	}
}
