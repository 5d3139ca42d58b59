package ux

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// The real manager, driven through a job, a runner failure and a rate limit, exports
// every metric Gantry declares; the Grafana dashboard queries only metrics it exports
// and has the panels an operator needs; docs/metrics.md documents exactly the
// gantry_* metrics it exports.
func TestExportedMetrics(t *testing.T) {
	w := newWorldWith(t, func(o *stack.Options) { o.EvictionWebhook = true })
	exerciseEveryMetric(w)

	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering the manager's metrics: %v", err)
	}
	exported := seriesNames(families)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the scenario exported every metric Gantry declares", func(t *testing.T) {
		declared := declaredMetrics(t, filepath.Join(root, "internal"))
		if len(declared) < 10 {
			t.Fatalf("found only %d metric declarations under internal/ (%v): the scan is broken", len(declared), declared)
		}
		for _, name := range declared {
			if !familyExported(families, name) {
				t.Errorf("%s is declared under internal/ but the manager did not export it: register it, and make exerciseEveryMetric give it a sample", name)
			}
		}
	})

	t.Run("the dashboard names only exported metrics", func(t *testing.T) {
		queries := dashboardQueries(t, filepath.Join(root, "config", "grafana", "gantry-dashboard.json"))
		for _, q := range queries {
			names, err := metricNames(q.expr)
			if err != nil {
				t.Errorf("panel %q: %v\n\t%s", q.panel, err, q.expr)
				continue
			}
			if len(names) == 0 {
				t.Errorf("panel %q: the query names no metric: %s", q.panel, q.expr)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("panel %q queries %s, which Gantry does not export\n\t%s", q.panel, n, q.expr)
				}
			}
		}
	})

	t.Run("the alerts in docs/operations.md name only exported metrics", func(t *testing.T) {
		src, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
		if err != nil {
			t.Fatal(err)
		}
		exprs := regexp.MustCompile(`(?m)^\s*expr:\s*(.+?)\s*$`).FindAllStringSubmatch(string(src), -1)
		if len(exprs) < 5 {
			t.Fatalf("found %d alert expressions in docs/operations.md, want the alerts of its Monitoring section", len(exprs))
		}
		for _, m := range exprs {
			names, err := metricNames(m[1])
			if err != nil {
				t.Errorf("%v\n\t%s", err, m[1])
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("an alert queries %s, which Gantry does not export\n\t%s", n, m[1])
				}
			}
		}
	})

	t.Run("the dashboard has the panels an operator needs", func(t *testing.T) {
		queries := dashboardQueries(t, filepath.Join(root, "config", "grafana", "gantry-dashboard.json"))
		for _, want := range []struct{ what, metric, must string }{
			{"runners by state per pool", "gantry_pool_runners", "by (namespace, pool, state)"},
			{"queued jobs per pool", "gantry_pool_queued_jobs", "by (namespace, pool)"},
			{"pickup latency p50", "gantry_job_pickup_seconds_bucket", "histogram_quantile(0.5,"},
			{"pickup latency p95", "gantry_job_pickup_seconds_bucket", "histogram_quantile(0.95,"},
			{"pickup latency p99", "gantry_job_pickup_seconds_bucket", "histogram_quantile(0.99,"},
			{"runner failures by reason", "gantry_runner_failures_total", "by (reason)"},
			{"GitHub requests by endpoint and code", "gantry_github_requests_total", "by (endpoint, code)"},
			{"rate-limit budget remaining", "gantry_github_rate_limit_remaining", "by (credential, resource)"},
			{"webhook deliveries by result", "gantry_webhook_deliveries_total", "by (result)"},
			{"reconcile errors", "controller_runtime_reconcile_errors_total", "by (controller)"},
			{"top repositories by runner-seconds", "gantry_usage_runner_seconds_total", "topk(10, sum by (repository) ("},
			{"top workflows by runner-seconds", "gantry_usage_runner_seconds_total", "topk(10, sum by (repository, workflow) ("},
			{"top repositories by queue time", "gantry_usage_queue_seconds_bucket", "topk(10, histogram_quantile(0.99, sum by (repository, le)"},
			{"top workflows by queue time", "gantry_usage_queue_seconds_bucket", "topk(10, histogram_quantile(0.99, sum by (repository, workflow, le)"},
		} {
			found := false
			for _, q := range queries {
				names, _ := metricNames(q.expr)
				if slices.Contains(names, want.metric) && strings.Contains(q.expr, want.must) {
					found = true
				}
			}
			if !found {
				t.Errorf("no panel shows %s: want a query of %s with %q", want.what, want.metric, want.must)
			}
		}
	})

	t.Run("docs/metrics.md documents every exported gantry metric", func(t *testing.T) {
		documented := documentedMetrics(t, filepath.Join(root, "docs", "metrics.md"))
		for _, f := range families {
			if strings.HasPrefix(f.GetName(), "gantry_") && !documented[f.GetName()] {
				t.Errorf("%s (%s) is exported but not documented in docs/metrics.md", f.GetName(), f.GetHelp())
			}
		}
		for name := range documented {
			if !familyExported(families, name) {
				t.Errorf("docs/metrics.md documents %s, which the manager does not export", name)
			}
		}
	})
}

