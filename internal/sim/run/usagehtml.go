package run

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/gantry-dev/gantry/internal/usage"
)

// maxUsageRows bounds each usage table of report.html.
const maxUsageRows = 25

// usageChart stacks the runner pods alive by repository over the run: who used the
// pool, and when.
func usageChart(u *UsageReport) *chart {
	if u == nil || u.OverTime == nil || len(u.OverTime.Series) == 0 {
		return nil
	}
	ot := u.OverTime
	n := len(ot.Series[0].Runners)
	top := make([]float64, n)
	for _, s := range ot.Series {
		for i, v := range s.Runners {
			top[i] += v
		}
	}
	ymax := 0.0
	for _, v := range top {
		ymax = max(ymax, v)
	}
	c := newChart("who used the pool: runner pods alive by repository", "time since the first job was queued (s)", "runner pods", 900, 300, float64(n-1)*ot.Step, ymax)
	below := make([]float64, n)
	for k, s := range ot.Series {
		class := fmt.Sprintf("a%d", k)
		switch s.Repository {
		case usage.Other:
			class = "ao"
		case usage.None:
			class = "an"
		}
		var pts strings.Builder
		above := make([]float64, n)
		for i := range n {
			above[i] = below[i] + s.Runners[i]
			fmt.Fprintf(&pts, "%.1f,%.1f ", c.x(float64(i)*ot.Step), c.y(above[i]))
		}
		for i := n - 1; i >= 0; i-- {
			fmt.Fprintf(&pts, "%.1f,%.1f ", c.x(float64(i)*ot.Step), c.y(below[i]))
		}
		label := usageName(s.Repository)
		c.Areas = append(c.Areas, chartArea{Class: class, Points: strings.TrimSpace(pts.String()), Title: label})
		c.Legend = append(c.Legend, legendItem{Class: class, Label: label})
		below = above
	}
	return &c
}

// usageName is a repository label value as report.html shows it.
func usageName(repo string) string {
	switch repo {
	case usage.None:
		return "no job (runners idle, retired or failed before one)"
	case usage.Other:
		return "other repositories"
	}
	return repo
}

func init() {
	template.Must(htmlReport.New("usage").Funcs(template.FuncMap{
		"share": func(part, whole float64) string {
			if whole <= 0 {
				return "—"
			}
			return fmt.Sprintf("%.1f %%", 100*part/whole)
		},
		"q": func(p *float64) string {
			if p == nil {
				return "—"
			}
			return fmt.Sprintf("%.2f", *p)
		},
		"signed": func(p *float64) string { return fmt.Sprintf("%+.2f", *p) },
		"name":   usageName,
		"first":  func(rows []usage.Row) []usage.Row { return rows[:min(len(rows), maxUsageRows)] },
	}).Parse(`{{with .Usage}}<h2>Who used the pool</h2>
{{with .Error}}<p><strong>Not every usage record could be read: {{.}}</strong></p>{{end}}
<p>From the controller's usage records — {{.Records}} log lines, one per runner that ended, read from its log as a log
pipeline would (docs/usage.md) — {{.Jobs}} jobs used <strong>{{printf "%.0f" .RunnerSeconds}} runner-seconds</strong>,
with {{printf "%.0f" .RequestedCPUSeconds}} CPU core-seconds and {{printf "%.0f" .RequestedMemoryGiBSeconds}} memory GiB-seconds requested.
The run's own count, from the {{.RunnerPods}} runner pods the agents saw (the watch seeing each pod created → its runner exiting,
killed, or gone): {{printf "%.0f" .RunTotalRunnerSeconds}} runner-seconds.{{with .DifferencePercent}} The records differ from it by <strong>{{signed .}} %</strong>.{{end}}
{{if .EventsWritten}}{{.Events}} RunnerUsage events were in the cluster once the controller stopped{{with .EventsError}} ({{.}}){{end}}: usage.txt is what <code>gantry usage</code> printed of them.{{else}}The controller ran without <code>--usage-events</code>, its default: no RunnerUsage event was written (<code>gantry sim run --usage-events</code> runs it with them).{{end}}</p>
<table><tr><th>repository</th><th>jobs</th><th>runner-seconds</th><th>share</th><th>requested CPU-seconds</th><th>queue p50 (s)</th><th>queue p99 (s)</th></tr>
{{range first .Repositories}}<tr><td>{{name .Repository}}</td><td class="n">{{.Jobs}}</td><td class="n">{{printf "%.0f" .RunnerSeconds}}</td><td class="n">{{share .RunnerSeconds $.Usage.RunnerSeconds}}</td><td class="n">{{printf "%.0f" .RequestedCPUSeconds}}</td><td class="n">{{q .QueueP50}}</td><td class="n">{{q .QueueP99}}</td></tr>
{{end}}</table>
<table><tr><th>repository</th><th>workflow</th><th>jobs</th><th>runner-seconds</th><th>share</th><th>requested CPU-seconds</th><th>queue p50 (s)</th><th>queue p99 (s)</th></tr>
{{range first .Workflows}}<tr><td>{{.Repository}}</td><td>{{.Workflow}}</td><td class="n">{{.Jobs}}</td><td class="n">{{printf "%.0f" .RunnerSeconds}}</td><td class="n">{{share .RunnerSeconds $.Usage.RunnerSeconds}}</td><td class="n">{{printf "%.0f" .RequestedCPUSeconds}}</td><td class="n">{{q .QueueP50}}</td><td class="n">{{q .QueueP99}}</td></tr>
{{end}}</table>
{{with $.UsageChart}}{{template "chart" .}}{{end}}{{end}}`))
}
