package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/usage"
	"github.com/gantry-dev/gantry/internal/usage/usagetest"
)

var usageNow = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// From Prometheus: the usage metrics over the window, by repository and by workflow,
// as a person reads them.
func TestUsageFromPrometheus(t *testing.T) {
	repo := func(r string) map[string]string { return map[string]string{"repository": r} }
	flow := func(r, w string) map[string]string { return map[string]string{"repository": r, "workflow": w} }
	sum := func(by, metric string) string {
		return "sum by (" + by + ") (increase(" + metric + `{namespace="ci"}[1d]))`
	}
	q := func(by, p string) string {
		return "histogram_quantile(" + p + ", sum by (" + by + `, le) (increase(gantry_usage_queue_seconds_bucket{namespace="ci"}[1d])))`
	}
	prom := usagetest.NewPrometheus(t, map[string][]usagetest.Sample{
		sum("repository", "gantry_usage_runner_seconds_total"):                  {{Labels: repo("acme/web"), Value: 36000}, {Labels: repo("acme/api"), Value: 7200}, {Labels: repo("other"), Value: 3600}},
		sum("repository", "gantry_usage_requested_cpu_seconds_total"):           {{Labels: repo("acme/web"), Value: 72000}, {Labels: repo("acme/api"), Value: 7200}, {Labels: repo("other"), Value: 3600}},
		sum("repository", "gantry_usage_jobs_total"):                            {{Labels: repo("acme/web"), Value: 400}, {Labels: repo("acme/api"), Value: 90}, {Labels: repo("other"), Value: 30}},
		q("repository", "0.5"):                                                  {{Labels: repo("acme/web"), Value: 2}, {Labels: repo("acme/api"), Value: 45}, {Labels: repo("other"), Value: 3}},
		q("repository", "0.99"):                                                 {{Labels: repo("acme/web"), Value: 20}, {Labels: repo("acme/api"), Value: 300}, {Labels: repo("other"), Value: 9}},
		sum("repository, workflow", "gantry_usage_runner_seconds_total"):        {{Labels: flow("acme/web", "CI"), Value: 30000}, {Labels: flow("acme/api", "E2E"), Value: 7000}},
		sum("repository, workflow", "gantry_usage_requested_cpu_seconds_total"): {{Labels: flow("acme/web", "CI"), Value: 60000}, {Labels: flow("acme/api", "E2E"), Value: 7000}},
		sum("repository, workflow", "gantry_usage_jobs_total"):                  {{Labels: flow("acme/web", "CI"), Value: 350}, {Labels: flow("acme/api", "E2E"), Value: 80}},
		q("repository, workflow", "0.5"):                                        {{Labels: flow("acme/web", "CI"), Value: 2}, {Labels: flow("acme/api", "E2E"), Value: 50}},
		q("repository, workflow", "0.99"):                                       {{Labels: flow("acme/web", "CI"), Value: 18}, {Labels: flow("acme/api", "E2E"), Value: 320}},
	})
	var out strings.Builder
	if err := runUsage(context.Background(), nil, &usageFlags{prometheus: prom.URL, window: "1d", namespace: "ci", top: 2, output: "text", timeout: time.Minute}, &out, usageNow); err != nil {
		t.Fatal(err)
	}
	want := `Usage from Prometheus ` + prom.URL + `, 2026-05-03 12:00:00 to 2026-05-04 12:00:00 UTC: 520 jobs, 13.00 runner-hours, 23.00 requested CPU core-hours.

Top 2 repositories by runner time
  REPOSITORY  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/web     400         10.00  76.9%           20.00       2.0s      20.0s
  acme/api      90          2.00  15.4%            2.00      45.0s     300.0s

Top 2 workflows by runner time
  REPOSITORY  WORKFLOW  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/web    CI         350          8.33  64.1%           16.67       2.0s      18.0s
  acme/api    E2E         80          1.94  15.0%            1.94      50.0s     320.0s

Top 2 repositories by queue time (p99)
  REPOSITORY  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/api      90          2.00  15.4%            2.00      45.0s     300.0s
  acme/web     400         10.00  76.9%           20.00       2.0s      20.0s

Top 2 workflows by queue time (p99)
  REPOSITORY  WORKFLOW  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/api    E2E         80          1.94  15.0%            1.94      50.0s     320.0s
  acme/web    CI         350          8.33  64.1%           16.67       2.0s      18.0s
`
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Errorf("gantry usage --prometheus (-want +got):\n%s", d)
	}
}

