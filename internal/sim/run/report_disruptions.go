// What the disruptions did to the jobs: the disruptions scenario's part of the report,
// measured from the simulator's jobs and runs (GitHub's record), the cluster's record of
// its drains, reclaims and kills (disruptions.go) and the runner agents' events — never
// from the controller's word.

package run

import (
	"fmt"
	"html/template"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Reasons a job was killed (JobKill.Reason). All but oom_killed are the
// infrastructure's; drain, consolidation are voluntary.
const (
	KillDrain           = "drain"
	KillConsolidation   = "consolidation"
	KillDrainBound      = "drain_bound"
	KillSpotReclaim     = "spot_reclaim"
	KillKubeletEviction = "kubelet_eviction"
	KillNodeLost        = "node_lost"
	KillOther           = "pod_deleted"
	KillOOM             = "oom_killed"
)

// DisruptionsReport is report.json's disruptions.
type DisruptionsReport struct {
	// BusyRunnersKilledVoluntarily are runners killed mid-job by the eviction of a drain
	// or a consolidation: an eviction the API server accepted while the runner ran a job.
	BusyRunnersKilledVoluntarily int `json:"busy_runners_killed_by_voluntary_disruption"`
	// BusyRunnersKilledAtDrainBound are runners killed mid-job while a drain waited for
	// them, not by its eviction: deleted at the pool's bound of the wait.
	BusyRunnersKilledAtDrainBound int `json:"busy_runners_killed_at_drain_bound"`
	// JobsKilled are the jobs the infrastructure killed, by reason (drain,
	// consolidation, drain_bound, spot_reclaim, kubelet_eviction, node_lost,
	// pod_deleted).
	JobsKilled      map[string]int `json:"jobs_killed_by_infrastructure"`
	JobsKilledTotal int            `json:"jobs_killed_by_infrastructure_total"`
	// JobsRerun: killed jobs a later attempt of their run re-ran (named them);
	// JobsRerunGreen those whose re-run succeeded; JobsRerunTwice the jobs of a run the
	// infrastructure killed that were re-run more often than it killed them.
	JobsRerun      int `json:"jobs_rerun"`
	JobsRerunGreen int `json:"jobs_rerun_green"`
	JobsRerunTwice int `json:"jobs_rerun_twice"`
	// JobsFailedOnTheirOwn: the runner reported failure (the steps failed) or the OOM
	// killer ended the runner container; JobsFailedOnTheirOwnRerun those re-run anyway.
	JobsFailedOnTheirOwn      int `json:"jobs_failed_on_their_own"`
	JobsFailedOnTheirOwnRerun int `json:"jobs_failed_on_their_own_rerun"`
	// CouldHaveBeenSaved: killed jobs never re-run, whose run GitHub would have
	// re-run (it completed, within its 50 re-runs): what a pool that has not opted in
	// to re-runs loses.
	CouldHaveBeenSaved int `json:"jobs_that_could_have_been_saved"`
	// FinalConclusions counts the latest execution of every job of every run.
	FinalConclusions map[string]int `json:"final_conclusions"`
	Runs             RunOutcomes    `json:"runs"`
	// KillToRerunSeconds: from the kill to the re-run that named the job;
	// KillToFailedSeconds: from the kill to GitHub failing the job (its runner's lease
	// running out, or the runner reporting it).
	KillToRerunSeconds  *Quantiles     `json:"kill_to_rerun_seconds,omitempty"`
	KillToFailedSeconds *Quantiles     `json:"kill_to_failed_seconds,omitempty"`
	Drains              []DrainOutcome `json:"drains"`
	Kills               []JobKill      `json:"kills"`
}

// Clean reports whether the disruptions cost nothing they should not: no busy runner
// killed by a drain or a consolidation, every job the infrastructure killed green on
// its one re-run, nothing re-run twice, no failure of a job's own re-run, every run
// completed. A nil report is clean.
func (r *DisruptionsReport) Clean() bool {
	return r == nil || (r.BusyRunnersKilledVoluntarily == 0 && r.JobsKilledTotal == r.JobsRerunGreen &&
		r.JobsRerunTwice == 0 && r.JobsFailedOnTheirOwnRerun == 0 && r.Runs.Unfinished == 0)
}

// RunOutcomes are the workflow runs' final conclusions: green, red only by failures of
// their own (on purpose), or red by the infrastructure.
type RunOutcomes struct {
	Total               int `json:"total"`
	Green               int `json:"green"`
	RedOnPurpose        int `json:"red_on_purpose"`
	RedByInfrastructure int `json:"red_by_infrastructure"`
	Unfinished          int `json:"unfinished"`
	// Attempts are the runs' attempts in all (a run's first counts).
	Attempts int `json:"attempts"`
}

// DrainOutcome is one drain or consolidation against the busy jobs on its node.
type DrainOutcome struct {
	Node          string   `json:"node"`
	Consolidation bool     `json:"consolidation,omitempty"`
	StartSeconds  float64  `json:"start_seconds"`
	Seconds       float64  `json:"seconds"`
	TimedOut      bool     `json:"timed_out,omitempty"`
	Error         string   `json:"error,omitempty"`
	RunnerPods    int      `json:"runner_pods"`
	BusyRunners   int      `json:"busy_runners"`
	WaitedFor     []string `json:"waited_for,omitempty"`
	// LongestBusyJobSeconds: from the drain's start to the end of the last job that was
	// running on the node then (its runner reported it, or died); OverSeconds: how long
	// the drain went on after that (after its start when no job ran).
	LongestBusyJobSeconds float64 `json:"longest_busy_job_seconds"`
	OverSeconds           float64 `json:"over_seconds"`
}

// JobKill is a job whose runner was killed mid-job.
type JobKill struct {
	Job    int64   `json:"job"`
	Run    int64   `json:"run"`
	Key    string  `json:"key"`
	Pod    string  `json:"pod"`
	Node   string  `json:"node"`
	Reason string  `json:"reason"`
	T      float64 `json:"t"`
	// RerunAfterSeconds: the re-run that named it, after the kill (nil: never);
	// Final is the conclusion of its job's latest execution.
	RerunAfterSeconds *float64 `json:"rerun_after_seconds,omitempty"`
	Final             string   `json:"final"`
}

// jobNode is a job of a run's workflow, which each attempt that runs it executes anew.
type jobNode struct {
	run int64
	key string
}

// disruptionInputs are the records the report reads.
type disruptionInputs struct {
	runs     []simgithub.RunView
	drains   []drainRecord
	reclaims []reclaimRecord
	kills    []podKillRecord
}

// disruptionsReport measures what the disruptions did; nil when the scenario has no
// disruption step.
func disruptionsReport(sc Scenario, in reportInputs) *DisruptionsReport {
	if sc.Faults == nil || !slices.ContainsFunc(sc.Faults.Steps, func(s fault.Step) bool {
		switch s.Kind() {
		case fault.KindDrain, fault.KindConsolidate, fault.KindSpotReclaim, fault.KindKubeletEviction, fault.KindOOMKill:
			return true
		}
		return false
	}) {
		return nil
	}
	d := in.disruptions
	r := &DisruptionsReport{JobsKilled: map[string]int{}, FinalConclusions: map[string]int{}}
	jobs := map[int64]simgithub.Job{}
	for _, j := range in.jobs {
		jobs[j.ID] = j
	}
	// Each job's run attempt that named it in a re-run, and the node's executions.
	rerunOf := map[int64]simgithub.Attempt{}
	requested := map[jobNode]int{}
	latest := map[jobNode]simgithub.Job{}
	for _, run := range d.runs {
		for _, a := range run.Attempts {
			for _, id := range a.Requested {
				rerunOf[id] = a
				requested[jobNode{run.ID, jobs[id].Key}]++
			}
		}
	}
	for _, j := range in.jobs {
		k := jobNode{j.RunID, j.Key}
		if l, ok := latest[k]; !ok || j.RunAttempt > l.RunAttempt {
			latest[k] = j
		}
	}

	kills := r.attributeKills(in, jobs)
	killed := map[jobNode]int{}
	var toRerun, toFailed []float64
	for i := range kills {
		k := &kills[i]
		j := jobs[k.Job]
		k.Run, k.Key = j.RunID, j.Key
		nk := jobNode{j.RunID, j.Key}
		k.Final = latest[nk].Conclusion
		at := in.start.Add(time.Duration(k.T * float64(time.Second)))
		if j.DoneAt != nil && j.DoneAt.After(at) {
			toFailed = append(toFailed, j.DoneAt.Sub(at).Seconds())
		}
		if k.Reason == KillOOM {
			r.JobsFailedOnTheirOwn++
			if _, again := rerunOf[k.Job]; again {
				r.JobsFailedOnTheirOwnRerun++
			}
			continue
		}
		killed[nk]++
		r.JobsKilled[k.Reason]++
		r.JobsKilledTotal++
		if a, again := rerunOf[k.Job]; again {
			r.JobsRerun++
			after := round1(a.StartedAt.Sub(at).Seconds())
			k.RerunAfterSeconds = &after
			toRerun = append(toRerun, after)
			if k.Final == simgithub.ConclusionSuccess {
				r.JobsRerunGreen++
			}
		} else if run, ok := runByID(d.runs, j.RunID); ok && run.Status == simgithub.StatusCompleted && len(run.Attempts) <= maxRunAttemptsToRerun {
			r.CouldHaveBeenSaved++
		}
	}
	r.Kills = kills
	for nk, n := range requested {
		if killed[nk] > 0 && n > killed[nk] {
			r.JobsRerunTwice++
		}
	}
	// Failures of their own the runners reported (their steps failed).
	for _, e := range in.events {
		if e.Kind != agent.EventJobCompleted {
			continue
		}
		if j := jobs[e.Job]; j.Conclusion == simgithub.ConclusionFailure {
			r.JobsFailedOnTheirOwn++
			if _, again := rerunOf[j.ID]; again {
				r.JobsFailedOnTheirOwnRerun++
			}
		}
	}
	if len(toRerun) > 0 {
		q := quantiles(toRerun)
		r.KillToRerunSeconds = &q
	}
	if len(toFailed) > 0 {
		q := quantiles(toFailed)
		r.KillToFailedSeconds = &q
	}
	r.runOutcomes(d.runs, latest, kills)
	for _, j := range latest {
		if j.Status == simgithub.StatusCompleted {
			r.FinalConclusions[j.Conclusion]++
		} else {
			r.FinalConclusions[j.Status]++
		}
	}
	r.Drains = drainOutcomes(d.drains, in.events, in.start)
	return r
}

// maxRunAttemptsToRerun: GitHub re-runs a run at most 50 times, so one of 51 attempts
// is not re-run again.
const maxRunAttemptsToRerun = 50

func runByID(runs []simgithub.RunView, id int64) (simgithub.RunView, bool) {
	i := sort.Search(len(runs), func(i int) bool { return runs[i].ID >= id })
	if i < len(runs) && runs[i].ID == id {
		return runs[i], true
	}
	return simgithub.RunView{}, false
}

// attributeKills gives each runner killed mid-job its reason, from the records of the
// disruption that killed it, and counts the busy runners a voluntary disruption killed.
func (r *DisruptionsReport) attributeKills(in reportInputs, jobs map[int64]simgithub.Job) []JobKill {
	d := in.disruptions
	type drained struct {
		rec *drainRecord
		pod cluster.DrainedPod
	}
	inDrain := map[string]drained{}
	for i := range d.drains {
		rec := &d.drains[i]
		for _, p := range rec.Pods {
			inDrain[p.Name] = drained{rec: rec, pod: p}
		}
	}
	reclaimed := map[string]bool{}
	for _, rc := range d.reclaims {
		for _, p := range rc.Pods {
			reclaimed[p] = true
		}
	}
	killedBy := map[string]string{}
	for _, k := range d.kills {
		killedBy[k.Pod] = k.Kind
	}
	lostAt := map[string]bool{}
	for _, inj := range in.injections {
		if inj.Kind == fault.KindNodeLost && inj.Node != "" {
			lostAt[inj.Node] = true
		}
	}
	var out []JobKill
	for _, e := range in.events {
		if e.Kind != agent.EventKilled || e.Job == 0 || e.Cause == agent.CauseStopped {
			continue
		}
		if _, ok := jobs[e.Job]; !ok {
			continue
		}
		k := JobKill{Job: e.Job, Pod: e.Pod, Node: e.Node, T: round1(e.At.Sub(in.start).Seconds())}
		switch {
		case e.Cause == agent.CauseOOMKilled:
			k.Reason = KillOOM
		case e.Cause == agent.CauseEvicted || killedBy[e.Pod] == fault.KindKubeletEviction:
			k.Reason = KillKubeletEviction
		case reclaimed[e.Pod]:
			k.Reason = KillSpotReclaim
		case e.Cause == agent.CauseNodeLost || lostAt[e.Node]:
			k.Reason = KillNodeLost
		default:
			// The drain's accepted eviction deleted the pod (the runner may see its pod
			// deleted before the drain reads the answer); a pod that went while its
			// evictions were refused was deleted by someone else: at the pool's bound.
			dr, ok := inDrain[e.Pod]
			switch {
			case ok && !dr.pod.Evicted.IsZero():
				k.Reason = KillDrain
				if dr.rec.Consolidation {
					k.Reason = KillConsolidation
				}
				r.BusyRunnersKilledVoluntarily++
			case ok && dr.pod.Refused > 0:
				k.Reason = KillDrainBound
				r.BusyRunnersKilledAtDrainBound++
			default:
				k.Reason = KillOther
			}
		}
		out = append(out, k)
	}
	return out
}

// runOutcomes sorts the runs by final conclusion: red on purpose when a job failed on
// its own (its runner reported failure, or was OOM-killed), red by the infrastructure
// otherwise.
func (r *DisruptionsReport) runOutcomes(runs []simgithub.RunView, latest map[jobNode]simgithub.Job, kills []JobKill) {
	oom := map[int64]bool{}
	for _, k := range kills {
		if k.Reason == KillOOM {
			oom[k.Job] = true
		}
	}
	killed := map[int64]bool{}
	for _, k := range kills {
		if k.Reason != KillOOM {
			killed[k.Job] = true
		}
	}
	for _, run := range runs {
		r.Runs.Total++
		r.Runs.Attempts += len(run.Attempts)
		switch {
		case run.Status != simgithub.StatusCompleted:
			r.Runs.Unfinished++
			continue
		case run.Conclusion == simgithub.ConclusionSuccess:
			r.Runs.Green++
			continue
		}
		onPurpose := false
		for nk, j := range latest {
			if nk.run == run.ID && j.Conclusion == simgithub.ConclusionFailure && (oom[j.ID] || !killed[j.ID]) {
				onPurpose = true
			}
		}
		if onPurpose {
			r.Runs.RedOnPurpose++
		} else {
			r.Runs.RedByInfrastructure++
		}
	}
}

// drainOutcomes set each drain against the jobs that ran on its node when it started.
func drainOutcomes(drains []drainRecord, events []agent.Event, start time.Time) []DrainOutcome {
	// When each runner pod's job ended: its runner reported it, or died.
	ended := map[string]time.Time{}
	for _, e := range events {
		if (e.Kind == agent.EventJobCompleted || (e.Kind == agent.EventKilled && e.Job != 0)) && e.At.After(ended[e.Pod]) {
			ended[e.Pod] = e.At
		}
	}
	var out []DrainOutcome
	for _, d := range drains {
		o := DrainOutcome{Node: d.Node, Consolidation: d.Consolidation, StartSeconds: round1(d.Started.Sub(start).Seconds()),
			Seconds: round1(d.Finished.Sub(d.Started).Seconds()), TimedOut: d.TimedOut, Error: d.Error,
			RunnerPods: len(d.RunnerPods), BusyRunners: len(d.Busy)}
		last := d.Started
		for pod := range d.Busy {
			if t := ended[pod]; t.After(last) {
				last = t
			}
		}
		for _, p := range d.WaitedFor() {
			if slices.Contains(d.RunnerPods, p) {
				o.WaitedFor = append(o.WaitedFor, p)
			}
		}
		o.LongestBusyJobSeconds = round1(last.Sub(d.Started).Seconds())
		o.OverSeconds = round1(d.Finished.Sub(last).Seconds())
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartSeconds < out[j].StartSeconds })
	return out
}