// exerciseEveryMetric drives the manager so that every metric family has a sample: a
// job picked up by a runner (pool gauges, pickup latency, webhook deliveries, GitHub
// requests and rate-limit headers), a runner failing with InvalidImageName, and
// GitHub answering 429 (rate limited, then calls blocked; resync errors). Plain
// counters (resync's) are exported from the start.
func exerciseEveryMetric(w *world) {
	t := w.t
	// A cache, and predictive with maxIdle 0: their gauges are exported, and it keeps
	// no runner idle.
	w.create(w.pool("happy").MaxRunners(2).Cache(testutil.CacheSpec("deps"), "/deps").
		Predictive(v1alpha1.PredictiveWarmSpec{MaxIdle: 0}).Obj())
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	rn := w.runnerWithPod("happy")
	w.runJob(rn.Name, job.ID)
	pool := map[string]string{"namespace": w.ns, "pool": "happy"}
	w.eventually("the job's pickup latency observed", 30*time.Second, func() (bool, error) {
		m := findMetric(w.t, "gantry_job_pickup_seconds", pool)
		return m != nil && m.GetHistogram().GetSampleCount() == 1, nil
	})
	// The runner exits: its usage is counted under its pool and repository.
	w.updatePodStatus(rn.Name, func(p *corev1.Pod) { testutil.PodExited(p, 0) })
	used := map[string]string{"namespace": w.ns, "pool": "happy", "repository": "acme/api", "workflow": ""}
	w.eventually("the job's usage counted", 30*time.Second, func() (bool, error) {
		m := findMetric(w.t, "gantry_usage_queue_seconds", used)
		return m != nil && m.GetHistogram().GetSampleCount() == 1, nil
	})

	w.create(w.pool("broken").MinIdle(1).MaxRunners(1).Obj())
	bad := w.runnerWithPod("broken")
	w.setPodWaiting(bad.Name, "InvalidImageName", `couldn't parse image name "UPPER:case"`)
	w.eventually("the runner failure counted", 30*time.Second, func() (bool, error) {
		m := findMetric(w.t, "gantry_runner_failures_total", map[string]string{"namespace": w.ns, "pool": "broken", "reason": v1alpha1.ReasonInvalidImageName})
		return m != nil && m.GetCounter().GetValue() == 1, nil
	})

	// A job killed with its runner — the kubelet evicts the pod under memory pressure —
	// in a pool that does not re-run: counted killed, and as one it could have saved.
	w.create(w.pool("killed").Labels("killed").MaxRunners(1).Obj())
	long, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"killed"}, Duration: simgithub.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	kr := w.runnerWithPod("killed")
	w.setPodRunning(kr.Name)
	killedAgent := w.agent(kr.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := killedAgent.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := killedAgent.NextJob(ctx, 10*time.Second); err != nil || got == nil || got.ID != long.ID {
		t.Fatalf("NextJob = %+v, %v; want job %d", got, err, long.ID)
	}
	if err := killedAgent.StartJob(ctx, long.ID); err != nil {
		t.Fatal(err)
	}
	w.eventually("the runner busy", 30*time.Second, func() (bool, error) {
		for _, r := range w.runners("killed") {
			if r.Name == kr.Name {
				return r.Status.Phase == v1alpha1.RunnerBusy, nil
			}
		}
		return false, nil
	})
	// A dry-run eviction of the busy runner's pod (kubectl drain --dry-run=server): the
	// eviction webhook reviews it and does nothing.
	dryRuns := findMetric(w.t, "gantry_eviction_webhook_reviews_total", map[string]string{"result": "dry_run"}).GetCounter().GetValue()
	dry := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: kr.Name}, DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
	_ = w.c.SubResource("eviction").Create(w.ctx(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: kr.Name}}, dry,
		&client.SubResourceCreateOptions{CreateOptions: client.CreateOptions{DryRun: []string{metav1.DryRunAll}}})
	if got := findMetric(w.t, "gantry_eviction_webhook_reviews_total", map[string]string{"result": "dry_run"}).GetCounter().GetValue(); got != dryRuns+1 {
		t.Errorf("dry-run eviction reviews: %v, want %v", got, dryRuns+1)
	}
	w.updatePodStatus(kr.Name, func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
		p.Status.Message = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. "
	})
	killed := map[string]string{"namespace": w.ns, "pool": "killed", "reason": v1alpha1.ReasonEvicted}
	w.eventually("the killed job counted", 30*time.Second, func() (bool, error) {
		m := findMetric(w.t, "gantry_runner_jobs_killed_total", killed)
		r := findMetric(w.t, "gantry_rerun_jobs_total", map[string]string{"namespace": w.ns, "pool": "killed", "result": "NotOptedIn"})
		return m != nil && m.GetCounter().GetValue() == 1 && r != nil && r.GetCounter().GetValue() == 1, nil
	})

	// Every GitHub call now answers 429: resync (every second) is rate limited once,
	// then its calls are held back while the credential waits.
	w.sim.SetFaults(simgithub.Faults{Endpoints: map[string]simgithub.EndpointFaults{"*": {ErrorRate: 1, ErrorStatus: 429}}})
	defer w.sim.SetFaults(simgithub.Faults{})
	cred := map[string]string{"credential": w.ns + "/" + credsSecret}
	w.eventually("a rate-limited answer, a blocked call and a rate-limited resync", 30*time.Second, func() (bool, error) {
		return findMetric(w.t, "gantry_github_rate_limited_total", cred) != nil &&
			findMetric(w.t, "gantry_github_requests_blocked_total", cred) != nil &&
			findMetric(w.t, "gantry_resync_errors_total", map[string]string{"kind": "rate_limited"}) != nil, nil
	})

	// What the scenario exported says what happened, per label.
	for _, c := range []struct {
		name   string
		labels map[string]string
		check  func(*dto.Metric) bool
	}{
		{"gantry_pool_runners", map[string]string{"namespace": w.ns, "pool": "broken", "state": "failed"}, func(m *dto.Metric) bool { return m.GetGauge().GetValue() == 1 }},
		{"gantry_pool_queued_jobs", pool, func(m *dto.Metric) bool { return m.GetGauge().GetValue() == 0 }},
		{"gantry_pool_degraded", pool, func(m *dto.Metric) bool { return m.GetGauge().GetValue() == 0 }},
		{"gantry_webhook_deliveries_total", map[string]string{"result": "accepted"}, func(m *dto.Metric) bool { return m.GetCounter().GetValue() >= 2 }},
		{"gantry_github_requests_total", map[string]string{"endpoint": "POST /orgs/{org}/actions/runners/generate-jitconfig", "code": "201"}, func(m *dto.Metric) bool { return m.GetCounter().GetValue() >= 1 }},
		{"gantry_usage_jobs_total", used, func(m *dto.Metric) bool { return m.GetCounter().GetValue() == 1 }},
		{"gantry_usage_runner_seconds_total", used, func(m *dto.Metric) bool { return m.GetCounter().GetValue() > 0 }},
		{"gantry_usage_requested_cpu_seconds_total", used, func(m *dto.Metric) bool { return m.GetCounter().GetValue() == 0 }}, // no requests
		{"gantry_github_rate_limit_remaining", map[string]string{"credential": w.ns + "/" + credsSecret, "resource": "core"}, func(m *dto.Metric) bool {
			return m.GetGauge().GetValue() > 0 && m.GetGauge().GetValue() < 5000
		}},
		{"gantry_github_rate_limited_total", map[string]string{"credential": w.ns + "/" + credsSecret, "kind": "secondary"}, func(m *dto.Metric) bool { return m.GetCounter().GetValue() >= 1 }},
		{"gantry_resync_errors_total", map[string]string{"kind": "rate_limited"}, func(m *dto.Metric) bool { return m.GetCounter().GetValue() >= 1 }},
	} {
		m := findMetric(t, c.name, c.labels)
		if m == nil || !c.check(m) {
			t.Errorf("%s%v = %v: not what the scenario did", c.name, c.labels, m)
		}
	}
}

