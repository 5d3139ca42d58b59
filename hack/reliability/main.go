// Command reliability assembles the figures the reliability suite (test/reliability)
// wrote, one JSON file per scenario, into reliability.json, and prints a table: the load
// each scenario held, the faults injected and survived, the bad inputs tried, and what
// was lost or leaked — every count measured by the scenario, none assumed. With -sim it
// folds in the report.json of `gantry sim run` scenarios (faults, disruptions-short;
// comma-separated). It exits non-zero when a scenario failed, lost or leaked anything,
// or no figures were found.
//
//	go run ./hack/reliability -in out/reliability/figures -out out/reliability/reliability.json [-sim out/reliability/sim-faults/report.json,…]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// scenario is the part of a test's figures (test/reliability/figures_test.go) read here;
// the whole of it is copied into reliability.json.
type scenario struct {
	Scenario    string     `json:"scenario"`
	Scale       int        `json:"scale"`
	WallSeconds float64    `json:"wall_seconds"`
	LoadAverage [2]float64 `json:"load_average"`
	Finished    bool       `json:"finished"`
	Passed      bool       `json:"passed"`
	Load        struct {
		Jobs               int            `json:"jobs"`
		ControllerReplicas int            `json:"controller_replicas"`
		ControllerStarts   int            `json:"controller_starts"`
		RunnersCreated     int            `json:"runners_created"`
		PeakRunners        int            `json:"peak_runners"`
		RunnersFailed      map[string]int `json:"runners_failed"`
		ObjectsScanned     int            `json:"objects_scanned"`
		LogLinesScanned    int            `json:"log_lines_scanned"`
		ReadOnlyRootFS     bool           `json:"read_only_root_fs"`
	} `json:"load"`
	Faults []struct {
		Kind     string  `json:"kind"`
		Count    int     `json:"count"`
		Seconds  float64 `json:"seconds"`
		Survived bool    `json:"survived"`
		Detail   string  `json:"detail"`
	} `json:"faults"`
	BadInputs map[string]int     `json:"bad_inputs"`
	Lost      lost               `json:"lost"`
	Measures  map[string]float64 `json:"measures"`

	raw json.RawMessage
}

type lost struct {
	Jobs              int `json:"jobs"`
	DuplicateRunners  int `json:"duplicate_runners"`
	BusyRunnersKilled int `json:"busy_runners_killed"`
	SecretsLeaked     int `json:"secrets_leaked"`
	Forbidden         int `json:"forbidden"`
	Leftovers         int `json:"leftovers"`
}

func (l *lost) add(o lost) {
	l.Jobs += o.Jobs
	l.DuplicateRunners += o.DuplicateRunners
	l.BusyRunnersKilled += o.BusyRunnersKilled
	l.SecretsLeaked += o.SecretsLeaked
	l.Forbidden += o.Forbidden
	l.Leftovers += o.Leftovers
}

func (l lost) total() int {
	return l.Jobs + l.DuplicateRunners + l.BusyRunnersKilled + l.SecretsLeaked + l.Forbidden + l.Leftovers
}

// simReport is the part of `gantry sim run`'s report.json read here (docs/sim.md).
type simReport struct {
	Scenario          string `json:"scenario"`
	Finished          bool   `json:"finished"`
	JobsTotal         int    `json:"jobs_total"`
	JobsNeverPickedUp int    `json:"jobs_never_picked_up"`
	JobsUnfinished    int    `json:"jobs_unfinished"`
	BusyRunnersKilled int    `json:"busy_runners_killed"`
	Leftover          struct {
		Runners       int `json:"runners"`
		Pods          int `json:"pods"`
		Secrets       int `json:"secrets"`
		GitHubRunners int `json:"github_runners"`
	} `json:"leftover"`
	Faults *struct {
		Injections      []json.RawMessage `json:"injections"`
		JobsLost        int               `json:"jobs_lost"`
		RecoverySeconds *float64          `json:"recovery_seconds"`
	} `json:"faults"`
	// Disruptions: the disruptions scenarios' own figures (docs/sim.md).
	Disruptions *struct {
		BusyRunnersKilledVoluntarily int `json:"busy_runners_killed_by_voluntary_disruption"`
		JobsKilled                   int `json:"jobs_killed_by_infrastructure_total"`
		JobsRerunGreen               int `json:"jobs_rerun_green"`
		JobsRerunTwice               int `json:"jobs_rerun_twice"`
		OwnFailuresRerun             int `json:"jobs_failed_on_their_own_rerun"`
		Runs                         struct {
			Unfinished int `json:"unfinished"`
		} `json:"runs"`
	} `json:"disruptions"`
}

