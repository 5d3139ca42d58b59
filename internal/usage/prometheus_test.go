package usage_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/usage"
	"github.com/gantry-dev/gantry/internal/usage/usagetest"
)

func f(x float64) *float64 { return &x }

// FromPrometheus asks the usage metrics' increase over the window, by repository and
// by (repository, workflow), for the pools asked, and the queue quantiles from the
// histogram; NaN (no job in the window) is no quantile, the runners' time without a
// job stays out of the workflows, and the totals are the repositories'.
func TestFromPrometheus(t *testing.T) {
	const sel = `{namespace="ci", pool="linux"}`
	repo := func(r string) map[string]string { return map[string]string{"repository": r} }
	flow := func(r, w string) map[string]string { return map[string]string{"repository": r, "workflow": w} }
	answers := map[string][]usagetest.Sample{
		`sum by (repository) (increase(gantry_usage_runner_seconds_total` + sel + `[1w]))`: {
			{Labels: repo("acme/web"), Value: 7200}, {Labels: repo("acme/api"), Value: 3600.4}, {Labels: repo("none"), Value: 100}},
		`sum by (repository) (increase(gantry_usage_requested_cpu_seconds_total` + sel + `[1w]))`: {
			{Labels: repo("acme/web"), Value: 14400}, {Labels: repo("acme/api"), Value: 3600.4}, {Labels: repo("none"), Value: 100}},
		`sum by (repository) (increase(gantry_usage_jobs_total` + sel + `[1w]))`: {
			{Labels: repo("acme/web"), Value: 40.2}, {Labels: repo("acme/api"), Value: 9.9}},
		`histogram_quantile(0.5, sum by (repository, le) (increase(gantry_usage_queue_seconds_bucket` + sel + `[1w])))`: {
			{Labels: repo("acme/web"), Value: 1.5}, {Labels: repo("acme/api"), Value: math.NaN()}},
		`histogram_quantile(0.99, sum by (repository, le) (increase(gantry_usage_queue_seconds_bucket` + sel + `[1w])))`: {
			{Labels: repo("acme/web"), Value: 9.9}, {Labels: repo("acme/api"), Value: math.NaN()}},
		`sum by (repository, workflow) (increase(gantry_usage_runner_seconds_total` + sel + `[1w]))`: {
			{Labels: flow("acme/web", "CI"), Value: 7000}, {Labels: flow("acme/web", "other"), Value: 200}, {Labels: flow("none", "none"), Value: 100}},
		`sum by (repository, workflow) (increase(gantry_usage_requested_cpu_seconds_total` + sel + `[1w]))`: {
			{Labels: flow("acme/web", "CI"), Value: 14000}},
		`sum by (repository, workflow) (increase(gantry_usage_jobs_total` + sel + `[1w]))`: {
			{Labels: flow("acme/web", "CI"), Value: 39}},
		`histogram_quantile(0.5, sum by (repository, workflow, le) (increase(gantry_usage_queue_seconds_bucket` + sel + `[1w])))`: {
			{Labels: flow("acme/web", "CI"), Value: 1.25}},
		`histogram_quantile(0.99, sum by (repository, workflow, le) (increase(gantry_usage_queue_seconds_bucket` + sel + `[1w])))`: {
			{Labels: flow("acme/web", "CI"), Value: 8}},
	}
	prom := usagetest.NewPrometheus(t, answers)
	to := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	s, err := usage.FromPrometheus(context.Background(), usage.PrometheusQuery{URL: prom.URL, Window: 7 * 24 * time.Hour, To: to, Namespace: "ci", Pool: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	want := usage.Summary{
		Source: "Prometheus " + prom.URL, From: to.Add(-7 * 24 * time.Hour), To: to,
		Jobs: 50, RunnerSeconds: 10900.4, RequestedCPUSeconds: 18100.4,
		Repositories: []usage.Row{
			{Repository: "acme/web", Jobs: 40, RunnerSeconds: 7200, RequestedCPUSeconds: 14400, QueueP50: f(1.5), QueueP99: f(9.9)},
			{Repository: "acme/api", Jobs: 10, RunnerSeconds: 3600.4, RequestedCPUSeconds: 3600.4},
			{Repository: "none", RunnerSeconds: 100, RequestedCPUSeconds: 100},
		},
		Workflows: []usage.Row{
			{Repository: "acme/web", Workflow: "CI", Jobs: 39, RunnerSeconds: 7000, RequestedCPUSeconds: 14000, QueueP50: f(1.25), QueueP99: f(8)},
			{Repository: "acme/web", Workflow: "other", RunnerSeconds: 200},
		},
	}
	if d := cmp.Diff(want, s, cmp.AllowUnexported(usage.Row{})); d != "" {
		t.Errorf("FromPrometheus (-want +got):\n%s", d)
	}
	if len(prom.Asked()) != len(answers) {
		t.Errorf("asked %d queries, want %d: %q", len(prom.Asked()), len(answers), prom.Asked())
	}
}

// A Prometheus that refuses a query makes a clear error naming it.
func TestFromPrometheusError(t *testing.T) {
	prom := usagetest.NewPrometheus(t, nil)
	_, err := usage.FromPrometheus(context.Background(), usage.PrometheusQuery{URL: prom.URL, Window: time.Hour, To: time.Now()})
	if err == nil || !strings.Contains(err.Error(), "gantry_usage_runner_seconds_total") || !strings.Contains(err.Error(), "the fake has no answer") {
		t.Errorf("error = %v, want one naming the query and Prometheus' answer", err)
	}
}
