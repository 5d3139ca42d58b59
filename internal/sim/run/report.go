package run

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/version"
)

// SchemaVersion is report.json's schema version; docs/sim.md documents the fields.
// Version 2 added jobs_failed, jobs_unfinished, pool_reaction_seconds,
// kube_api_writes_per_job, cpu_seconds_by_process, busy_runner_kills, faults, trace, host
// and controller.processes, and made busy_runners_killed count runner processes killed
// mid-job.
const SchemaVersion = 2

// Quantiles summarize a latency distribution, in seconds.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Leftover counts what a run left behind after draining.
type Leftover struct {
	Runners       int `json:"runners"`
	Pods          int `json:"pods"`
	Secrets       int `json:"secrets"`
	GitHubRunners int `json:"github_runners"`
}

// Total is everything left over.
func (l Leftover) Total() int { return l.Runners + l.Pods + l.Secrets + l.GitHubRunners }

// Controller is the resource use of the controller's processes (more than one when
// a fault killed it), from the kernel's accounting when each exited.
type Controller struct {
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	Processes    int     `json:"processes"`
	// KubeAPIRequests are its requests to the kube-apiserver by HTTP method (watches
	// included), read from its metrics just before each process was stopped.
	KubeAPIRequests map[string]int64 `json:"kube_api_requests,omitempty"`
}

// Host is the machine a run shared its cores with.
type Host struct {
	CPUs         int        `json:"cpus"`
	LoadAvgStart [3]float64 `json:"load_avg_start"`
	LoadAvgEnd   [3]float64 `json:"load_avg_end"`
	GoVersion    string     `json:"go_version"`
	Gantry       string     `json:"gantry"`
}

// BusyRunnerKill is a runner process that died while it ran a job.
type BusyRunnerKill struct {
	Pod  string  `json:"pod"`
	Job  int64   `json:"job"`
	Node string  `json:"node"`
	T    float64 `json:"t"`
	// Cause is pod-deleted (counted in busy_runners_killed) or node-lost (a fault).
	Cause string `json:"cause"`
}

// FaultsReport is what a fault schedule did and what it cost.
type FaultsReport struct {
	Injections []fault.Injection `json:"injections"`
	// JobsLost: jobs never picked up or never completed.
	JobsLost int `json:"jobs_lost"`
	// JobsFailedRunnerLost: jobs GitHub failed because their runner went silent —
	// the runners of a lost node.
	JobsFailedRunnerLost int `json:"jobs_failed_runner_lost"`
	// BusyRunnersLostWithNode: runner processes killed mid-job by a node loss.
	BusyRunnersLostWithNode int `json:"busy_runners_lost_with_node"`
	BusyRunnersKilled       int `json:"busy_runners_killed"`
	Leftover                int `json:"leftover"`
	// RecoverySeconds is the longest recovery of the injections; nil if one never
	// recovered.
	RecoverySeconds *float64 `json:"recovery_seconds"`
}

// TraceReport describes a replayed trace.
type TraceReport struct {
	File  string  `json:"file"`
	Jobs  int     `json:"jobs"`
	Speed float64 `json:"speed"`
	// RecordedPickupSeconds are the pickup latencies the trace recorded (real time,
	// not divided by speed), to set beside pickup_seconds.
	RecordedPickupSeconds *Quantiles `json:"recorded_pickup_seconds,omitempty"`
}

