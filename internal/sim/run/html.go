package run

import (
	"fmt"
	"html/template"
	"io"
)

// htmlView is what report.html shows: the report, its charts, Gantry beside the floor
// and the targets judged.
type htmlView struct {
	*Report
	PeakRSSMiB float64
	Charts     []chart
	Latency    []latencyRow
	Verdicts   []Verdict
	// Unjudged are the targets relative to another scenario, which only `gantry sim
	// compare` judges, beside that scenario's report.
	Unjudged []Target
	// TimelineNote says why a timeline is missing.
	TimelineNote string
	// UsageChart is who used the pool over time (usage.go), when the run has usage.
	UsageChart *chart
}

// latencyRow is a percentile of Gantry's latencies beside the floor's.
type latencyRow struct {
	Name                          string
	Gantry, Floor                 float64
	Ratio                         *float64
	HasFloor                      bool
	GantryReaction, FloorReaction float64
	ReactionRatio                 *float64
}

func (r *Report) view() htmlView {
	v := htmlView{Report: r, PeakRSSMiB: float64(r.Controller.PeakRSSBytes) / (1 << 20)}
	v.Charts = append(v.Charts, overTime(r))
	if c := pickupCDF(r); c != nil {
		v.Charts = append(v.Charts, *c)
	}
	var floorJobs []JobTimes
	if r.Floor != nil {
		floorJobs = r.Floor.Jobs
	}
	end := timelineEnd(r.Jobs, floorJobs)
	if c := timeline("per-job timeline: Gantry", r.Jobs, end); c != nil {
		v.Charts = append(v.Charts, *c)
	}
	if c := timeline("per-job timeline: floor", floorJobs, end); c != nil {
		v.Charts = append(v.Charts, *c)
	}
	if len(r.Jobs) > maxTimelineJobs {
		v.TimelineNote = fmt.Sprintf("No per-job timeline: %d jobs are more than the %d a timeline can show.", len(r.Jobs), maxTimelineJobs)
	}
	g, fl := r.PickupSeconds, Quantiles{}
	gr, flr := r.ReactionSeconds, Quantiles{}
	var ratios, rratios Ratios
	if r.Floor != nil {
		fl, flr = r.Floor.PickupSeconds, r.Floor.ReactionSeconds
		ratios, rratios = r.Floor.Ratio.PickupSeconds, r.Floor.Ratio.ReactionSeconds
	}
	for _, row := range []struct {
		name         string
		g, f, gr, fr float64
		r, rr        *float64
	}{
		{"p50", g.P50, fl.P50, gr.P50, flr.P50, ratios.P50, rratios.P50},
		{"p95", g.P95, fl.P95, gr.P95, flr.P95, ratios.P95, rratios.P95},
		{"p99", g.P99, fl.P99, gr.P99, flr.P99, ratios.P99, rratios.P99},
		{"max", g.Max, fl.Max, gr.Max, flr.Max, ratios.Max, rratios.Max},
	} {
		v.Latency = append(v.Latency, latencyRow{
			Name: row.name, Gantry: row.g, Floor: row.f, Ratio: row.r, HasFloor: r.Floor != nil,
			GantryReaction: row.gr, FloorReaction: row.fr, ReactionRatio: row.rr,
		})
	}
	v.UsageChart = usageChart(r.Usage)
	v.Verdicts = Judge(r.Scenario, FiguresOf(r), nil)
	v.Unjudged = unjudged(r.Scenario, nil)
	return v
}

func (r *Report) writeHTML(w io.Writer) error { return htmlReport.Execute(w, r.view()) }

