package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/usage"
)

func init() { extraCommands = append(extraCommands, newUsageCommand) }

type usageFlags struct {
	prometheus, window, namespace, pool, output string
	top                                         int
	timeout                                     time.Duration
}

func newUsageCommand() *cobra.Command {
	f := &usageFlags{}
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Say who used the runners: top repositories and workflows by runner time and by queue time",
		Long: `Prints the repositories and workflows that used the most runner time over a window,
with their jobs, requested CPU and queue times, and those whose jobs waited longest.
With --prometheus it reads the usage metrics from that Prometheus (workflows only if the
controller runs with --usage-workflows); without, the RunnerUsage events still in the
cluster (your kubeconfig), which the API server keeps for an hour by default.
See docs/usage.md.`,
		Example: `  gantry usage --prometheus http://prometheus.monitoring:9090 --window 7d
  gantry usage -n ci --pool linux-x64 --top 5
  gantry usage --prometheus http://localhost:9090 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var kube client.Reader
			if f.prometheus == "" {
				cfg, err := ctrl.GetConfig()
				if err != nil {
					return fmt.Errorf("finding the cluster (KUBECONFIG, or ~/.kube/config), or give --prometheus: %w", err)
				}
				if kube, err = client.New(cfg, client.Options{Scheme: manager.Scheme()}); err != nil {
					return fmt.Errorf("connecting to the cluster: %w", err)
				}
			}
			return runUsage(cmd.Context(), kube, f, cmd.OutOrStdout(), time.Now())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.prometheus, "prometheus", "", "URL of the Prometheus that scrapes the controller (default: read the RunnerUsage events in the cluster)")
	fl.StringVar(&f.window, "window", "7d", "how far back to look, a Prometheus duration: 30m, 24h, 7d, 4w")
	fl.IntVar(&f.top, "top", 10, "rows in each table")
	fl.StringVarP(&f.namespace, "namespace", "n", "", "only the pools of this namespace (default: all)")
	fl.StringVar(&f.pool, "pool", "", "only this pool's runners (a name, with -n for its namespace)")
	fl.StringVarP(&f.output, "output", "o", "text", "text or json")
	fl.DurationVar(&f.timeout, "timeout", time.Minute, "give up after this long")
	return cmd
}

// runUsage reads usage over the window ending now — from Prometheus, else from the
// events kube lists — and prints it.
func runUsage(ctx context.Context, kube client.Reader, f *usageFlags, out io.Writer, now time.Time) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("-o %q: want text or json", f.output)
	}
	if f.top < 1 {
		return fmt.Errorf("--top %d: want 1 or more", f.top)
	}
	w, err := model.ParseDuration(f.window)
	if err != nil || w <= 0 {
		return fmt.Errorf("--window %q: want a duration such as 30m, 24h or 7d", f.window)
	}
	window := time.Duration(w)
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var s usage.Summary
	var note string
	if f.prometheus != "" {
		s, err = usage.FromPrometheus(ctx, usage.PrometheusQuery{URL: f.prometheus, Window: window, To: now, Namespace: f.namespace, Pool: f.pool})
		if err != nil {
			return err
		}
		if len(s.Workflows) == 0 && len(s.Repositories) > 0 {
			note = "No workflows: the controller counts them only with --usage-workflows."
		}
	} else {
		recs, unreadable, err := usage.FromEvents(ctx, kube, f.namespace, now.Add(-window), now)
		if err != nil {
			return err
		}
		if f.pool != "" {
			kept := recs[:0]
			for _, r := range recs {
				if r.Pool == f.pool {
					kept = append(kept, r)
				}
			}
			recs = kept
		}
		s = usage.SummarizeEvents(recs, now.Add(-window), now)
		switch {
		case len(recs) == 0:
			note = "No RunnerUsage event in the window: runners write one as they end only when the controller runs with --usage-events, and the API server keeps events for its --event-ttl, an hour by default. For longer windows, give --prometheus."
		case s.From.Sub(now.Add(-window)) > time.Minute:
			note = fmt.Sprintf("The events go back to %s only: the API server keeps events for its --event-ttl (an hour by default). For the whole window, give --prometheus.", s.From.UTC().Format(time.DateTime))
		}
		if unreadable > 0 {
			note = strings.TrimSpace(note + fmt.Sprintf(" %d RunnerUsage events held no record this gantry can read.", unreadable))
		}
	}
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			usage.Summary
			Note string `json:"note,omitempty"`
		}{s, note})
	}
	if err := s.WriteText(out, f.top); err != nil {
		return err
	}
	if note != "" {
		_, err = fmt.Fprintf(out, "\n%s\n", note)
	}
	return err
}