// summary is the disruptions' lines of the printed summary.
func (r *DisruptionsReport) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  disruptions: busy runners killed by a voluntary disruption %d (and %d at the drain bound); jobs killed by the infrastructure %d (%s)\n",
		r.BusyRunnersKilledVoluntarily, r.BusyRunnersKilledAtDrainBound, r.JobsKilledTotal, formatCounts(toInt64(r.JobsKilled)))
	fmt.Fprintf(&b, "    re-run %d (green %d), re-run twice %d; failed on their own %d, of which re-run %d; could have been saved %d\n",
		r.JobsRerun, r.JobsRerunGreen, r.JobsRerunTwice, r.JobsFailedOnTheirOwn, r.JobsFailedOnTheirOwnRerun, r.CouldHaveBeenSaved)
	fmt.Fprintf(&b, "    runs: %d, green %d, red on purpose %d, red by the infrastructure %d, unfinished %d (%d attempts); final conclusions %s\n",
		r.Runs.Total, r.Runs.Green, r.Runs.RedOnPurpose, r.Runs.RedByInfrastructure, r.Runs.Unfinished, r.Runs.Attempts, formatCounts(toInt64(r.FinalConclusions)))
	if q := r.KillToFailedSeconds; q != nil {
		fmt.Fprintf(&b, "    kill → GitHub failed the job: p50 %.1fs max %.1fs", q.P50, q.Max)
		if q := r.KillToRerunSeconds; q != nil {
			fmt.Fprintf(&b, "; kill → re-run: p50 %.1fs max %.1fs", q.P50, q.Max)
		}
		b.WriteString("\n")
	}
	for _, d := range r.Drains {
		what := "drain"
		if d.Consolidation {
			what = "consolidation"
		}
		fmt.Fprintf(&b, "    %s of %s at %.0fs: %.1fs, %d runner pods, %d busy (longest job %.1fs, drain %.1fs after it), waited for %d%s\n",
			what, d.Node, d.StartSeconds, d.Seconds, d.RunnerPods, d.BusyRunners, d.LongestBusyJobSeconds, d.OverSeconds, len(d.WaitedFor), map[bool]string{true: ", TIMED OUT"}[d.TimedOut])
	}
	return b.String()
}

