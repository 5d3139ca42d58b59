package ux

import (
	"encoding/json"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// The real manager, driven through a job, a runner failure and a rate limit, exports
// every metric Gantry declares; the Grafana dashboard queries only metrics it exports
// and has the panels an operator needs; docs/metrics.md documents exactly the
// gantry_* metrics it exports.
func TestExportedMetrics(t *testing.T) {
	w := newWorld(t)
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

type query struct{ panel, expr string }

// dashboardQueries reads every PromQL expression of the dashboard: the panels'
// targets (rows' nested panels included) and the query variables' label_values.
func dashboardQueries(t *testing.T, path string) []query {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string  `json:"title"`
		UID        string  `json:"uid"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(strings.NewReader(string(src)))
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("%s is not valid JSON: %v", path, err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Errorf("the dashboard has no title or uid")
	}
	var out []query
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d is used twice", p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q lies outside the 24-column grid: %+v", p.Title, p.GridPos)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q has a target without an expression", p.Title)
				}
				out = append(out, query{p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("variable %s: unreadable query %s", v.Name, v.Query)
			}
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: want label_values(SELECTOR, LABEL), got %q", v.Name, q.Query)
			continue
		}
		out = append(out, query{"variable " + v.Name, m[1]})
	}
	if len(out) < 10 {
		t.Fatalf("found only %d queries in %s", len(out), path)
	}
	return out
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		X int `json:"x"`
		W int `json:"w"`
	} `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// promFunctions are PromQL's functions and aggregation operators.
var promFunctions = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`abs absent absent_over_time acos acosh asin asinh atan atanh avg avg_over_time
		bottomk ceil changes clamp clamp_max clamp_min cos cosh count count_over_time count_values
		day_of_month day_of_week day_of_year days_in_month deg delta deriv exp floor group
		histogram_avg histogram_count histogram_fraction histogram_quantile histogram_stddev
		histogram_stdvar histogram_sum holt_winters hour idelta increase irate label_join
		label_replace last_over_time limitk limit_ratio ln log10 log2 mad_over_time max
		max_over_time min min_over_time minute month pi predict_linear present_over_time
		quantile quantile_over_time rad rate resets round scalar sgn sin sinh sort
		sort_by_label sort_by_label_desc sort_desc sqrt stddev stddev_over_time stdvar
		stdvar_over_time sum sum_over_time tan tanh time timestamp topk vector year`) {
		promFunctions[f] = true
	}
}

// promKeywords are PromQL's binary operators and modifiers spelled as words.
var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true}

// promGroupings take a parenthesized list of label names.
var promGroupings = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// metricNames returns the metric names a PromQL expression selects. It is strict:
// string literals, label matchers ({…}), ranges ([…]), numbers and durations,
// Grafana variables ($x, ${x}) and the label lists of by/without/on/ignoring/
// group_left/group_right are skipped; a word followed by "(" must be a PromQL function;
// every other word that is not an operator keyword is a metric name — so a misspelled
// function or metric fails the check instead of passing it.
func metricNames(expr string) ([]string, error) {
	var names []string
	depth := 0
	isWordStart := func(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
	isWord := func(c byte) bool { return isWordStart(c) || (c >= '0' && c <= '9') }
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n') {
			i++
		}
		return i
	}
	// closeOf skips from an opening bracket at i to just after its closing one,
	// stepping over string literals.
	closeOf := func(i int, open, close byte) (int, error) {
		level := 0
		for j := i; j < len(expr); j++ {
			switch expr[j] {
			case '"', '\'', '`':
				end, err := skipString(expr, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case open:
				level++
			case close:
				level--
				if level == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %q at offset %d", open, i)
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, err := closeOf(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end, err := closeOf(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unterminated ${ at offset %d", i)
				}
				i += end + 1
				continue
			}
			for i < len(expr) && isWord(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isWord(expr[i]) || expr[i] == '.') {
				i++
			}
		case isWordStart(c):
			start := i
			for i < len(expr) && isWord(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := skipSpace(i)
			switch {
			case promGroupings[word]:
				if next < len(expr) && expr[next] == '(' {
					end, err := closeOf(next, '(', ')')
					if err != nil {
						return nil, err
					}
					i = end
				} else if word != "group_left" && word != "group_right" {
					return nil, fmt.Errorf("%s without a label list at offset %d", word, start)
				}
			case promKeywords[word]:
			case next < len(expr) && expr[next] == '(':
				if !promFunctions[word] {
					return nil, fmt.Errorf("unknown function %s", word)
				}
			case promFunctions[word] && (strings.HasPrefix(expr[next:], "by") || strings.HasPrefix(expr[next:], "without")):
				// an aggregation with its grouping first: sum by (le) (…)
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
		case c == '(':
			depth++
			i++
		case c == ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ) at offset %d", i)
			}
			i++
		case strings.IndexByte(" \t\n+-*/%^=!<>,", c) >= 0:
			i++
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", c, i)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced parentheses")
	}
	return names, nil
}

// skipString returns the offset just after the string literal starting at i.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == '\\' && q != '`' {
			j++
			continue
		}
		if s[j] == q {
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at offset %d", i)
}

// The extraction is strict: it finds the metrics of each form a dashboard uses, and
// refuses what it cannot read instead of passing it.
func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		want    []string
		wantErr string
	}{
		{expr: `gantry_pool_queued_jobs`, want: []string{"gantry_pool_queued_jobs"}},
		{expr: `sum by (namespace, pool, state) (gantry_pool_runners{namespace=~"$namespace", state!="desired"})`, want: []string{"gantry_pool_runners"}},
		{expr: `histogram_quantile(0.95, sum by (le) (rate(gantry_job_pickup_seconds_bucket{pool=~"${pool}"}[$__rate_interval])))`, want: []string{"gantry_job_pickup_seconds_bucket"}},
		{expr: `sum(rate(a_total[5m])) / ignoring(code) group_left sum(rate(b_total[5m])) * 100`, want: []string{"a_total", "b_total"}},
		{expr: `max without (instance) (x) > bool 0 and on (pool) y offset 1h`, want: []string{"x", "y"}},
		{expr: `sum(rate(controller_runtime_reconcile_errors_total{controller=~"runner|runnerpool", x="}"}[5m]))`, want: []string{"controller_runtime_reconcile_errors_total"}},
		{expr: `histogram_quantiel(0.5, x)`, wantErr: "unknown function histogram_quantiel"},
		{expr: `sum(rate(x[5m])`, wantErr: "unbalanced"},
		{expr: `sum by pool (x)`, wantErr: "without a label list"},
		{expr: `x{a="b}`, wantErr: "unterminated"},
		{expr: `x # comment`, wantErr: "unexpected"},
	} {
		got, err := metricNames(tc.expr)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("metricNames(%q) = %v, %v; want an error with %q", tc.expr, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
}