// Report is report.json.
type Report struct {
	SchemaVersion      int                `json:"schema_version"`
	Scenario           string             `json:"scenario"`
	Description        string             `json:"description"`
	StartedAt          time.Time          `json:"started_at"`
	Finished           bool               `json:"finished"`
	JobsTotal          int                `json:"jobs_total"`
	JobsNeverPickedUp  int                `json:"jobs_never_picked_up"`
	JobsUnfinished     int                `json:"jobs_unfinished"`
	JobsFailed         int                `json:"jobs_failed"`
	PickupSeconds      Quantiles          `json:"pickup_seconds"`
	ReactionSeconds    Quantiles          `json:"reaction_seconds"`
	PoolReaction       Quantiles          `json:"pool_reaction_seconds"`
	DrainSeconds       float64            `json:"drain_seconds"`
	Drained            bool               `json:"drained"`
	RunnersCreated     int                `json:"runners_created"`
	IdleRunnerSeconds  float64            `json:"idle_runner_seconds"`
	RESTCallsPerJob    float64            `json:"rest_calls_per_job"`
	RESTCallsByRoute   map[string]int64   `json:"rest_calls_by_endpoint"`
	KubeWritesPerJob   float64            `json:"kube_api_writes_per_job"`
	Leftover           Leftover           `json:"leftover"`
	BusyRunnersKilled  int                `json:"busy_runners_killed"`
	BusyRunnerKills    []BusyRunnerKill   `json:"busy_runner_kills,omitempty"`
	Controller         Controller         `json:"controller"`
	CPUSeconds         map[string]float64 `json:"cpu_seconds_by_process"`
	Faults             *FaultsReport      `json:"faults,omitempty"`
	Trace              *TraceReport       `json:"trace,omitempty"`
	Host               Host               `json:"host"`
	WallSeconds        float64            `json:"wall_seconds"`
	Samples            []Sample           `json:"samples"`
	AgentErrors        []string           `json:"agent_errors,omitempty"`
	ScenarioParameters Scenario           `json:"scenario_parameters"`
}

// Clean reports whether the run ended as it should: every job finished and none was
// lost, nothing left over, no busy runner killed.
func (r *Report) Clean() bool {
	return r.Finished && r.JobsNeverPickedUp == 0 && r.JobsUnfinished == 0 && r.Leftover.Total() == 0 && r.BusyRunnersKilled == 0
}

type reportInputs struct {
	jobs                   []simgithub.Job
	queued                 []queuedJob
	events                 []agent.Event
	runnersSeen            []time.Time
	calls                  map[string]simgithub.CallCount
	samples                []Sample
	finished, drained      bool
	lastJobDone, drainedAt time.Time
	controller             Controller
	injections             []fault.Injection
	lostNodePods           map[string]int // runner pods still on each lost node at the end
	leftover               Leftover
	host, hostEnd          Host
	cpu                    map[string]float64
}