func toInt64(m map[string]int) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
}

// The report.html section, a template of htmlReport's.
var _ = template.Must(htmlReport.New("disruptions").Parse(`<h2>Disruptions</h2>
<p>Measured from GitHub's record (the simulator's jobs and runs), the cluster's (its drains, reclaims and kills) and the runners' — not from the controller.</p>
<table>
<tr><th>busy runners killed by a voluntary disruption</th><td class="n">{{.BusyRunnersKilledVoluntarily}}</td><td>an eviction of a drain or a consolidation accepted while the runner ran a job ({{.BusyRunnersKilledAtDrainBound}} more killed at the drain bound)</td></tr>
<tr><th>jobs killed by the infrastructure</th><td class="n">{{.JobsKilledTotal}}</td><td>{{range $k, $v := .JobsKilled}}{{$k}} {{$v}}; {{end}}</td></tr>
<tr><th>re-run</th><td class="n">{{.JobsRerun}}</td><td>{{.JobsRerunGreen}} green on their re-run; {{.JobsRerunTwice}} re-run twice</td></tr>
<tr><th>failed on their own</th><td class="n">{{.JobsFailedOnTheirOwn}}</td><td>steps failed or the runner container OOM-killed; {{.JobsFailedOnTheirOwnRerun}} re-run</td></tr>
<tr><th>could have been saved</th><td class="n">{{.CouldHaveBeenSaved}}</td><td>killed by the infrastructure, never re-run, in a run GitHub would re-run</td></tr>
<tr><th>runs</th><td class="n">{{.Runs.Total}}</td><td>green {{.Runs.Green}}, red on purpose {{.Runs.RedOnPurpose}}, red by the infrastructure {{.Runs.RedByInfrastructure}}, unfinished {{.Runs.Unfinished}}; {{.Runs.Attempts}} attempts</td></tr>
<tr><th>final conclusions</th><td></td><td>{{range $k, $v := .FinalConclusions}}{{$k}} {{$v}}; {{end}}</td></tr>
{{with .KillToFailedSeconds}}<tr><th>kill → GitHub failed the job (s)</th><td class="n">{{.P50}} / {{.Max}}</td><td>p50 / max</td></tr>{{end}}
{{with .KillToRerunSeconds}}<tr><th>kill → re-run (s)</th><td class="n">{{.P50}} / {{.Max}}</td><td>p50 / max</td></tr>{{end}}
</table>
{{if .Drains}}<table><tr><th>drain</th><th>node</th><th>at (s)</th><th>took (s)</th><th>runner pods</th><th>busy</th><th>longest busy job (s)</th><th>after it (s)</th><th>waited for</th></tr>
{{range .Drains}}<tr><td>{{if .Consolidation}}consolidation{{else}}drain{{end}}{{if .TimedOut}} (timed out){{end}}</td><td>{{.Node}}</td><td class="n">{{.StartSeconds}}</td><td class="n">{{.Seconds}}</td><td class="n">{{.RunnerPods}}</td><td class="n">{{.BusyRunners}}</td><td class="n">{{.LongestBusyJobSeconds}}</td><td class="n">{{.OverSeconds}}</td><td>{{len .WaitedFor}}</td></tr>
{{end}}</table>{{end}}
{{if .Kills}}<table><tr><th>job</th><th>key</th><th>reason</th><th>at (s)</th><th>node</th><th>re-run after (s)</th><th>final</th></tr>
{{range .Kills}}<tr><td>{{.Job}}</td><td>{{.Key}}</td><td>{{.Reason}}</td><td class="n">{{.T}}</td><td>{{.Node}}</td><td class="n">{{if .RerunAfterSeconds}}{{.RerunAfterSeconds}}{{else}}—{{end}}</td><td>{{.Final}}</td></tr>
{{end}}</table>{{end}}`))