// usageEvent is a RunnerUsage event holding rec, as the controller writes it.
func usageEvent(t *testing.T, name string, rec usage.Record) *corev1.Event {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: name, Annotations: map[string]string{usage.Annotation: string(b)}},
		Reason: usage.EventReason, InvolvedObject: corev1.ObjectReference{Kind: "Runner", Namespace: rec.Namespace, Name: rec.Runner}}
}

// From the events in the cluster: the records of the window's RunnerUsage events of
// the pool asked, summed; the output says how far back the events go, and that some
// could not be read.
func TestUsageFromEvents(t *testing.T) {
	rec := func(runner, pool, repo, workflow string, ago, secs float64, queue float64) usage.Record {
		end := usageNow.Add(-time.Duration(ago * float64(time.Minute)))
		r := usage.Record{Version: 1, Namespace: "ci", Pool: pool, Runner: runner, Repository: repo, Workflow: workflow,
			PodCreatedAt: end.Add(-time.Duration(secs * float64(time.Second))), EndedAt: end, RunnerSeconds: secs, RequestedCPUSeconds: 2 * secs}
		if repo != "" {
			r.QueueSeconds = &queue
		}
		return r
	}
	objs := []client.Object{
		usageEvent(t, "e1", rec("linux-a", "linux", "acme/web", "CI", 50, 600, 3)),
		usageEvent(t, "e2", rec("linux-b", "linux", "acme/web", "CI", 20, 300, 5)),
		usageEvent(t, "e3", rec("linux-c", "linux", "acme/api", "Lint", 10, 60, 1)),
		usageEvent(t, "e4", rec("linux-d", "linux", "", "", 5, 120, 0)),
		usageEvent(t, "e5", rec("gpu-a", "gpu", "acme/ml", "Train", 5, 3600, 0)),
		usageEvent(t, "e6", rec("linux-e", "linux", "acme/old", "CI", 3*24*60, 600, 0)), // out of the window
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "bad", Annotations: map[string]string{usage.Annotation: "{}"}}, Reason: usage.EventReason},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "other"}, Reason: "Failed"},
	}
	kube := fake.NewClientBuilder().WithScheme(manager.Scheme()).WithObjects(objs...).
		WithIndex(&corev1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*corev1.Event).Reason} }).Build()
	var out strings.Builder
	if err := runUsage(context.Background(), kube, &usageFlags{window: "1d", pool: "linux", top: 3, output: "text", timeout: time.Minute}, &out, usageNow); err != nil {
		t.Fatal(err)
	}
	want := `Usage from the cluster's RunnerUsage events, 2026-05-04 11:10:00 to 2026-05-04 12:00:00 UTC: 3 jobs, 0.30 runner-hours, 0.60 requested CPU core-hours.

Top 3 repositories by runner time
  REPOSITORY  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/web       2          0.25  83.3%            0.50       3.0s       5.0s
  (no job)       0          0.03  11.1%            0.07          -          -
  acme/api       1          0.02   5.6%            0.03       1.0s       1.0s

Top 3 workflows by runner time
  REPOSITORY  WORKFLOW  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/web    CI           2          0.25  83.3%            0.50       3.0s       5.0s
  acme/api    Lint         1          0.02   5.6%            0.03       1.0s       1.0s

Top 3 repositories by queue time (p99)
  REPOSITORY  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/web       2          0.25  83.3%            0.50       3.0s       5.0s
  acme/api       1          0.02   5.6%            0.03       1.0s       1.0s

Top 3 workflows by queue time (p99)
  REPOSITORY  WORKFLOW  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/web    CI           2          0.25  83.3%            0.50       3.0s       5.0s
  acme/api    Lint         1          0.02   5.6%            0.03       1.0s       1.0s

The events go back to 2026-05-04 11:10:00 only: the API server keeps events for its --event-ttl (an hour by default). For the whole window, give --prometheus. 1 RunnerUsage events held no record this gantry can read.
`
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Errorf("gantry usage (-want +got):\n%s", d)
	}
}

func TestUsageRefusesBadFlags(t *testing.T) {
	for _, f := range []usageFlags{
		{window: "7d", top: 10, output: "yaml"},
		{window: "a week", top: 10, output: "text"},
		{window: "-1h", top: 10, output: "text"},
		{window: "7d", top: 0, output: "text"},
	} {
		var out strings.Builder
		if err := runUsage(context.Background(), nil, &f, &out, usageNow); err == nil {
			t.Errorf("flags %+v: no error, want a usage error", f)
		}
	}
}
