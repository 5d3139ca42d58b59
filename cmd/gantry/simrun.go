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

	"github.com/spf13/cobra"

	"github.com/gantry-dev/gantry/internal/sim/run"
)

func newSimRunCommand() *cobra.Command {
	var (
		scenario, out, bins string
		seed                uint64
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run Gantry end to end on a simulated cluster and GitHub, and report",
		Long: `Starts a local cluster (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok nodes), the GitHub simulator, simulated runner agents and the
unchanged gantry controller as a separate process; queues the scenario's jobs; prints a
live view; and writes <out>/report.json and <out>/report.html.

Scenarios: ` + scenarioList(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := run.Lookup(scenario)
			if err != nil {
				return err
			}
			if bins == "" {
				if bins, err = k8sBins(cmd); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := run.Run(ctx, sc, run.Options{BinDir: bins, OutDir: out, Out: cmd.OutOrStdout(), Seed: seed})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), "\n"+rep.Summary())
			fmt.Fprintf(cmd.OutOrStdout(), "Report: %s and %s\n", filepath.Join(out, "report.json"), filepath.Join(out, "report.html"))
			if !rep.Finished || rep.JobsNeverPickedUp > 0 || rep.Leftover != (run.Leftover{}) {
				return fmt.Errorf("scenario %s did not end clean: see the report", sc.Name)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&scenario, "scenario", "demo", "scenario to run: "+scenarioList())
	cmd.Flags().StringVar(&out, "out", "out/sim", "directory for report.json, report.html and logs")
	cmd.Flags().StringVar(&bins, "k8s-bins", "", "directory of the Kubernetes binaries (default: build or find them with hack/k8s-bins.sh)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of random arrivals")
	return cmd
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
