package run

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// SchemaVersion is report.json's schema version; docs/sim.md documents the fields.
const SchemaVersion = 1

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

// Controller is the controller process's resource use.
type Controller struct {
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// Report is report.json.
type Report struct {
	SchemaVersion      int              `json:"schema_version"`
	Scenario           string           `json:"scenario"`
	Description        string           `json:"description"`
	StartedAt          time.Time        `json:"started_at"`
	Finished           bool             `json:"finished"`
	JobsTotal          int              `json:"jobs_total"`
	JobsNeverPickedUp  int              `json:"jobs_never_picked_up"`
	PickupSeconds      Quantiles        `json:"pickup_seconds"`
	ReactionSeconds    Quantiles        `json:"reaction_seconds"`
	DrainSeconds       float64          `json:"drain_seconds"`
	Drained            bool             `json:"drained"`
	RunnersCreated     int              `json:"runners_created"`
	IdleRunnerSeconds  float64          `json:"idle_runner_seconds"`
	RESTCallsPerJob    float64          `json:"rest_calls_per_job"`
	RESTCallsByRoute   map[string]int64 `json:"rest_calls_by_endpoint"`
	Leftover           Leftover         `json:"leftover"`
	BusyRunnersKilled  int              `json:"busy_runners_killed"`
	Controller         Controller       `json:"controller"`
	WallSeconds        float64          `json:"wall_seconds"`
	Samples            []Sample         `json:"samples"`
	AgentErrors        []string         `json:"agent_errors,omitempty"`
	ScenarioParameters Scenario         `json:"scenario_parameters"`
}

type reportInputs struct {
	jobs                   []simgithub.Job
	events                 []agent.Event
	calls                  map[string]simgithub.CallCount
	samples                []Sample
	finished, drained      bool
	lastJobDone, drainedAt time.Time
	cpuSeconds             float64
	peakRSS                int64
}

func buildReport(sc Scenario, start time.Time, in reportInputs) *Report {
	r := &Report{
		SchemaVersion: SchemaVersion, Scenario: sc.Name, Description: sc.Description, StartedAt: start,
		Finished: in.finished, Drained: in.drained, JobsTotal: len(in.jobs), Samples: in.samples,
		Controller:         Controller{CPUSeconds: in.cpuSeconds, PeakRSSBytes: in.peakRSS},
		RESTCallsByRoute:   map[string]int64{},
		ScenarioParameters: sc,
	}
	var pickups, queuedAt []float64
	for _, j := range in.jobs {
		queuedAt = append(queuedAt, j.QueuedAt.Sub(start).Seconds())
		if j.StartedAt == nil {
			r.JobsNeverPickedUp++
			continue
		}
		pickups = append(pickups, j.StartedAt.Sub(j.QueuedAt).Seconds())
		if j.Status == simgithub.StatusCompleted && j.Conclusion != "" && j.Conclusion != "success" {
			r.BusyRunnersKilled++ // a started job that did not succeed: its runner died under it
		}
		if j.Status != simgithub.StatusCompleted {
			r.BusyRunnersKilled++
		}
	}
	r.PickupSeconds = quantiles(pickups)

	// Reaction: the i-th runner pod Gantry created after the i-th job was queued.
	var created []float64
	running := map[string]time.Time{}
	idle := 0.0
	for _, e := range in.events {
		switch e.Kind {
		case "created":
			created = append(created, e.At.Sub(start).Seconds())
		case "running":
			running[e.Pod] = e.At
		case "job-started", "exited":
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

	var total int64
	for route, c := range in.calls {
		r.RESTCallsByRoute[route] = c.Total
		total += c.Total
	}
	if len(in.jobs) > 0 {
		r.RESTCallsPerJob = math.Round(float64(total)/float64(len(in.jobs))*100) / 100
	}
	if in.drained && !in.lastJobDone.IsZero() {
		r.DrainSeconds = math.Round(in.drainedAt.Sub(in.lastJobDone).Seconds()*10) / 10
	}
	r.WallSeconds = math.Round(time.Since(start).Seconds()*10) / 10
	return r
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
	fmt.Fprintf(&b, "Scenario %s: %d jobs, %d never picked up, finished %v, drained %v\n", r.Scenario, r.JobsTotal, r.JobsNeverPickedUp, r.Finished, r.Drained)
	fmt.Fprintf(&b, "  pickup   p50 %.2fs  p95 %.2fs  p99 %.2fs  max %.2fs\n", r.PickupSeconds.P50, r.PickupSeconds.P95, r.PickupSeconds.P99, r.PickupSeconds.Max)
	fmt.Fprintf(&b, "  reaction p50 %.2fs  p95 %.2fs  p99 %.2fs  max %.2fs\n", r.ReactionSeconds.P50, r.ReactionSeconds.P95, r.ReactionSeconds.P99, r.ReactionSeconds.Max)
	fmt.Fprintf(&b, "  runners created %d, idle runner-seconds %.0f, drain %.1fs, busy runners killed %d\n", r.RunnersCreated, r.IdleRunnerSeconds, r.DrainSeconds, r.BusyRunnersKilled)
	fmt.Fprintf(&b, "  GitHub REST calls per job %.2f\n", r.RESTCallsPerJob)
	fmt.Fprintf(&b, "  left over: runners %d, pods %d, secrets %d, GitHub runners %d\n", r.Leftover.Runners, r.Leftover.Pods, r.Leftover.Secrets, r.Leftover.GitHubRunners)
	fmt.Fprintf(&b, "  controller: %.1f CPU-seconds, peak RSS %.0f MiB\n", r.Controller.CPUSeconds, float64(r.Controller.PeakRSSBytes)/(1<<20))
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
	return v
}

var htmlReport = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Gantry sim: {{.Scenario}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}
.q{stroke:#d9534f}.r{stroke:#337ab7}.b{stroke:#5cb85c}polyline{fill:none;stroke-width:2}
svg{border:1px solid #ccc;background:#fafafa}.legend span{margin-right:1.5em}
</style></head><body>
<h1>Gantry sim — {{.Scenario}}</h1>
<p>{{.Description}}</p>
<h2>Queued jobs and runners over time</h2>
<svg width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="queued jobs and runners over time">
<polyline class="q" points="{{.QueuedPts}}"/><polyline class="r" points="{{.RunPts}}"/><polyline class="b" points="{{.BusyPts}}"/>
</svg>
<p class="legend"><span style="color:#d9534f">■ queued jobs</span><span style="color:#337ab7">■ runners (pending + idle + busy)</span><span style="color:#5cb85c">■ busy runners</span>
 — y: 0 to {{.MaxY}}, x: 0 to {{printf "%.0f" .MaxT}} s</p>
<h2>Figures</h2>
<table>
<tr><th>jobs</th><td>{{.JobsTotal}} ({{.JobsNeverPickedUp}} never picked up; finished: {{.Finished}})</td></tr>
<tr><th>pickup latency</th><td>p50 {{.PickupSeconds.P50}} s, p95 {{.PickupSeconds.P95}} s, p99 {{.PickupSeconds.P99}} s, max {{.PickupSeconds.Max}} s</td></tr>
<tr><th>controller reaction</th><td>p50 {{.ReactionSeconds.P50}} s, p95 {{.ReactionSeconds.P95}} s, p99 {{.ReactionSeconds.P99}} s, max {{.ReactionSeconds.Max}} s</td></tr>
<tr><th>time to drain</th><td>{{.DrainSeconds}} s (drained: {{.Drained}})</td></tr>
<tr><th>runners created</th><td>{{.RunnersCreated}}</td></tr>
<tr><th>idle runner-seconds</th><td>{{.IdleRunnerSeconds}}</td></tr>
<tr><th>GitHub REST calls per job</th><td>{{.RESTCallsPerJob}}</td></tr>
<tr><th>left over</th><td>runners {{.Leftover.Runners}}, pods {{.Leftover.Pods}}, secrets {{.Leftover.Secrets}}, GitHub runners {{.Leftover.GitHubRunners}}</td></tr>
<tr><th>busy runners killed</th><td>{{.BusyRunnersKilled}}</td></tr>
<tr><th>controller</th><td>{{printf "%.1f" .Controller.CPUSeconds}} CPU-seconds, peak RSS {{printf "%.0f" .PeakRSSMiB}} MiB</td></tr>
</table>
<h2>GitHub REST calls by endpoint</h2>
<table>{{range $k, $v := .RESTCallsByRoute}}<tr><td>{{$k}}</td><td>{{$v}}</td></tr>{{end}}</table>
</body></html>
`))
