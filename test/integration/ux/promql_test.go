package ux

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Grafana dashboard's PromQL, read for the metric names it queries.

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