func buildReport(sc Scenario, start time.Time, in reportInputs) *Report {
	r := &Report{
		SchemaVersion: SchemaVersion, Scenario: sc.Name, Description: sc.Description, StartedAt: start,
		Finished: in.finished, Drained: in.drained, JobsTotal: len(in.jobs), Samples: in.samples,
		Controller: in.controller, Leftover: in.leftover, RESTCallsByRoute: map[string]int64{},
		ScenarioParameters: sc, Host: in.host, CPUSeconds: in.cpu,
	}
	r.Host.LoadAvgEnd = in.hostEnd.LoadAvgEnd
	expected := map[int64]string{}
	for _, q := range in.queued {
		expected[q.id] = q.conclusion
	}
	failedRunnerLost := 0
	var pickups, queuedAt []float64
	for _, j := range in.jobs {
		queuedAt = append(queuedAt, j.QueuedAt.Sub(start).Seconds())
		if j.StartedAt == nil {
			r.JobsNeverPickedUp++
			continue
		}
		pickups = append(pickups, j.StartedAt.Sub(j.QueuedAt).Seconds())
		if j.Status != simgithub.StatusCompleted {
			r.JobsUnfinished++
			continue
		}
		want := expected[j.ID]
		if want == "" {
			want = simgithub.ConclusionSuccess
		}
		if j.Conclusion != want {
			r.JobsFailed++
			for _, e := range j.Timeline {
				if e.Type == simgithub.EventRunnerLost {
					failedRunnerLost++
					break
				}
			}
		}
	}
	r.PickupSeconds = quantiles(pickups)

	// Reaction: the i-th runner pod Gantry created after the i-th job was queued.
	var created []float64
	running := map[string]time.Time{}
	idle := 0.0
	for _, e := range in.events {
		switch e.Kind {
		case agent.EventCreated:
			created = append(created, e.At.Sub(start).Seconds())
		case agent.EventRunning:
			running[e.Pod] = e.At
		case agent.EventJobStarted, agent.EventExited, agent.EventKilled:
			if at, ok := running[e.Pod]; ok {
				idle += e.At.Sub(at).Seconds()
				delete(running, e.Pod)
			}
		}
	}
	r.RunnersCreated = len(created)
	r.IdleRunnerSeconds = math.Round(idle*10) / 10
	sort.Float64s(created)
	sort.Float64s(queuedAt)
	var reactions []float64
	for i := 0; i < len(created) && i < len(queuedAt); i++ {
		reactions = append(reactions, math.Max(0, created[i]-queuedAt[i]))
	}
	r.ReactionSeconds = quantiles(reactions)
	// The pool's part: the i-th Runner object seen after the i-th job was queued.
	var seen []float64
	for _, t := range in.runnersSeen {
		seen = append(seen, t.Sub(start).Seconds())
	}
	sort.Float64s(seen)
	var pool []float64
	for i := 0; i < len(seen) && i < len(queuedAt); i++ {
		pool = append(pool, math.Max(0, seen[i]-queuedAt[i]))
	}
	r.PoolReaction = quantiles(pool)

	// Busy runners killed: runner processes that died mid-job. A node loss the fault
	// schedule caused is the fault's; any other death (the pod deleted under the
	// runner, by Gantry or anyone) counts.
	lostAt := map[string]time.Time{}
	for _, inj := range in.injections {
		if inj.Kind == fault.KindNodeLost && inj.Node != "" {
			lostAt[inj.Node] = start.Add(time.Duration(inj.StartSeconds * float64(time.Second)))
		}
	}
	lostWithNode := 0
	for _, e := range in.events {
		if e.Kind != agent.EventKilled || e.Job == 0 || e.Cause == agent.CauseStopped {
			continue
		}
		k := BusyRunnerKill{Pod: e.Pod, Job: e.Job, Node: e.Node, T: round1(e.At.Sub(start).Seconds()), Cause: e.Cause}
		r.BusyRunnerKills = append(r.BusyRunnerKills, k)
		if at, lost := lostAt[e.Node]; e.Cause == agent.CauseNodeLost || (lost && !e.At.Before(at)) {
			lostWithNode++
			continue
		}
		r.BusyRunnersKilled++
	}

	var total int64
	for route, c := range in.calls {
		r.RESTCallsByRoute[route] = c.Total
		total += c.Total
	}
	if len(in.jobs) > 0 {
		r.RESTCallsPerJob = math.Round(float64(total)/float64(len(in.jobs))*100) / 100
	}
	if len(in.jobs) > 0 {
		var writes int64
		for m, n := range in.controller.KubeAPIRequests {
			if m != "GET" {
				writes += n
			}
		}
		r.KubeWritesPerJob = math.Round(float64(writes)/float64(len(in.jobs))*100) / 100
	}
	if in.drained && !in.lastJobDone.IsZero() {
		r.DrainSeconds = round1(in.drainedAt.Sub(in.lastJobDone).Seconds())
	}

	if sc.Faults != nil {
		f := &FaultsReport{
			Injections: slices.Clone(in.injections), JobsLost: r.JobsNeverPickedUp + r.JobsUnfinished,
			JobsFailedRunnerLost: failedRunnerLost, BusyRunnersLostWithNode: lostWithNode,
			BusyRunnersKilled: r.BusyRunnersKilled, Leftover: r.Leftover.Total(),
		}
		worst, all := 0.0, true
		for i := range f.Injections {
			inj := &f.Injections[i]
			inj.RecoverySeconds = recovery(*inj, start, in.jobs, in.events, in.lostNodePods)
			if inj.RecoverySeconds == nil {
				all = all && !inj.Injected // a step never injected has nothing to recover from
				continue
			}
			worst = math.Max(worst, *inj.RecoverySeconds)
		}
		if all {
			f.RecoverySeconds = &worst
		}
		r.Faults = f
	}
	if sc.Trace != nil {
		tr := &TraceReport{File: sc.TraceFile, Jobs: len(sc.Trace.Jobs), Speed: sc.TraceSpeed}
		var rec []float64
		for _, j := range sc.Trace.Jobs {
			if j.Pickup != nil {
				rec = append(rec, float64(*j.Pickup))
			}
		}
		if len(rec) > 0 {
			q := quantiles(rec)
			tr.RecordedPickupSeconds = &q
		}
		r.Trace = tr
	}
	r.WallSeconds = round1(time.Since(start).Seconds())
	return r
}

