package usage

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"
)

// Row is the usage of one repository, or of one workflow of a repository, over a
// window. The queue quantiles are nil where no job's queue time is known.
type Row struct {
	Repository          string   `json:"repository"`
	Workflow            string   `json:"workflow,omitempty"`
	Jobs                int      `json:"jobs"`
	RunnerSeconds       float64  `json:"runner_seconds"`
	RequestedCPUSeconds float64  `json:"requested_cpu_seconds"`
	QueueP50            *float64 `json:"queue_seconds_p50,omitempty"`
	QueueP99            *float64 `json:"queue_seconds_p99,omitempty"`

	queue []float64
}

// Summary is who used the runners over a window: per repository (with a None row for
// the runners' time without a job) and per workflow, each sorted by runner-seconds,
// most first, and the totals.
type Summary struct {
	// Source says where the figures come from: "records" (log lines or report),
	// "events" (the RunnerUsage events in the cluster) or "prometheus".
	Source string `json:"source"`
	// From and To bound the window; for events, From is the oldest record found.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Records is how many usage records were read (0 from Prometheus).
	Records int `json:"records,omitempty"`

	Jobs                int     `json:"jobs"`
	RunnerSeconds       float64 `json:"runner_seconds"`
	RequestedCPUSeconds float64 `json:"requested_cpu_seconds"`

	Repositories []Row `json:"repositories"`
	Workflows    []Row `json:"workflows"`
}

// Summarize sums records into a Summary of their repositories and workflows.
func Summarize(recs []Record) Summary {
	s := Summary{Source: "records", Records: len(recs)}
	repos, flows := map[string]*Row{}, map[[2]string]*Row{}
	for _, r := range recs {
		if s.From.IsZero() || r.EndedAt.Before(s.From) {
			s.From = r.EndedAt
		}
		if r.EndedAt.After(s.To) {
			s.To = r.EndedAt
		}
		repo := r.Repository
		if !r.HasJob() {
			repo = None
		}
		add(rowOf(repos, repo, repo, ""), r)
		if r.HasJob() {
			add(rowOf(flows, [2]string{repo, r.Workflow}, repo, r.Workflow), r)
			s.Jobs++
		}
		s.RunnerSeconds += r.RunnerSeconds
		s.RequestedCPUSeconds += r.RequestedCPUSeconds
	}
	s.RunnerSeconds, s.RequestedCPUSeconds = round3(s.RunnerSeconds), round3(s.RequestedCPUSeconds)
	s.Repositories, s.Workflows = finish(repos), finish(flows)
	return s
}

func rowOf[K comparable](m map[K]*Row, k K, repo, workflow string) *Row {
	row := m[k]
	if row == nil {
		row = &Row{Repository: repo, Workflow: workflow}
		m[k] = row
	}
	return row
}

func add(row *Row, r Record) {
	if r.HasJob() {
		row.Jobs++
	}
	row.RunnerSeconds += r.RunnerSeconds
	row.RequestedCPUSeconds += r.RequestedCPUSeconds
	if r.QueueSeconds != nil {
		row.queue = append(row.queue, *r.QueueSeconds)
	}
}

func finish[K comparable](m map[K]*Row) []Row {
	out := make([]Row, 0, len(m))
	for _, row := range m {
		row.RunnerSeconds, row.RequestedCPUSeconds = round3(row.RunnerSeconds), round3(row.RequestedCPUSeconds)
		if len(row.queue) > 0 {
			row.QueueP50, row.QueueP99 = quantile(row.queue, 0.5), quantile(row.queue, 0.99)
		}
		row.queue = nil
		out = append(out, *row)
	}
	SortByRunnerSeconds(out)
	return out
}

// SortByRunnerSeconds sorts rows by runner-seconds, most first (then by name).
func SortByRunnerSeconds(rows []Row) {
	slices.SortStableFunc(rows, func(a, b Row) int {
		if c := cmp.Compare(b.RunnerSeconds, a.RunnerSeconds); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Repository, b.Repository), cmp.Compare(a.Workflow, b.Workflow))
	})
}

// ByQueue returns the rows with a known queue time, longest p99 first (then p50).
func ByQueue(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.QueueP99 != nil {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b Row) int {
		if c := cmp.Compare(*b.QueueP99, *a.QueueP99); c != 0 {
			return c
		}
		return cmp.Compare(*b.QueueP50, *a.QueueP50)
	})
	return out
}

// quantile is the nearest-rank q-quantile of xs, as the simulator's report takes them.
func quantile(xs []float64, q float64) *float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	v := round3(s[max(0, min(i, len(s)-1))])
	return &v
}
