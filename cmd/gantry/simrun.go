package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	"github.com/gantry-dev/gantry/internal/sim/run"
	"github.com/gantry-dev/gantry/internal/sim/trace"
)

func newSimRunCommand() *cobra.Command {
	var (
		scenario, out, bins string
		traceFile, faults   string
		demandSource        string
		traceSpeed          float64
		maxRunners          int32
		warmFile            string
		seed                uint64
		noFloor             bool
		controllerBinary    string
		podLabels           bool
		usageEvents         bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run Gantry end to end on a simulated cluster and GitHub, and report",
		Long: `Starts a local cluster (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok nodes), the GitHub simulator, simulated runner agents and the
unchanged gantry controller as a separate process; queues the scenario's jobs; prints a
live view; and writes <out>/report.json and <out>/report.html.

--trace FILE replays a recorded trace of workflow jobs instead (docs/sim.md: the
format; gantry sim export-trace writes one from a real organization). --faults FILE
plays a fault schedule during the workload of any scenario. --pod-labels labels the
runner pods with their job (spec.usage.podLabels; renamed NAME-podlabels). --usage-events
runs the controller with a RunnerUsage event per runner (renamed NAME-usageevents). --demand-source ScaleSet
runs any scenario or trace with the pool's demand from a runner scale set (renamed
NAME-scaleset: burst becomes burst-scaleset). A scenario of many pools (pools > 1, on
ScaleSet only) or with an idle window waits for every pool's session before its
workload; its idle window measures the controller with no job (report.json's idle).

After Gantry's workload, a burst or steady scenario (no trace, no faults, demand from
webhooks) is run again by an oracle that makes only a JIT configuration, a Secret and
a pod per job: the floor, reported beside Gantry's figures (--no-floor skips it).

Scenarios: ` + scenarioList(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := chooseScenario(cmd, scenario, traceFile, traceSpeed)
			if err != nil {
				return err
			}
			if sc, err = withDemandSource(sc, demandSource); err != nil {
				return err
			}
			if faults != "" {
				if sc, err = withFaults(sc, faults); err != nil {
					return err
				}
			}
			if maxRunners > 0 {
				sc.MaxRunners = maxRunners
			}
			if podLabels {
				sc = run.WithPodLabels(sc)
			}
			if usageEvents {
				sc = run.WithUsageEvents(sc)
			}
			if warmFile != "" {
				if sc, err = withWarm(sc, warmFile); err != nil {
					return err
				}
			}
			if bins == "" {
				if bins, err = k8sBins(cmd); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := run.Run(ctx, sc, run.Options{BinDir: bins, OutDir: out, Out: cmd.OutOrStdout(), Seed: seed, NoFloor: noFloor, Controller: controllerBinary})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), "\n"+rep.Summary())
			fmt.Fprintf(cmd.OutOrStdout(), "Report: %s and %s\n", filepath.Join(out, "report.json"), filepath.Join(out, "report.html"))
			if !rep.Clean() {
				return fmt.Errorf("scenario %s did not end clean (unfinished, lost or left over, a busy runner killed, or a pool's scale-set session not open): see the report", sc.Name)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&scenario, "scenario", "demo", "scenario to run: "+strings.Join(scenarioNames(), ", "))
	cmd.Flags().StringVar(&out, "out", "out/sim", "directory for report.json, report.html and logs")
	cmd.Flags().StringVar(&bins, "k8s-bins", "", "directory of the Kubernetes binaries (default: build or find them with hack/k8s-bins.sh)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of random arrivals (and of faults, unless the schedule has its own)")
	cmd.Flags().StringVar(&traceFile, "trace", "", "replay this trace of workflow jobs (JSON Lines, docs/sim.md) instead of a scenario")
	cmd.Flags().Float64Var(&traceSpeed, "trace-speed", 1, "replay the trace this many times faster (arrivals and job durations)")
	cmd.Flags().StringVar(&faults, "faults", "", "play this fault schedule (JSON, docs/sim.md) during the workload")
	cmd.Flags().StringVar(&demandSource, "demand-source", "", "take the pool's demand from Webhook or ScaleSet (spec.demand.source), overriding the scenario's; a scenario that changes source is renamed (docs/sim.md)")
	cmd.Flags().Int32Var(&maxRunners, "max-runners", 0, "override the pool's maxRunners")
	cmd.Flags().StringVar(&warmFile, "warm", "", "give the pool this spec.warm (YAML: schedules, predictive; docs/warm-pools.md), replacing the scenario's")
	cmd.Flags().BoolVar(&noFloor, "no-floor", false, "skip the floor: the oracle's run of a burst or steady workload after Gantry's (docs/sim.md)")
	cmd.Flags().StringVar(&controllerBinary, "controller-binary", "", "run this gantry binary's `gantry controller` instead of this one's (another build, measured on the same scenario; docs/sim.md)")
	cmd.Flags().BoolVar(&usageEvents, "usage-events", false, "run the controller with --usage-events: a RunnerUsage event for each runner that ends (one write each), read back into usage.txt; the run is named NAME-usageevents")
	cmd.Flags().BoolVar(&podLabels, "pod-labels", false, "label runner pods with their job's repository and workflow (spec.usage.podLabels, one pod patch per job); the run is named NAME-podlabels")
	return cmd
}

// withWarm gives a scenario's pool the spec.warm read from file (YAML or JSON), and
// names the run after it: a warm pool's figures are not the scenario's own.
func withWarm(sc run.Scenario, file string) (run.Scenario, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return sc, err
	}
	var w v1alpha1.WarmSpec
	if err := yaml.UnmarshalStrict(b, &w); err != nil {
		return sc, fmt.Errorf("%s: %w", file, err)
	}
	sc.Warm = &w
	if !strings.HasSuffix(sc.Name, "-warm") {
		sc.Name += "-warm"
	}
	sc.Description += ", spec.warm from " + filepath.Base(file)
	return sc, nil
}