// recovery is how long after an injection ended the system caught up: every job
// queued before the end had been picked up and, for a lost node, every runner pod
// bound to it was gone. nil when that never happened (or the step never ran).
func recovery(inj fault.Injection, start time.Time, jobs []simgithub.Job, events []agent.Event, podsLeft map[string]int) *float64 {
	if !inj.Injected || inj.Error != "" {
		return nil
	}
	end := start.Add(time.Duration(inj.EndSeconds * float64(time.Second)))
	caughtUp := end
	for _, j := range jobs {
		if !j.QueuedAt.Before(end) {
			continue
		}
		if j.StartedAt == nil {
			return nil
		}
		if j.StartedAt.After(caughtUp) {
			caughtUp = *j.StartedAt
		}
	}
	if inj.Kind == fault.KindNodeLost {
		if podsLeft[inj.Node] > 0 {
			return nil
		}
		for _, e := range events {
			if e.Kind == agent.EventDeleted && e.Node == inj.Node && e.At.After(caughtUp) {
				caughtUp = e.At
			}
		}
	}
	s := round1(caughtUp.Sub(end).Seconds())
	return &s
}

func quantiles(xs []float64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return math.Round(s[max(0, min(i, len(s)-1))]*1000) / 1000
	}
	return Quantiles{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: at(1)}
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// hostNow describes this machine now.
func hostNow() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Gantry: version.Get().Version + " " + version.Get().Commit}
	h.LoadAvgStart = loadAvg()
	h.LoadAvgEnd = h.LoadAvgStart
	return h
}

// loadAvg reads the 1, 5 and 15 minute load averages (zeros where unknown).
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}

func (r *Report) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return htmlReport.Execute(f, r.view())
}

// Summary is the report as a few lines for a terminal.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario %s: %d jobs, %d never picked up, %d unfinished, %d failed; finished %v, drained %v\n",
		r.Scenario, r.JobsTotal, r.JobsNeverPickedUp, r.JobsUnfinished, r.JobsFailed, r.Finished, r.Drained)
	fmt.Fprintf(&b, "  pickup   p50 %.2fs  p95 %.2fs  p99 %.2fs  max %.2fs\n", r.PickupSeconds.P50, r.PickupSeconds.P95, r.PickupSeconds.P99, r.PickupSeconds.Max)
	fmt.Fprintf(&b, "  reaction p50 %.2fs  p95 %.2fs  p99 %.2fs  max %.2fs  (job → runner pod; job → Runner object: p50 %.2fs p99 %.2fs)\n",
		r.ReactionSeconds.P50, r.ReactionSeconds.P95, r.ReactionSeconds.P99, r.ReactionSeconds.Max, r.PoolReaction.P50, r.PoolReaction.P99)
	fmt.Fprintf(&b, "  runners created %d, idle runner-seconds %.0f, drain %.1fs, busy runners killed %d\n", r.RunnersCreated, r.IdleRunnerSeconds, r.DrainSeconds, r.BusyRunnersKilled)
	fmt.Fprintf(&b, "  GitHub REST calls per job %.2f; the controller's Kubernetes API writes per job %.2f\n", r.RESTCallsPerJob, r.KubeWritesPerJob)
	fmt.Fprintf(&b, "  left over: runners %d, pods %d, secrets %d, GitHub runners %d\n", r.Leftover.Runners, r.Leftover.Pods, r.Leftover.Secrets, r.Leftover.GitHubRunners)
	fmt.Fprintf(&b, "  controller: %.1f CPU-seconds, peak RSS %.0f MiB (%d process(es))\n", r.Controller.CPUSeconds, float64(r.Controller.PeakRSSBytes)/(1<<20), r.Controller.Processes)
	if f := r.Faults; f != nil {
		rec := "never"
		if f.RecoverySeconds != nil {
			rec = fmt.Sprintf("%.1fs", *f.RecoverySeconds)
		}
		fmt.Fprintf(&b, "  faults: %d jobs lost, %d left over, %d busy runners killed, %d busy runners lost with their node (%d jobs failed by it), worst recovery %s\n",
			f.JobsLost, f.Leftover, f.BusyRunnersKilled, f.BusyRunnersLostWithNode, f.JobsFailedRunnerLost, rec)
		for _, in := range f.Injections {
			rec := "not recovered"
			if in.RecoverySeconds != nil {
				rec = fmt.Sprintf("recovered %.1fs after", *in.RecoverySeconds)
			}
			fmt.Fprintf(&b, "    %5.1fs–%5.1fs %-30s %s; %s\n", in.StartSeconds, in.EndSeconds, in.Name, in.Detail, rec)
		}
	}
	if t := r.Trace; t != nil && t.RecordedPickupSeconds != nil {
		fmt.Fprintf(&b, "  trace %s: recorded pickup p50 %.2fs p99 %.2fs (simulated above)\n", t.File, t.RecordedPickupSeconds.P50, t.RecordedPickupSeconds.P99)
	}
	fmt.Fprintf(&b, "  host: %d CPUs, load average %.2f at the start, %.2f at the end\n", r.Host.CPUs, r.Host.LoadAvgStart[0], r.Host.LoadAvgEnd[0])
	if len(r.CPUSeconds) > 0 {
		fmt.Fprintf(&b, "  CPU-seconds by process: %s\n", formatCPU(r.CPUSeconds))
	}
	return b.String()
}