func main() {
	in := flag.String("in", "out/reliability/figures", "directory of the scenarios' figures (GANTRY_RELIABILITY_OUT)")
	out := flag.String("out", "out/reliability/reliability.json", "where to write reliability.json")
	sim := flag.String("sim", "", "report.json files of `gantry sim run` scenarios to fold in, comma-separated (optional)")
	flag.Parse()
	var sims []string
	for _, s := range strings.Split(*sim, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sims = append(sims, s)
		}
	}
	ok, err := run(*in, *out, sims, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(in, out string, simPaths []string, w io.Writer) (bool, error) {
	files, err := filepath.Glob(filepath.Join(in, "*.json"))
	if err != nil {
		return false, err
	}
	if len(files) == 0 {
		return false, fmt.Errorf("no figures in %s: did the suite run (GANTRY_RELIABILITY_OUT)?", in)
	}
	sort.Strings(files)
	var scenarios []scenario
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		var s scenario
		if err := json.Unmarshal(b, &s); err != nil {
			return false, fmt.Errorf("%s: %w", f, err)
		}
		s.raw = b
		scenarios = append(scenarios, s)
	}

	var total lost
	jobs, faults, survived, bad := 0, 0, 0, 0
	passed := true
	for _, s := range scenarios {
		total.add(s.Lost)
		jobs += s.Load.Jobs
		for _, f := range s.Faults {
			faults++
			if f.Survived {
				survived++
			}
		}
		for _, n := range s.BadInputs {
			bad += n
		}
		passed = passed && s.Passed && s.Finished
	}
	var simReps []*simReport
	simRaws := []json.RawMessage{}
	for _, simPath := range simPaths {
		b, err := os.ReadFile(simPath)
		if err != nil {
			fmt.Fprintf(w, "sim scenario %s: no report (%v)\n", simPath, err)
			passed = false
		} else {
			simRep := &simReport{}
			if err := json.Unmarshal(b, simRep); err != nil {
				return false, fmt.Errorf("%s: %w", simPath, err)
			}
			simReps = append(simReps, simRep)
			simRaws = append(simRaws, b)
			sl := simLost(simRep)
			total.add(sl)
			jobs += simRep.JobsTotal
			if simRep.Faults != nil {
				faults += len(simRep.Faults.Injections)
				if simRep.Finished && sl.total() == 0 {
					survived += len(simRep.Faults.Injections)
				}
			}
			passed = passed && simRep.Finished
		}
	}
	passed = passed && total.total() == 0

	raws := make([]json.RawMessage, len(scenarios))
	for i, s := range scenarios {
		raws[i] = s.raw
	}
	doc := map[string]any{
		"schema_version": 1,
		"generated_at":   time.Now().UTC().Format(time.RFC3339),
		"passed":         passed,
		"machine":        map[string]any{"cpus": runtime.NumCPU(), "load_average": loadAvg()},
		"totals": map[string]any{
			"scenarios": len(scenarios), "jobs": jobs, "faults_injected": faults, "faults_survived": survived,
			"bad_inputs": bad, "lost": total,
		},
		"scenarios":   raws,
		"sim_reports": simRaws,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return false, err
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return false, err
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tLOAD HELD\tFAULTS SURVIVED\tBAD INPUTS\tJOBS LOST\tDUP RUNNERS\tBUSY KILLED\tSECRETS LEAKED\tFORBIDDEN\tLEFT OVER\tRESULT")
	for _, s := range scenarios {
		sv := 0
		for _, f := range s.Faults {
			if f.Survived {
				sv++
			}
		}
		bi := 0
		for _, n := range s.BadInputs {
			bi += n
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", strings.TrimPrefix(s.Scenario, "Test"), loadOf(s), sv, len(s.Faults), bi,
			s.Lost.Jobs, s.Lost.DuplicateRunners, s.Lost.BusyRunnersKilled, s.Lost.SecretsLeaked, s.Lost.Forbidden, s.Lost.Leftovers, verdict(s.Passed && s.Finished && s.Lost.total() == 0))
	}
	for _, simRep := range simReps {
		sl := simLost(simRep)
		n := 0
		if simRep.Faults != nil {
			n = len(simRep.Faults.Injections)
		}
		sv := 0
		if simRep.Finished && sl.total() == 0 {
			sv = n
		}
		fmt.Fprintf(tw, "sim run --scenario %s\t%d jobs\t%d/%d\t-\t%d\t-\t%d\t-\t-\t%d\t%s\n", simRep.Scenario, simRep.JobsTotal, sv, n,
			sl.Jobs, sl.BusyRunnersKilled, sl.Leftovers, verdict(simRep.Finished && sl.total() == 0))
	}
	fmt.Fprintf(tw, "TOTAL\t%d jobs\t%d/%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", jobs, survived, faults, bad,
		total.Jobs, total.DuplicateRunners, total.BusyRunnersKilled, total.SecretsLeaked, total.Forbidden, total.Leftovers, verdict(passed))
	if err := tw.Flush(); err != nil {
		return false, err
	}
	fmt.Fprintln(w)
	for _, s := range scenarios {
		fmt.Fprintf(w, "%s (scale %d, %.0fs, load %.1f→%.1f, read-only root %v):\n", strings.TrimPrefix(s.Scenario, "Test"), s.Scale, s.WallSeconds,
			s.LoadAverage[0], s.LoadAverage[1], s.Load.ReadOnlyRootFS)
		for _, f := range s.Faults {
			fmt.Fprintf(w, "  fault: %s ×%d — %s%s\n", f.Kind, f.Count, verdict(f.Survived), detail(f.Detail))
		}
		if held, ok := s.Measures["stuck_runners_past_pending_timeout"]; ok {
			// The stuck-pods phase: no runner may hold a slot past pendingTimeout, and
			// every job runs once the templates are fixed.
			ok := held == 0 && s.Lost.Jobs == 0
			passed = passed && ok
			fmt.Fprintf(w, "  stuck pods: %g runners held a slot past pendingTimeout; %d of %d jobs ran once the templates were fixed — %s\n",
				held, s.Load.Jobs-s.Lost.Jobs, s.Load.Jobs, verdict(ok))
		}
		var keys []string
		for k := range s.Measures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var ms []string
		for _, k := range keys {
			ms = append(ms, fmt.Sprintf("%s=%g", k, s.Measures[k]))
		}
		fmt.Fprintf(w, "  %s\n", strings.Join(ms, " "))
	}
	fmt.Fprintf(w, "\nwrote %s\n", out)
	return passed, nil
}

func simLost(r *simReport) lost {
	l := lost{Jobs: r.JobsNeverPickedUp + r.JobsUnfinished, BusyRunnersKilled: r.BusyRunnersKilled,
		Leftovers: r.Leftover.Runners + r.Leftover.Pods + r.Leftover.Secrets + r.Leftover.GitHubRunners}
	if r.Faults != nil && r.Faults.JobsLost > l.Jobs {
		l.Jobs = r.Faults.JobsLost
	}
	if d := r.Disruptions; d != nil {
		// A busy runner a drain's eviction killed is lost; the scenario's kills (spot
		// reclaims, kubelet evictions) are not, but each job they killed must end green
		// on its one re-run, and nothing may be re-run twice or re-run after failing on
		// its own.
		l.BusyRunnersKilled = d.BusyRunnersKilledVoluntarily
		l.Jobs += d.JobsKilled - d.JobsRerunGreen + d.JobsRerunTwice + d.OwnFailuresRerun + d.Runs.Unfinished
	}
	return l
}

func loadOf(s scenario) string {
	out := fmt.Sprintf("%d jobs, %d runners (peak %d)", s.Load.Jobs, s.Load.RunnersCreated, s.Load.PeakRunners)
	if s.Load.ControllerReplicas > 1 {
		out += fmt.Sprintf(", %d replicas", s.Load.ControllerReplicas)
	}
	return out
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAILED"
}

func detail(d string) string {
	if d == "" {
		return ""
	}
	return ": " + d
}

func loadAvg() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var a, b5, c float64
	if _, err := fmt.Sscanf(string(b), "%f %f %f", &a, &b5, &c); err != nil {
		return nil
	}
	return []float64{a, b5, c}
}
