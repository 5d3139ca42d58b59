package run

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// Figures are the numbers of a report that a benchmark baseline keeps.
type Figures struct {
	JobsTotal         int     `json:"jobs_total"`
	JobsNeverPickedUp int     `json:"jobs_never_picked_up"`
	PickupP99         float64 `json:"pickup_p99"`
	ReactionP99       float64 `json:"reaction_p99"`
	DrainSeconds      float64 `json:"drain_seconds"`
	RESTCallsPerJob   float64 `json:"rest_calls_per_job"`
	IdleRunnerSeconds float64 `json:"idle_runner_seconds"`
	BusyRunnersKilled int     `json:"busy_runners_killed"`
	Leftover          int     `json:"leftover"`
	CPUSeconds        float64 `json:"controller_cpu_seconds"`
	PeakRSSMiB        float64 `json:"controller_peak_rss_mib"`
}

// FiguresOf extracts a report's figures.
func FiguresOf(r *Report) Figures {
	return Figures{
		JobsTotal: r.JobsTotal, JobsNeverPickedUp: r.JobsNeverPickedUp,
		PickupP99: r.PickupSeconds.P99, ReactionP99: r.ReactionSeconds.P99, DrainSeconds: r.DrainSeconds,
		RESTCallsPerJob: r.RESTCallsPerJob, IdleRunnerSeconds: r.IdleRunnerSeconds, BusyRunnersKilled: r.BusyRunnersKilled,
		Leftover:   r.Leftover.Runners + r.Leftover.Pods + r.Leftover.Secrets + r.Leftover.GitHubRunners,
		CPUSeconds: r.Controller.CPUSeconds, PeakRSSMiB: float64(r.Controller.PeakRSSBytes) / (1 << 20),
	}
}

// Baseline maps a scenario to its figures.
type Baseline map[string]Figures

// ReadReport reads a report.json.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Compare prints, per scenario, the baseline's figures next to the new ones.
func Compare(base Baseline, reports []*Report) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tfigure\tbaseline\tnow\tchange\t")
	sort.Slice(reports, func(i, j int) bool { return reports[i].Scenario < reports[j].Scenario })
	for _, r := range reports {
		now := FiguresOf(r)
		old, ok := base[r.Scenario]
		rows := []struct {
			name     string
			old, new float64
		}{
			{"jobs never picked up", float64(old.JobsNeverPickedUp), float64(now.JobsNeverPickedUp)},
			{"pickup p99 (s)", old.PickupP99, now.PickupP99},
			{"reaction p99 (s)", old.ReactionP99, now.ReactionP99},
			{"drain (s)", old.DrainSeconds, now.DrainSeconds},
			{"REST calls per job", old.RESTCallsPerJob, now.RESTCallsPerJob},
			{"idle runner-seconds", old.IdleRunnerSeconds, now.IdleRunnerSeconds},
			{"busy runners killed", float64(old.BusyRunnersKilled), float64(now.BusyRunnersKilled)},
			{"left over", float64(old.Leftover), float64(now.Leftover)},
			{"controller CPU (s)", old.CPUSeconds, now.CPUSeconds},
			{"controller peak RSS (MiB)", old.PeakRSSMiB, now.PeakRSSMiB},
		}
		for _, row := range rows {
			oldS, change := "—", "new"
			if ok {
				oldS = fmt.Sprintf("%.2f", row.old)
				change = "="
				if row.old != 0 && row.new != row.old {
					change = fmt.Sprintf("%+.0f%%", (row.new-row.old)/row.old*100)
				} else if row.new != row.old {
					change = fmt.Sprintf("%+.2f", row.new-row.old)
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%.2f\t%s\t\n", r.Scenario, row.name, oldS, row.new, change)
		}
	}
	w.Flush()
	return b.String()
}