var htmlReport = template.Must(template.New("report").Funcs(template.FuncMap{
	"f2":  func(p *float64) string { return num(p) },
	"mib": func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Gantry sim: {{.Scenario}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1000px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}.nw{white-space:nowrap}
.met{color:#2b7a2b}.missed{color:#b52b27;font-weight:600}
svg{background:#fafafa;border:1px solid #ddd;display:block;margin:.3em 0}
svg text{font:11px system-ui,sans-serif;fill:#444}
.axis{stroke:#666;stroke-width:1}.grid{stroke:#e4e4e4;stroke-width:1}
polyline{fill:none;stroke-width:2}path{fill:none;shape-rendering:crispEdges}
.q{stroke:#d9534f;color:#d9534f}.r{stroke:#337ab7;color:#337ab7}.b{stroke:#5cb85c;color:#5cb85c}
.g{stroke:#337ab7;color:#337ab7}.fl{stroke:#888;color:#888;stroke-dasharray:6 3}
.tw{stroke:#f0ad4e;color:#f0ad4e}.ts{stroke:#9b59b6;color:#9b59b6}.ti{stroke:#5bc0de;color:#5bc0de}.tr{stroke:#5cb85c;color:#5cb85c}
rect.f{fill:#f0ad4e;opacity:.25}.f{color:#f0ad4e}
.legend span{margin-right:1.5em}.legend .lt{color:#222;margin:0}
polygon{stroke:none}.a0{fill:#4e79a7;color:#4e79a7}.a1{fill:#f28e2b;color:#f28e2b}.a2{fill:#e15759;color:#e15759}.a3{fill:#76b7b2;color:#76b7b2}.a4{fill:#59a14f;color:#59a14f}.a5{fill:#edc948;color:#edc948}.a6{fill:#b07aa1;color:#b07aa1}.ao{fill:#bab0ac;color:#bab0ac}.an{fill:#d7dde3;color:#b8c2cc}
</style></head><body>
<h1>Gantry sim — {{.Scenario}}</h1>
<p>{{.Description}}</p>
<p>Demand source: <strong>{{.DemandSource}}</strong> (the pool's <code>spec.demand.source</code>: {{if eq (print .DemandSource) "ScaleSet"}}a runner scale set, long-polled on GitHub's Actions service{{else}}workflow_job webhooks{{end}}){{if gt .Pools 1}}, {{.Pools}} pools{{end}}.</p>
{{with .Sessions}}<p>Before the workload, {{.Open}} of the {{.Pools}} pools' scale-set sessions were open{{if .Seconds}}: all {{f2 .Seconds}} s after the controller was ready{{else}}: <strong>not all within 5 minutes</strong>{{end}}.</p>{{end}}
{{with .Idle}}<h2>Idle</h2>
<p>The controller with {{.SessionsOpen}} of {{.Pools}} pools' sessions open and no job, over a {{.WindowSeconds}} s window{{if .Error}} (<strong>not all measured: {{.Error}}</strong>){{end}}.</p>
<table>
<tr><th>goroutines</th><td class="n">{{.Goroutines}}</td><td>at the end of the window ({{.GoroutinesStart}} at its start), the controller's <code>go_goroutines</code></td></tr>
<tr><th>resident memory (MiB)</th><td class="n">{{mib .RSSBytes}}</td><td>at the end of the window</td></tr>
<tr><th>CPU-seconds per minute</th><td class="n">{{printf "%.3f" .CPUSecondsPerMinute}}</td><td>user + system, during the window</td></tr>
<tr><th>Actions service calls per minute</th><td class="n">{{printf "%.2f" .ActionsServiceCallsPerMinute}}</td><td>{{printf "%.3f" .ActionsServiceCallsPerMinutePerPool}} per pool (calls answered in the window; a long poll held 50 s is 1.2 a minute over time)</td></tr>
<tr><th>REST calls per minute</th><td class="n">{{printf "%.2f" .RESTCallsPerMinute}}</td><td></td></tr>
</table>
<table>{{range $k, $v := .ActionsServiceCallsByRoute}}<tr><td>{{$k}}</td><td class="n">{{$v}}</td></tr>{{end}}{{range $k, $v := .RESTCallsByRoute}}<tr><td>{{$k}}</td><td class="n">{{$v}}</td></tr>{{end}}</table>{{end}}
{{with .Fleet}}<h2>Fleet</h2>
<p>{{.ScaleSetPools}} scale-set and {{.WebhookPools}} webhook pools on {{.Credentials}} credentials Secrets, {{.Nodes}} nodes.
Writes are the controller's, from the kube-apiserver's audit log.</p>
<table>
<tr><th>nodes by architecture</th><td>{{range $k, $v := .NodesByArch}}{{$k}} {{$v}} {{end}}</td></tr>
<tr><th>pools by platform</th><td>{{range $k, $v := .Platforms}}{{$k}}: {{$v}}; {{end}}</td></tr>
<tr><th>node reads over the run</th><td>{{range $k, $v := .NodeReads}}{{$k}} {{$v}}; {{end}} lists: {{.NodeListCalls}}</td></tr>
<tr><th>Secret reads over the run</th><td>{{.SecretReads}}</td></tr>
<tr><th>start-up writes per pool</th><td>{{range $k, $v := .StartupWritesPerPool}}{{$k}} {{printf "%.3f" $v}}; {{end}}</td></tr>
<tr><th>idle writes per pool per minute</th><td>{{range $k, $v := .IdleWritesPerPoolPerMinute}}{{$k}} {{printf "%.3f" $v}}; {{else}}none{{end}} (pool status writes per pool per 10 minutes: {{printf "%.3f" .IdlePoolStatusWritesPer10Minutes}})</td></tr>
{{with .Restart}}<tr><th>restart (SIG{{.Signal}})</th><td>ready {{.DownSeconds}} s after the signal; {{.Open}} of {{.Pools}} sessions open in the new controller{{if .SessionsSeconds}}, all {{f2 .SessionsSeconds}} s after it was ready{{else}}: <strong>not all within 5 minutes</strong>{{end}}; named in the pools' statuses {{if .StatusSeconds}}{{f2 .StatusSeconds}} s after it was ready{{else}}<strong>not all within 2 minutes</strong>{{end}}</td></tr>{{end}}
<tr><th>restart writes per pool</th><td>{{range $k, $v := .RestartWritesPerPool}}{{$k}} {{printf "%.3f" $v}}; {{end}}</td></tr>
<tr><th>burst</th><td>{{.Burst.Jobs}} jobs over {{.Burst.Pools}} pools ({{.Burst.ScaleSetPools}} scale-set, {{.Burst.WebhookPools}} webhook);
{{range $k, $v := .Burst.PickupByDemandSource}}{{$k}} pickup p50 {{$v.P50}} s, p99 {{$v.P99}} s; {{end}}runner pod start p50 {{.Burst.RunnerPodStart.P50}} s, p99 {{.Burst.RunnerPodStart.P99}} s; writes per job {{.Burst.WritesPerJob}}</td></tr>
{{with .SinglePoolBurst}}<tr><th>single-pool burst (the reference)</th><td>the same {{.Jobs}} jobs into {{.Pool}} alone (maxRunners {{.MaxRunners}}) once the burst's runners were gone, same cluster and controller:
{{.JobsNeverPickedUp}} never picked up, {{.JobsUnfinished}} unfinished, runners gone {{.Drained}} after {{.WallSeconds}} s; pickup p50 {{.PickupSeconds.P50}} s, p99 {{.PickupSeconds.P99}} s (job → Runner p99 {{.PoolReaction.P99}} s, → runner pod p99 {{.ReactionSeconds.P99}} s; runner pod start p50 {{.RunnerPodStart.P50}} s, p99 {{.RunnerPodStart.P99}} s); writes per job {{.WritesPerJob}}</td></tr>
<tr><th>burst pickup p99 / single pool's</th><td>{{with $.Fleet.BurstPickupP99OverSinglePool}}{{f2 .}}{{else}}<strong>not measured: the single-pool burst did not end clean</strong>{{end}}</td></tr>{{end}}
</table>{{end}}
{{if .Floor}}<h2>Gantry beside the floor</h2>
<p>The floor is an oracle run on the same cluster and simulator right after Gantry's
workload, with the same jobs (same seed): it knows each job the moment it is queued and
makes only one JIT configuration, one Secret and one pod for it, {{.Floor.Workers}} at
a time. Ratio: Gantry's figure over the floor's (1.00 = at the floor). Load average
(1 minute) during Gantry's run {{index .Host.LoadAvgStart 0}} → {{index .Host.LoadAvgEnd 0}}, during the
floor's {{index .Floor.LoadAvg 0}} → {{index .Floor.LoadAvg 1}}: on a shared machine, compare them before a ratio.
{{if and .WatchersCut .Floor.WatchersCut}}Watchers the kube-apiserver cut for falling behind (a control plane short of CPU): {{.WatchersCut}} during Gantry's run, {{.Floor.WatchersCut}} during the floor's.{{end}}
{{if not .Floor.ClusterDrained}}<strong>The cluster was not drained when the floor started.</strong>{{end}}
{{if .Floor.Error}}<strong>The floor met errors: {{.Floor.Error}}</strong>{{end}}</p>
<table><tr><th></th><th>pickup Gantry (s)</th><th>pickup floor (s)</th><th>ratio</th><th>reaction Gantry (s)</th><th>reaction floor (s)</th><th>ratio</th></tr>
{{range .Latency}}<tr><th>{{.Name}}</th><td class="n">{{printf "%.2f" .Gantry}}</td><td class="n">{{printf "%.2f" .Floor}}</td><td class="n">{{f2 .Ratio}}</td><td class="n">{{printf "%.2f" .GantryReaction}}</td><td class="n">{{printf "%.2f" .FloorReaction}}</td><td class="n">{{f2 .ReactionRatio}}</td></tr>
{{end}}</table>
{{with .Floor.CPUMsPerJob}}<p>Controller CPU per job: Gantry's {{printf "%.1f" $.ControllerCPUPerJob}} ms, the floor's {{f2 .}} ms
(the oracle's own process, start-up included), ratio {{f2 $.Floor.Ratio.CPUMsPerJob}}.</p>{{end}}{{end}}
{{if or .Verdicts .Unjudged}}<h2>Targets</h2>
<table><tr><th>figure</th><th>now</th><th>target</th><th></th></tr>
{{range .Verdicts}}<tr><td>{{.Target.Figure}}</td><td class="n">{{f2 .Value}}</td><td>{{.String}}</td><td>{{if .Met}}<span class="met">met</span>{{else}}<span class="missed">MISSED</span>{{end}}</td></tr>
{{end}}{{range .Unjudged}}<tr><td>{{.Figure}}</td><td class="n">—</td><td>≤ {{.Max}}× {{.Of}}'s in the same bench run</td><td>judged by <code>gantry sim compare</code> beside {{.Of}}'s report</td></tr>
{{end}}</table>{{end}}
{{range .Charts}}{{template "chart" .}}{{end}}{{with .TimelineNote}}<p>{{.}}</p>{{end}}
{{template "usage" .}}
<h2>Figures</h2>
<table>
<tr><th>jobs</th><td>{{.JobsTotal}} ({{.JobsNeverPickedUp}} never picked up, {{.JobsUnfinished}} unfinished, {{.JobsFailed}} failed; finished: {{.Finished}})</td></tr>
<tr><th>pickup latency</th><td>p50 {{.PickupSeconds.P50}} s, p95 {{.PickupSeconds.P95}} s, p99 {{.PickupSeconds.P99}} s, max {{.PickupSeconds.Max}} s</td></tr>
<tr><th>its cost: idle runner-seconds per job</th><td>{{.IdleRunnerSecondsPerJob}} ({{.IdleRunnerSeconds}} in all)</td></tr>
{{with .Warm}}<tr><th>after the prediction's warm-up (jobs queued after the first {{.WarmUpSeconds}} s: {{.Jobs}})</th><td>pickup p50 {{.PickupSeconds.P50}} s, p95 {{.PickupSeconds.P95}} s, p99 {{.PickupSeconds.P99}} s, max {{.PickupSeconds.Max}} s; {{.IdleRunnerSecondsPerJob}} idle runner-seconds per job</td></tr>{{end}}
<tr><th>controller reaction (job → runner pod)</th><td>p50 {{.ReactionSeconds.P50}} s, p95 {{.ReactionSeconds.P95}} s, p99 {{.ReactionSeconds.P99}} s, max {{.ReactionSeconds.Max}} s</td></tr>
<tr><th>pool reaction (job → Runner object)</th><td>p50 {{.PoolReaction.P50}} s, p95 {{.PoolReaction.P95}} s, p99 {{.PoolReaction.P99}} s, max {{.PoolReaction.Max}} s</td></tr>
{{with .WebhookDelivery}}<tr><th>queued webhook delivered (job → the controller's answer)</th><td>p50 {{.P50}} s, p95 {{.P95}} s, p99 {{.P99}} s, max {{.Max}} s</td></tr>{{end}}
<tr><th>time to drain</th><td>{{.DrainSeconds}} s (drained: {{.Drained}})</td></tr>
<tr><th>runners created</th><td>{{.RunnersCreated}}</td></tr>
<tr><th>idle runner-seconds</th><td>{{.IdleRunnerSeconds}}</td></tr>
<tr><th>GitHub calls per job</th><td>{{.GitHubCallsPerJob}} (REST and Actions service)</td></tr>
<tr><th>GitHub REST calls per job</th><td>{{.RESTCallsPerJob}}</td></tr>
<tr><th>Actions service calls per job</th><td>{{.ActionsServiceCallsPerJob}}</td></tr>
<tr><th>controller's Kubernetes API writes per job</th><td>{{.KubeWritesPerJob}} (requests by method: {{range $k, $v := .Controller.KubeAPIRequests}}{{$k}} {{$v}} {{end}})</td></tr>
{{with .KubeAPI}}<tr><th>controller's requests, as the kube-apiserver recorded them</th><td>writes per job {{.WritesPerJob}}, uncached reads per job {{.UncachedReadsPerJob}}; pool status writes {{.PoolStatusWrites}} ({{.PoolStatusWritesPerSecond}}/s per pool while jobs ran, {{.PoolStatusWritesPeak}}/s in the busiest 10 s)<br>{{range $k, $v := .Requests}}{{$k}} {{$v}}; {{end}}</td></tr>{{end}}
{{with .KubeAPI}}<tr><th>garbage collector's deletes on the controller's behalf</th><td>{{.CollectorDeletesPerJob}} per job ({{range $k, $v := .CollectorDeletes}}{{$k}} {{$v}}; {{end}}); every write on the controller's behalf: {{.AllWritesPerJob}} per job</td></tr>{{end}}
<tr><th>left over</th><td>runners {{.Leftover.Runners}}, pods {{.Leftover.Pods}}, secrets {{.Leftover.Secrets}}, GitHub runners {{.Leftover.GitHubRunners}}{{if .ContainerJobs}}, workflow pods {{.Leftover.WorkflowPods}}, step pods {{.Leftover.StepPods}}, hook Secrets {{.Leftover.HookSecrets}}{{end}}</td></tr>
<tr><th>busy runners killed</th><td>{{.BusyRunnersKilled}}</td></tr>
<tr><th>controller</th><td>{{printf "%.1f" .Controller.CPUSeconds}} CPU-seconds ({{.ControllerCPUPerJob}} ms per job), peak RSS {{printf "%.0f" .PeakRSSMiB}} MiB, {{.Controller.Processes}} process(es)</td></tr>
<tr><th>CPU-seconds by process</th><td>{{range $k, $v := .CPUSeconds}}{{$k}} {{printf "%.1f" $v}}; {{end}}</td></tr>
<tr><th>host</th><td>{{.Host.CPUs}} CPUs, load average {{index .Host.LoadAvgStart 0}} at the start, {{index .Host.LoadAvgEnd 0}} at the end</td></tr>
</table>
{{with .ContainerJobs}}<h2>Container jobs</h2>
<p>The pool runs in Kubernetes mode: each job's container and services ran in a workflow pod that the runner's container hook created in namespace <code>{{.Namespace}}</code>, with the runner pod's own ServiceAccount token.</p>
<table>
<tr><th>jobs run through the hook</th><td class="n">{{.JobsHooked}}</td><td>{{.WorkflowPods}} workflow pods and {{.StepPods}} step pods created, {{.PodsWithHostPort}} pods with a hostPort; port-mapped jobs green: {{.PortMappedJobsGreen}} of {{.PortMappedJobs}}</td></tr>
<tr><th>workflow pod start (s)</th><td class="n">{{.WorkflowPodStart.P50}} / {{.WorkflowPodStart.P99}}</td><td>p50 / p99, created → Running (max {{.WorkflowPodStart.Max}})</td></tr>
<tr><th>runner pod start (s)</th><td class="n">{{.RunnerPodStart.P50}} / {{.RunnerPodStart.P99}}</td><td>p50 / p99, measured alike (max {{.RunnerPodStart.Max}})</td></tr>
<tr><th>failed jobs</th><td class="n">{{len .JobsFailed}}</td><td>{{.JobsFailedFast}} ended before the hook's own timeout of {{.PrepareJobTimeoutSeconds}} s (the pool's image pull grace period: {{.ImagePullGracePeriodSeconds}} s)</td></tr>
<tr><th>left over</th><td class="n">{{$.Leftover.WorkflowPods}} / {{$.Leftover.StepPods}} / {{$.Leftover.HookSecrets}}</td><td>workflow pods / step pods / hook Secrets, in any namespace, after the pool drained</td></tr>
{{range $i, $b := .Bursts}}<tr><th>burst {{$i}}: writes per job</th><td class="n">{{$b.WritesPerJob}}</td><td>on the controller's behalf, garbage collector included, over {{$b.Jobs}} jobs: {{$b.JobWritesPerJob}} the job's own, {{$b.SlotWritesPerJob}} making {{$b.NewSlots}} new hook slots</td></tr>
{{end}}
<tr><th>Kubernetes writes per job</th><td class="n">{{.KubeWritesPerJob}}</td><td>the controller's {{$.KubeWritesPerJob}} and the hooks' ({{.HookWritesPerJob}} per job they ran: permission reviews, pods, Secrets, execs, deletes)</td></tr>
</table>
{{if .JobsFailed}}<table><tr><th>job</th><th>image</th><th>runner</th><th>ended after (s)</th><th>reason</th></tr>
{{range .JobsFailed}}<tr><td>{{.Job}}</td><td class="nw"><code>{{.Image}}</code></td><td class="nw">{{.Runner}}</td><td class="n">{{.Seconds}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>{{end}}{{end}}
{{with .Disruptions}}{{template "disruptions" .}}{{end}}
{{with .Caches}}<h2>Cache</h2>
<p>{{if .Enabled}}The pool's cache{{else}}<strong>No cache</strong>: the same jobs, every setup cold{{end}}. Rates over the {{.Jobs}} jobs queued after the first {{.WarmUpSeconds}} s (the warm-up).</p>
<table>
<tr><th>hit rate</th><td class="n">{{printf "%.3f" .HitRate}}</td><td>the runner mounted a volume an earlier runner had used</td></tr>
<tr><th>repository hit rate</th><td class="n">{{printf "%.3f" .RepoHitRate}}</td><td>the volume was last used by the job's own repository: a warm setup</td></tr>
<tr><th>setup seconds</th><td class="n">{{.SetupSeconds}}</td><td>{{.SetupSecondsSaved}} saved against a cold setup for every job</td></tr>
<tr><th>shared mount violations</th><td class="n">{{.SharedMountViolations}}</td><td>a claim mounted by two live pods at once (sampled every second)</td></tr>
<tr><th>pods pending on the cache</th><td class="n">{{.PodsPendingOnCache}}</td><td>unscheduled for more than 10 s because of a volume</td></tr>
<tr><th>volumes</th><td class="n">{{.VolumesMax}}</td><td>at most; {{.VolumesLeft}} claims and {{.PersistentVolumesLeft}} volumes left after the pool was deleted</td></tr>
</table>{{end}}
{{with .Faults}}<h2>Faults</h2>
<p>{{.JobsLost}} jobs lost, {{.Leftover}} left over, {{.BusyRunnersKilled}} busy runners killed; {{.BusyRunnersLostWithNode}} busy runners lost with their node ({{.JobsFailedRunnerLost}} jobs failed by it).</p>
<table><tr><th>step</th><th>from (s)</th><th>to (s)</th><th>what</th><th>recovered after (s)</th></tr>
{{range .Injections}}<tr><td>{{.Name}}</td><td>{{.StartSeconds}}</td><td>{{.EndSeconds}}</td><td>{{.Detail}}{{if .Error}} — error: {{.Error}}{{end}}</td><td>{{if .RecoverySeconds}}{{.RecoverySeconds}}{{else}}never{{end}}</td></tr>
{{end}}</table>{{end}}
<h2>GitHub REST calls by endpoint</h2>
<table>{{range $k, $v := .RESTCallsByRoute}}<tr><td>{{$k}}</td><td class="n">{{$v}}</td></tr>{{end}}</table>
{{if .ActionsServiceCallsByRoute}}<h2>Actions service calls by endpoint</h2>
<table>{{range $k, $v := .ActionsServiceCallsByRoute}}<tr><td>{{$k}}</td><td class="n">{{$v}}</td></tr>{{end}}</table>{{end}}
</body></html>

{{define "chart"}}<h2>{{.Title}}</h2>
<svg width="{{.OuterW}}" height="{{.OuterH}}" viewBox="0 0 {{.OuterW}} {{.OuterH}}" role="img" aria-label="{{.Title}}">
<g transform="translate({{.Left}},{{.Top}})">
{{range .XTicks}}<line class="grid" x1="{{printf "%.1f" .Pos}}" y1="0" x2="{{printf "%.1f" .Pos}}" y2="{{$.H}}"/>{{end}}
{{range .YTicks}}<line class="grid" x1="0" y1="{{printf "%.1f" .Pos}}" x2="{{$.W}}" y2="{{printf "%.1f" .Pos}}"/>{{end}}
{{range .Areas}}<polygon class="{{.Class}}" points="{{.Points}}"><title>{{.Title}}</title></polygon>{{end}}
{{range .Marks}}<rect class="f" x="{{printf "%.1f" .X}}" y="0" width="{{printf "%.1f" .W}}" height="{{$.H}}"><title>{{.Label}}</title></rect>{{end}}
{{range .Paths}}<path class="{{.Class}}" stroke-width="{{printf "%.2f" .Width}}" d="{{.D}}"/>{{end}}
{{range .Lines}}<polyline class="{{.Class}}" points="{{.Points}}"/>{{end}}
<line class="axis" x1="0" y1="{{.H}}" x2="{{.W}}" y2="{{.H}}"/><line class="axis" x1="0" y1="0" x2="0" y2="{{.H}}"/>
{{range .XTicks}}<line class="axis" x1="{{printf "%.1f" .Pos}}" y1="{{$.H}}" x2="{{printf "%.1f" .Pos}}" y2="{{$.TickEnd}}"/><text x="{{printf "%.1f" .Pos}}" y="{{$.H}}" dy="18" text-anchor="middle">{{.Label}}</text>{{end}}
{{range .YTicks}}<line class="axis" x1="-5" y1="{{printf "%.1f" .Pos}}" x2="0" y2="{{printf "%.1f" .Pos}}"/><text x="-8" y="{{printf "%.1f" .Pos}}" dy="4" text-anchor="end">{{.Label}}</text>{{end}}
<text x="{{.W}}" y="{{.XLabelY}}" text-anchor="end">{{.XLabel}}</text>
<text transform="rotate(-90)" x="{{.YLabelX}}" y="-48" text-anchor="middle">{{.YLabel}}</text>
</g></svg>
<p class="legend">{{range .Legend}}<span class="{{.Class}}">■ <span class="lt">{{.Label}}</span></span>{{end}}</p>
{{end}}`))
