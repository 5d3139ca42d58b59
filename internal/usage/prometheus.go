package usage

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// The usage metrics (internal/controller/runner/usagemetrics.go), as Prometheus names
// them.
const (
	MetricJobs                = "gantry_usage_jobs_total"
	MetricRunnerSeconds       = "gantry_usage_runner_seconds_total"
	MetricRequestedCPUSeconds = "gantry_usage_requested_cpu_seconds_total"
	MetricQueueSeconds        = "gantry_usage_queue_seconds"
)

// PrometheusQuery says what to ask Prometheus: the window [To−Window, To], and the
// pools (empty: all).
type PrometheusQuery struct {
	URL       string
	Window    time.Duration
	To        time.Time
	Namespace string
	Pool      string
}

// FromPrometheus sums the usage metrics over the window, by repository and by
// workflow, with the queue time's p50 and p99 from the histogram's buckets. Workflow
// rows exist only where the controller counts workflows (--usage-workflows).
func FromPrometheus(ctx context.Context, q PrometheusQuery) (Summary, error) {
	c, err := promapi.NewClient(promapi.Config{Address: q.URL})
	if err != nil {
		return Summary{}, fmt.Errorf("prometheus %s: %w", q.URL, err)
	}
	api := promv1.NewAPI(c)
	s := Summary{Source: "Prometheus " + q.URL, From: q.To.Add(-q.Window), To: q.To}
	sel := selector(q.Namespace, q.Pool)
	window := model.Duration(q.Window).String()
	ask := func(expr string) (model.Vector, error) {
		v, _, err := api.Query(ctx, expr, q.To)
		if err != nil {
			return nil, fmt.Errorf("asking Prometheus %s for %s: %w", q.URL, expr, err)
		}
		vec, ok := v.(model.Vector)
		if !ok {
			return nil, fmt.Errorf("asking Prometheus %s for %s: got a %s, want a vector", q.URL, expr, v.Type())
		}
		return vec, nil
	}
	for _, by := range []struct {
		labels string
		rows   *[]Row
	}{{"repository", &s.Repositories}, {"repository, workflow", &s.Workflows}} {
		rows := map[[2]string]*Row{}
		row := func(m model.Metric) *Row {
			k := [2]string{string(m["repository"]), string(m["workflow"])}
			if rows[k] == nil {
				rows[k] = &Row{Repository: k[0], Workflow: k[1]}
			}
			return rows[k]
		}
		for _, f := range []struct {
			expr string
			set  func(*Row, float64)
		}{
			{fmt.Sprintf("sum by (%s) (increase(%s%s[%s]))", by.labels, MetricRunnerSeconds, sel, window), func(r *Row, v float64) { r.RunnerSeconds = round3(v) }},
			{fmt.Sprintf("sum by (%s) (increase(%s%s[%s]))", by.labels, MetricRequestedCPUSeconds, sel, window), func(r *Row, v float64) { r.RequestedCPUSeconds = round3(v) }},
			{fmt.Sprintf("sum by (%s) (increase(%s%s[%s]))", by.labels, MetricJobs, sel, window), func(r *Row, v float64) { r.Jobs = int(math.Round(v)) }},
			{fmt.Sprintf("histogram_quantile(0.5, sum by (%s, le) (increase(%s_bucket%s[%s])))", by.labels, MetricQueueSeconds, sel, window), func(r *Row, v float64) { r.QueueP50 = finite(v) }},
			{fmt.Sprintf("histogram_quantile(0.99, sum by (%s, le) (increase(%s_bucket%s[%s])))", by.labels, MetricQueueSeconds, sel, window), func(r *Row, v float64) { r.QueueP99 = finite(v) }},
		} {
			vec, err := ask(f.expr)
			if err != nil {
				return Summary{}, err
			}
			for _, sample := range vec {
				if by.rows == &s.Workflows && (sample.Metric["workflow"] == "" || sample.Metric["repository"] == None) {
					continue // workflows are not counted, or a runner's time without a job
				}
				f.set(row(sample.Metric), float64(sample.Value))
			}
		}
		for _, r := range rows {
			*by.rows = append(*by.rows, *r)
			if by.rows == &s.Repositories {
				s.Jobs += r.Jobs
				s.RunnerSeconds += r.RunnerSeconds
				s.RequestedCPUSeconds += r.RequestedCPUSeconds
			}
		}
		SortByRunnerSeconds(*by.rows)
	}
	s.RunnerSeconds, s.RequestedCPUSeconds = round3(s.RunnerSeconds), round3(s.RequestedCPUSeconds)
	return s, nil
}

// selector is the label matchers of a namespace and a pool, each when given.
func selector(namespace, pool string) string {
	var m []string
	if namespace != "" {
		m = append(m, fmt.Sprintf("namespace=%q", namespace))
	}
	if pool != "" {
		m = append(m, fmt.Sprintf("pool=%q", pool))
	}
	if len(m) == 0 {
		return ""
	}
	return "{" + strings.Join(m, ", ") + "}"
}

// finite is v, or nil when Prometheus answered NaN (no job in the window) or ±Inf.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	x := round3(v)
	return &x
}
