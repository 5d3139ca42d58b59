package run

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/usage"
)

// UsageReport is who used the pool during the run: the controller's usage records, read
// from its log as a log pipeline reads them (docs/usage.md), summed by repository and
// workflow; beside them the run's own count of runner time, taken without them.
type UsageReport struct {
	// Records is how many usage records the controller logged; RunnerPods how many
	// runner pods the agents' watch saw.
	Records    int `json:"records"`
	RunnerPods int `json:"runner_pods"`
	// RunnerSeconds is the records' runner_seconds summed.
	RunnerSeconds float64 `json:"runner_seconds"`
	// RunTotalRunnerSeconds is the run's total, measured apart from the controller: over
	// every runner pod the agents' pod watch saw, the time from the watch seeing it
	// created to its runner process exiting — or, for one that never exited, to the
	// agent seeing it deleted (killed), or gone.
	RunTotalRunnerSeconds float64 `json:"run_total_runner_seconds"`
	// DifferencePercent is (RunnerSeconds − RunTotalRunnerSeconds) over
	// RunTotalRunnerSeconds, in percent; nil when the agents saw no runner time.
	DifferencePercent *float64 `json:"difference_percent"`
	// Jobs, RequestedCPUSeconds, RequestedMemoryGiBSeconds: the records' sums.
	Jobs                      int     `json:"jobs"`
	RequestedCPUSeconds       float64 `json:"requested_cpu_seconds"`
	RequestedMemoryGiBSeconds float64 `json:"requested_memory_gib_seconds"`
	// Repositories and Workflows: usage by repository (repository "none": runner time
	// without a job) and by workflow, most runner time first.
	Repositories []usage.Row `json:"repositories"`
	Workflows    []usage.Row `json:"workflows"`
	// EventsWritten: the controller ran with --usage-events (Scenario.UsageEvents).
	// Events is then how many RunnerUsage events the cluster held once the controller
	// stopped, read as `gantry usage` reads them; usage.txt in the run's directory is
	// what `gantry usage` printed of them. EventsError says why they could not be read.
	EventsWritten bool   `json:"events_written"`
	Events        int    `json:"events"`
	EventsError   string `json:"events_error,omitempty"`
	// OverTime is the runners in use by repository over the run, for report.html.
	OverTime *UsageOverTime `json:"over_time,omitempty"`
	// Error says why the records could not be read.
	Error string `json:"error,omitempty"`
}

// UsageOverTime is the runner pods alive by repository, every Step seconds from the
// run's start: the most used repositories (usageSeries) one series each, the rest
// "other", a runner's time without a job "none".
type UsageOverTime struct {
	Step   float64       `json:"step_seconds"`
	Series []UsageSeries `json:"series"`
}

// UsageSeries is one repository's runners alive at each step.
type UsageSeries struct {
	Repository string    `json:"repository"`
	Runners    []float64 `json:"runners"`
}

// usageSeries is how many repositories the chart shows apart.
const usageSeries = 6

// usageInputs is what the run took for the usage report.
type usageInputs struct {
	records       []usage.Record
	err           error
	eventsWritten bool
	events        int
	eventErr      error
}

