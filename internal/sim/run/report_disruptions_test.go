package run

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// TestDisruptionsReport measures a small history, told by the records alone: five runs,
// a drain that evicted one busy runner and outwaited another (killed at the bound), a
// spot reclaim, a kubelet eviction, an OOM kill and a step failure; re-runs by GitHub's
// attempts, one of them a second re-run of a job killed once.
func TestDisruptionsReport(t *testing.T) {
	exec := func(id, run int64, key string, attempt int, done float64, concl string) simgithub.Job {
		j := job(id, 0, 1, done, concl)
		j.RunID, j.Key, j.RunAttempt = run, key, attempt
		return j
	}
	jobs := []simgithub.Job{
		exec(1, 100, "lint", 1, 50, "success"),
		exec(2, 100, "unit", 1, 70, "failure"), // evicted by the drain at 10
		exec(3, 100, "unit", 2, 120, "success"),
		exec(4, 200, "unit", 1, 80, "failure"), // its node reclaimed at 15; never re-run
		exec(5, 200, "lint", 1, 30, "failure"), // its steps failed
		exec(6, 300, "unit", 1, 85, "failure"), // evicted by the kubelet at 20
		exec(7, 300, "unit", 2, 100, "failure"),
		exec(8, 300, "unit", 3, 130, "success"),
		exec(9, 400, "build", 1, 90, "failure"), // OOM-killed at 25
		exec(10, 400, "build", 2, 140, "success"),
		exec(11, 500, "e2e", 1, 95, "failure"), // killed at 30 while the drain waited for it
	}
	attempt := func(n int, how string, started float64, requested ...int64) simgithub.Attempt {
		return simgithub.Attempt{Number: n, How: how, StartedAt: at(started), Requested: requested}
	}
	runs := []simgithub.RunView{
		{ID: 100, Status: "completed", Conclusion: "success", Attempts: []simgithub.Attempt{attempt(1, "", 0), attempt(2, simgithub.HowRerunJob, 80, 2)}},
		{ID: 200, Status: "completed", Conclusion: "failure", Attempts: []simgithub.Attempt{attempt(1, "", 0)}},
		{ID: 300, Status: "completed", Conclusion: "success", Attempts: []simgithub.Attempt{
			attempt(1, "", 0), attempt(2, simgithub.HowRerunJob, 90, 6), attempt(3, simgithub.HowRerunJob, 110, 7)}},
		{ID: 400, Status: "completed", Conclusion: "success", Attempts: []simgithub.Attempt{attempt(1, "", 0), attempt(2, simgithub.HowRerunJob, 100, 9)}},
		{ID: 500, Status: "completed", Conclusion: "failure", Attempts: []simgithub.Attempt{attempt(1, "", 0)}},
	}
	ev := func(kind, pod, node, cause string, s float64, job int64) agent.Event {
		return agent.Event{Kind: kind, Pod: pod, Node: node, Cause: cause, At: at(s), Job: job}
	}
	events := []agent.Event{
		// Its pod deleted by the drain's eviction, seen a little before the drain read
		// the eviction's answer.
		ev(agent.EventKilled, "p2", "n1", agent.CausePodDeleted, 9.9, 2),
		ev(agent.EventKilled, "p4", "n2", agent.CauseNodeLost, 15, 4),
		ev(agent.EventJobCompleted, "p5", "n3", "", 30, 5),
		ev(agent.EventKilled, "p6", "n3", agent.CauseEvicted, 20, 6),
		ev(agent.EventKilled, "p9", "n3", agent.CauseOOMKilled, 25, 9),
		ev(agent.EventKilled, "p11", "n1", agent.CausePodDeleted, 30, 11),
		ev(agent.EventKilled, "p12", "n3", agent.CauseStopped, 200, 12), // the run's end: no one's kill
	}
	in := reportInputs{start: t0, jobs: jobs, events: events, disruptions: disruptionInputs{
		runs: runs,
		drains: []drainRecord{{
			DrainRecord: cluster.DrainRecord{Node: "n1", Started: at(9), Finished: at(40), Pods: []cluster.DrainedPod{
				{Name: "p2", Evicted: at(10), Gone: at(10.5)}, {Name: "p11", Refused: 3, Gone: at(30)}}},
			RunnerPods: []string{"p2", "p11"}, Busy: map[string]int64{"p2": 2, "p11": 11},
		}},
		reclaims: []reclaimRecord{{Node: "n2", At: at(15), Pods: []string{"p4"}, Busy: map[string]int64{"p4": 4}}},
		kills: []podKillRecord{
			{Kind: fault.KindKubeletEviction, Pod: "p6", Node: "n3", Job: 6, At: at(20)},
			{Kind: fault.KindOOMKill, Pod: "p9", Node: "n3", Job: 9, At: at(25)},
		},
	}}
	sc := Scenario{Name: "d", Faults: &fault.Schedule{Steps: []fault.Step{{Drain: &fault.Drain{}}}}}
	r := disruptionsReport(sc, in)

	want := &DisruptionsReport{
		BusyRunnersKilledVoluntarily: 1, BusyRunnersKilledAtDrainBound: 1,
		JobsKilled:      map[string]int{KillDrain: 1, KillDrainBound: 1, KillSpotReclaim: 1, KillKubeletEviction: 1},
		JobsKilledTotal: 4, JobsRerun: 2, JobsRerunGreen: 2, JobsRerunTwice: 1,
		JobsFailedOnTheirOwn: 2, JobsFailedOnTheirOwnRerun: 1, CouldHaveBeenSaved: 2,
		FinalConclusions:   map[string]int{"success": 4, "failure": 3},
		Runs:               RunOutcomes{Total: 5, Green: 3, RedOnPurpose: 1, RedByInfrastructure: 1, Attempts: 9},
		KillToRerunSeconds: &Quantiles{P50: 70, P95: 70.1, P99: 70.1, Max: 70.1},
		Drains: []DrainOutcome{{Node: "n1", StartSeconds: 9, Seconds: 31, RunnerPods: 2, BusyRunners: 2,
			WaitedFor: []string{"p11"}, LongestBusyJobSeconds: 21, OverSeconds: 10}},
		// job 2 killed at 9.9, re-run at 80; job 6 at 20, re-run at 90.
	}
	if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(DisruptionsReport{}, "Kills", "KillToFailedSeconds")); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	var reasons []string
	for _, k := range r.Kills {
		reasons = append(reasons, k.Key+":"+k.Reason+":"+k.Final)
	}
	wantReasons := []string{"unit:drain:success", "unit:spot_reclaim:failure", "unit:kubelet_eviction:success",
		"build:oom_killed:success", "e2e:drain_bound:failure"}
	if diff := cmp.Diff(wantReasons, reasons); diff != "" {
		t.Errorf("kills (-want +got):\n%s", diff)
	}
	if s := r.summary(); !strings.Contains(s, "busy runners killed by a voluntary disruption 1") || !strings.Contains(s, "drain of n1") {
		t.Errorf("summary lacks the figures:\n%s", s)
	}
	if r.Clean() {
		t.Error("a drain killed a busy runner and a killed job was never re-run, yet the disruptions are clean")
	}
	var page strings.Builder
	if err := (&Report{Scenario: "d", Disruptions: r}).writeHTML(&page); err != nil {
		t.Fatalf("report.html: %v", err)
	}
	if h := page.String(); !strings.Contains(h, "<h2>Disruptions</h2>") || !strings.Contains(h, "<td>drain_bound</td>") {
		t.Errorf("report.html lacks the disruptions section or its kills")
	}
	clean := &DisruptionsReport{JobsKilledTotal: 3, JobsRerun: 3, JobsRerunGreen: 3, BusyRunnersKilledAtDrainBound: 1}
	if !clean.Clean() || !(*DisruptionsReport)(nil).Clean() {
		t.Error("every killed job green on its re-run, nothing killed by a drain: not clean")
	}
	// No disruption step: no section.
	if r := disruptionsReport(Scenario{Faults: &fault.Schedule{Steps: []fault.Step{{NodeLost: &fault.NodeLost{}}}}}, in); r != nil {
		t.Errorf("a schedule without disruptions got a disruptions report: %+v", r)
	}
}