// findMetric returns the sample of family name whose labels include want, or nil.
func findMetric(t *testing.T, name string, want map[string]string) *dto.Metric {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue metric
				}
			}
			return m
		}
	}
	return nil
}

// seriesNames are the names PromQL can select from the gathered families: a
// histogram is queried as NAME_bucket, NAME_sum and NAME_count, a summary as NAME,
// NAME_sum and NAME_count.
func seriesNames(families []*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, f := range families {
		n := f.GetName()
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			out[n+"_bucket"], out[n+"_sum"], out[n+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[n], out[n+"_sum"], out[n+"_count"] = true, true, true
		default:
			out[n] = true
		}
	}
	return out
}

func familyExported(families []*dto.MetricFamily, name string) bool {
	return slices.ContainsFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == name })
}

// declaredMetrics scans the Go sources under dir (tests excluded) for the names of
// the Prometheus metrics they define: Name: "gantry_…" in a metric's options.
func declaredMetrics(t *testing.T, dir string) []string {
	t.Helper()
	re := regexp.MustCompile(`Name:\s*"(gantry_[a-z0-9_]+)"`)
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(src), "prometheus.New") {
			return nil
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			seen[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// documentedMetrics reads the metric names of docs/metrics.md's tables: each row's
// first cell names one or more metrics in backquotes.
func documentedMetrics(t *testing.T, path string) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`([a-z_][a-z0-9_]*)`")
	out := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			out[m[1]] = true
		}
	}
	if len(out) < 10 {
		t.Fatalf("docs/metrics.md documents only %d metrics (%v): its tables are not where this test looks", len(out), out)
	}
	return out
}