// readUsageLog reads the usage records of a controller log of JSON lines (every
// process of the run, the markers between them skipped).
func readUsageLog(path string) ([]usage.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []usage.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var line struct {
			Msg   string          `json:"msg"`
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != usage.LogMessage {
			continue
		}
		rec, err := usage.Parse(line.Usage)
		if err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// readUsageEvents reads the RunnerUsage events of the run's namespace, as `gantry
// usage` does, writes what it prints to dir/usage.txt, and returns how many there were.
func readUsageEvents(ctx context.Context, c client.Reader, start time.Time, dir string) (int, error) {
	now := time.Now()
	recs, bad, err := usage.FromEvents(ctx, c, namespace, start.Add(-time.Hour), now)
	if err != nil {
		return 0, err
	}
	f, err := os.Create(filepath.Join(dir, "usage.txt"))
	if err != nil {
		return len(recs), err
	}
	defer f.Close()
	if err := usage.SummarizeEvents(recs, start, now).WriteText(f, 10); err != nil {
		return len(recs), err
	}
	if bad > 0 {
		return len(recs), fmt.Errorf("%d RunnerUsage events held no readable record", bad)
	}
	return len(recs), nil
}

// usageReport sums the run's usage records and sets them beside the run's own total.
func usageReport(in usageInputs, events []agent.Event, start time.Time) *UsageReport {
	if in.err != nil && len(in.records) == 0 {
		return &UsageReport{Error: in.err.Error()}
	}
	s := usage.Summarize(in.records)
	u := &UsageReport{
		Records: len(in.records), Jobs: s.Jobs, RunnerSeconds: round1(s.RunnerSeconds), RequestedCPUSeconds: round1(s.RequestedCPUSeconds),
		Repositories: s.Repositories, Workflows: s.Workflows, EventsWritten: in.eventsWritten, Events: in.events,
	}
	for _, r := range in.records {
		u.RequestedMemoryGiBSeconds += r.RequestedMemoryGiBSeconds
	}
	u.RequestedMemoryGiBSeconds = round1(u.RequestedMemoryGiBSeconds)
	var total float64
	total, u.RunnerPods = runnerPodSeconds(events)
	u.RunTotalRunnerSeconds = round1(total)
	if total > 0 {
		u.DifferencePercent = val(math.Round((s.RunnerSeconds-total)/total*100*100) / 100)
	}
	if in.err != nil {
		u.Error = in.err.Error()
	}
	if in.eventErr != nil {
		u.EventsError = in.eventErr.Error()
	}
	u.OverTime = usageOverTime(in.records, start)
	return u
}

// runnerPodSeconds is the run's total runner time, from the agents' events alone: per
// runner pod, from the watch seeing it created to its runner exiting, else to its
// agent being killed (the pod deleted under it), else to the pod gone.
func runnerPodSeconds(events []agent.Event) (float64, int) {
	type life struct{ created, exited, killed, deleted time.Time }
	pods := map[string]*life{}
	for _, e := range events {
		p := pods[e.Pod]
		if p == nil {
			p = &life{}
			pods[e.Pod] = p
		}
		switch e.Kind {
		case agent.EventCreated:
			p.created = e.At
		case agent.EventExited:
			p.exited = e.At
		case agent.EventKilled:
			if e.Cause != agent.CauseStopped {
				p.killed = e.At
			}
		case agent.EventDeleted:
			p.deleted = e.At
		}
	}
	var total float64
	n := 0
	for _, p := range pods {
		if p.created.IsZero() {
			continue // a workflow pod's events: its runner pod's name, no creation of its own
		}
		end := p.exited
		for _, t := range []time.Time{p.killed, p.deleted} {
			if end.IsZero() {
				end = t
			}
		}
		if end.IsZero() {
			continue // still there when the run ended: left over, counted there
		}
		n++
		total += math.Max(0, end.Sub(p.created).Seconds())
	}
	return total, n
}

// usageOverTime counts each step's runner pods alive by repository, from the records.
func usageOverTime(recs []usage.Record, start time.Time) *UsageOverTime {
	var end time.Time
	for _, r := range recs {
		if r.EndedAt.After(end) {
			end = r.EndedAt
		}
	}
	if len(recs) == 0 || !end.After(start) {
		return nil
	}
	span := end.Sub(start).Seconds()
	step := math.Max(1, math.Ceil(span/150))
	n := int(math.Ceil(span/step)) + 1
	// The most used repositories keep a series of their own.
	s := usage.Summarize(recs)
	shown := map[string]bool{}
	var names []string
	for _, row := range s.Repositories {
		if row.Repository != usage.None && len(names) < usageSeries {
			shown[row.Repository] = true
			names = append(names, row.Repository)
		}
	}
	names = append(names, usage.Other, usage.None) // the busiest first: the bottom layer
	series := map[string][]float64{}
	for _, name := range names {
		series[name] = make([]float64, n)
	}
	for _, r := range recs {
		name := usage.None
		switch {
		case r.HasJob() && shown[r.Repository]:
			name = r.Repository
		case r.HasJob():
			name = usage.Other
		}
		from, to := r.PodCreatedAt.Sub(start).Seconds(), r.EndedAt.Sub(start).Seconds()
		for i := max(0, int(math.Ceil(from/step))); i < n && float64(i)*step < to; i++ {
			series[name][i]++
		}
	}
	out := &UsageOverTime{Step: step}
	for _, name := range names {
		if slices.ContainsFunc(series[name], func(x float64) bool { return x > 0 }) {
			out.Series = append(out.Series, UsageSeries{Repository: name, Runners: series[name]})
		}
	}
	return out
}

// WithUsageEvents is sc with the controller's --usage-events, named NAME-usageevents:
// the same run, with a RunnerUsage event for each runner that ends (one write each),
// read back as `gantry usage` reads them into usage.txt.
func WithUsageEvents(sc Scenario) Scenario {
	if sc.UsageEvents {
		return sc
	}
	sc.UsageEvents = true
	sc.Name += "-usageevents"
	sc.Description += ", a RunnerUsage event for each runner that ends (--usage-events)"
	return sc
}

// WithPodLabels is sc with its pool's spec.usage.podLabels on, named NAME-podlabels:
// the same run, each runner pod labeled with its job for cost tools, at one pod patch
// per job.
func WithPodLabels(sc Scenario) Scenario {
	if sc.PodLabels {
		return sc
	}
	sc.PodLabels = true
	sc.Name += "-podlabels"
	sc.Description += ", runner pods labeled with their job's repository and workflow (spec.usage.podLabels)"
	return sc
}