type htmlView struct {
	*Report
	Width, Height     int
	QueuedPts, RunPts string
	BusyPts           string
	MaxY              int
	MaxT              float64
	PeakRSSMiB        float64
	Marks             []htmlMark
}

// htmlMark is a fault shown on the chart.
type htmlMark struct {
	X, W  float64
	Label string
}

func (r *Report) view() htmlView {
	v := htmlView{Report: r, Width: 900, Height: 300, PeakRSSMiB: float64(r.Controller.PeakRSSBytes) / (1 << 20)}
	for _, s := range r.Samples {
		v.MaxY = max(v.MaxY, s.Queued, s.Pending+s.Idle+s.Busy)
		v.MaxT = math.Max(v.MaxT, s.T)
	}
	if v.MaxY == 0 {
		v.MaxY = 1
	}
	if v.MaxT == 0 {
		v.MaxT = 1
	}
	pt := func(t float64, y int) string {
		return fmt.Sprintf("%.1f,%.1f ", t/v.MaxT*float64(v.Width), float64(v.Height)-float64(y)/float64(v.MaxY)*float64(v.Height))
	}
	var q, run, busy strings.Builder
	for _, s := range r.Samples {
		q.WriteString(pt(s.T, s.Queued))
		run.WriteString(pt(s.T, s.Pending+s.Idle+s.Busy))
		busy.WriteString(pt(s.T, s.Busy))
	}
	v.QueuedPts, v.RunPts, v.BusyPts = q.String(), run.String(), busy.String()
	if r.Faults != nil {
		for _, in := range r.Faults.Injections {
			x := in.StartSeconds / v.MaxT * float64(v.Width)
			w := math.Max(2, (in.EndSeconds-in.StartSeconds)/v.MaxT*float64(v.Width))
			v.Marks = append(v.Marks, htmlMark{X: x, W: w, Label: in.Name})
		}
	}
	return v
}

