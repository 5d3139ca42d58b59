package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gantry-dev/gantry/internal/sim/run"
)

func newSimCompareCommand() *cobra.Command {
	var baseline string
	var write bool
	cmd := &cobra.Command{
		Use:   "compare REPORT.json...",
		Short: "Compare sim reports with a baseline file (or write the baseline); several reports of a scenario count as one, by their medians",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var reports []*run.Report
			for _, a := range args {
				r, err := run.ReadReport(a)
				if err != nil {
					return err
				}
				reports = append(reports, r)
			}
			base := run.Baseline{}
			if b, err := os.ReadFile(baseline); err == nil {
				if err := json.Unmarshal(b, &base); err != nil {
					return fmt.Errorf("%s: %w", baseline, err)
				}
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if write {
				runs, _ := run.RunsByScenario(reports)
				for scenario, figures := range runs {
					base[scenario] = run.MedianFigures(figures)
				}
				b, err := json.MarshalIndent(base, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(baseline, append(b, '\n'), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s\n", baseline)
				return nil
			}
			fmt.Fprint(cmd.OutOrStdout(), run.Compare(base, reports))
			return nil
		},
	}
	cmd.Flags().StringVar(&baseline, "baseline", "bench/baseline.json", "baseline file")
	cmd.Flags().BoolVar(&write, "write", false, "write the reports' figures (a scenario's median over its reports) into the baseline instead of comparing")
	return cmd
}