// chooseScenario is the built-in scenario, or the replay of a trace file.
func chooseScenario(cmd *cobra.Command, name, traceFile string, speed float64) (run.Scenario, error) {
	if traceFile == "" {
		return run.Lookup(name)
	}
	if cmd.Flags().Changed("scenario") {
		return run.Scenario{}, fmt.Errorf("--trace and --scenario exclude each other: a trace is its own workload")
	}
	if speed <= 0 {
		return run.Scenario{}, fmt.Errorf("--trace-speed must be positive")
	}
	f, err := os.Open(traceFile)
	if err != nil {
		return run.Scenario{}, err
	}
	defer f.Close()
	tr, err := trace.Parse(f)
	if err != nil {
		return run.Scenario{}, fmt.Errorf("%s: %w", traceFile, err)
	}
	return run.TraceScenario(tr, traceFile, speed), nil
}

// withDemandSource is sc on the demand source the --demand-source flag names (sc as
// it is when the flag is empty).
func withDemandSource(sc run.Scenario, flag string) (run.Scenario, error) {
	if flag == "" {
		return sc, nil
	}
	src, err := run.ParseDemandSource(flag)
	if err != nil {
		return sc, fmt.Errorf("--demand-source: %w", err)
	}
	return run.WithDemandSource(sc, src), nil
}

// withFaults gives a scenario a fault schedule, and the faults scenario's recovery
// settings where it has none, so that a lost node is recovered within the run.
func withFaults(sc run.Scenario, path string) (run.Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return sc, err
	}
	sched, err := fault.Parse(data)
	if err != nil {
		return sc, fmt.Errorf("%s: %w", path, err)
	}
	sc.Faults = &sched
	ref := run.Scenarios["faults"]
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&sc.NodeLostTimeout, ref.NodeLostTimeout)
	set(&sc.UnreachableToleration, ref.UnreachableToleration)
	set(&sc.NodeMonitorGracePeriod, ref.NodeMonitorGracePeriod)
	set(&sc.FailedRunnerRetention, ref.FailedRunnerRetention)
	set(&sc.RunnerLostTimeout, ref.RunnerLostTimeout)
	sc.Description += " — with the faults of " + path
	return sc, nil
}

func scenarioNames() []string {
	var names []string
	for n := range run.Scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func scenarioList() string {
	var names []string
	for n, sc := range run.Scenarios {
		names = append(names, n+" ("+sc.Description+")")
	}
	sort.Strings(names)
	return strings.Join(names, "; ")
}

// k8sBins builds (if needed) and finds the Kubernetes binaries with hack/k8s-bins.sh,
// showing its progress.
func k8sBins(cmd *cobra.Command) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	script := filepath.Join("hack", "k8s-bins.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("no --k8s-bins given and %s not found: run from the repository root, or pass --k8s-bins", script)
	}
	c := exec.CommandContext(cmd.Context(), "bash", script)
	c.Stderr = cmd.ErrOrStderr()
	outb, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("building the Kubernetes binaries: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(outb)), "\n")
	return lines[len(lines)-1], nil
}