var htmlReport = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Gantry sim: {{.Scenario}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}
.q{stroke:#d9534f}.r{stroke:#337ab7}.b{stroke:#5cb85c}polyline{fill:none;stroke-width:2}
rect.f{fill:#f0ad4e;opacity:.25}
svg{border:1px solid #ccc;background:#fafafa}.legend span{margin-right:1.5em}
</style></head><body>
<h1>Gantry sim — {{.Scenario}}</h1>
<p>{{.Description}}</p>
<h2>Queued jobs and runners over time</h2>
<svg width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="queued jobs and runners over time">
{{range .Marks}}<rect class="f" x="{{printf "%.1f" .X}}" y="0" width="{{printf "%.1f" .W}}" height="{{$.Height}}"><title>{{.Label}}</title></rect>{{end}}
<polyline class="q" points="{{.QueuedPts}}"/><polyline class="r" points="{{.RunPts}}"/><polyline class="b" points="{{.BusyPts}}"/>
</svg>
<p class="legend"><span style="color:#d9534f">■ queued jobs</span><span style="color:#337ab7">■ runners (pending + idle + busy)</span><span style="color:#5cb85c">■ busy runners</span>{{if .Marks}}<span style="color:#f0ad4e">■ faults</span>{{end}}
 — y: 0 to {{.MaxY}}, x: 0 to {{printf "%.0f" .MaxT}} s</p>
<h2>Figures</h2>
<table>
<tr><th>jobs</th><td>{{.JobsTotal}} ({{.JobsNeverPickedUp}} never picked up, {{.JobsUnfinished}} unfinished, {{.JobsFailed}} failed; finished: {{.Finished}})</td></tr>
<tr><th>pickup latency</th><td>p50 {{.PickupSeconds.P50}} s, p95 {{.PickupSeconds.P95}} s, p99 {{.PickupSeconds.P99}} s, max {{.PickupSeconds.Max}} s</td></tr>
<tr><th>controller reaction (job → runner pod)</th><td>p50 {{.ReactionSeconds.P50}} s, p95 {{.ReactionSeconds.P95}} s, p99 {{.ReactionSeconds.P99}} s, max {{.ReactionSeconds.Max}} s</td></tr>
<tr><th>pool reaction (job → Runner object)</th><td>p50 {{.PoolReaction.P50}} s, p95 {{.PoolReaction.P95}} s, p99 {{.PoolReaction.P99}} s, max {{.PoolReaction.Max}} s</td></tr>
<tr><th>time to drain</th><td>{{.DrainSeconds}} s (drained: {{.Drained}})</td></tr>
<tr><th>runners created</th><td>{{.RunnersCreated}}</td></tr>
<tr><th>idle runner-seconds</th><td>{{.IdleRunnerSeconds}}</td></tr>
<tr><th>GitHub REST calls per job</th><td>{{.RESTCallsPerJob}}</td></tr>
<tr><th>controller's Kubernetes API writes per job</th><td>{{.KubeWritesPerJob}} (requests by method: {{range $k, $v := .Controller.KubeAPIRequests}}{{$k}} {{$v}} {{end}})</td></tr>
<tr><th>left over</th><td>runners {{.Leftover.Runners}}, pods {{.Leftover.Pods}}, secrets {{.Leftover.Secrets}}, GitHub runners {{.Leftover.GitHubRunners}}</td></tr>
<tr><th>busy runners killed</th><td>{{.BusyRunnersKilled}}</td></tr>
<tr><th>controller</th><td>{{printf "%.1f" .Controller.CPUSeconds}} CPU-seconds, peak RSS {{printf "%.0f" .PeakRSSMiB}} MiB, {{.Controller.Processes}} process(es)</td></tr>
<tr><th>CPU-seconds by process</th><td>{{range $k, $v := .CPUSeconds}}{{$k}} {{printf "%.1f" $v}}; {{end}}</td></tr>
<tr><th>host</th><td>{{.Host.CPUs}} CPUs, load average {{index .Host.LoadAvgStart 0}} at the start, {{index .Host.LoadAvgEnd 0}} at the end</td></tr>
</table>
{{with .Faults}}<h2>Faults</h2>
<p>{{.JobsLost}} jobs lost, {{.Leftover}} left over, {{.BusyRunnersKilled}} busy runners killed; {{.BusyRunnersLostWithNode}} busy runners lost with their node ({{.JobsFailedRunnerLost}} jobs failed by it).</p>
<table><tr><th>step</th><th>from (s)</th><th>to (s)</th><th>what</th><th>recovered after (s)</th></tr>
{{range .Injections}}<tr><td>{{.Name}}</td><td>{{.StartSeconds}}</td><td>{{.EndSeconds}}</td><td>{{.Detail}}{{if .Error}} — error: {{.Error}}{{end}}</td><td>{{if .RecoverySeconds}}{{.RecoverySeconds}}{{else}}never{{end}}</td></tr>
{{end}}</table>{{end}}
<h2>GitHub REST calls by endpoint</h2>
<table>{{range $k, $v := .RESTCallsByRoute}}<tr><td>{{$k}}</td><td>{{$v}}</td></tr>{{end}}</table>
</body></html>
`))
