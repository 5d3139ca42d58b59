package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

func init() { extraCommands = append(extraCommands, newSimCommand) }

func newSimCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run Gantry's simulators",
	}
	cmd.AddCommand(newSimGitHubCommand(), newSimRunCommand(), newSimCompareCommand(), newSimExportTraceCommand(), newSimOracleCommand())
	return cmd
}

// simConfig is the --config file: the objects to create at start, in order.
type simConfig struct {
	Enterprises   []simgithub.EnterpriseSpec   `json:"enterprises"`
	Orgs          []simgithub.OrgSpec          `json:"orgs"`
	Repos         []simgithub.RepoSpec         `json:"repos"`
	Apps          []simgithub.AppSpec          `json:"apps"`
	Installations []simgithub.InstallationSpec `json:"installations"`
	PATs          []simgithub.PAT              `json:"pats"`
	Hooks         []simgithub.HookSpec         `json:"hooks"`
	RunnerGroups  []simgithub.RunnerGroupSpec  `json:"runner_groups"`
	RateLimits    *simgithub.RateLimits        `json:"rate_limits"`
	Faults        *simgithub.Faults            `json:"faults"`
	Settings      *simgithub.Settings          `json:"settings"`
}

func newSimGitHubCommand() *cobra.Command {
	var (
		listen      string
		configFile  string
		publicURL   string
		noRateLimit bool
		noSecondary bool
		failNoMatch bool
		hookTimeout time.Duration
		pollHold    time.Duration
		sessionTTL  time.Duration
		jobLease    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "github",
		Short: "Serve the GitHub simulator (REST, GHES /api/v3, Actions service /_actions/, admin API /_sim/, runner API /_runner/)",
		Long: `Serve Gantry's GitHub simulator until interrupted. It is stateful and in memory;
--config creates enterprises, orgs, repos, Apps, installations, PATs, hooks and runner
groups at start. docs/simulator.md is the reference.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := simgithub.Options{URL: publicURL, FailJobsWithoutRunner: failNoMatch, WebhookTimeout: hookTimeout,
				ActionsPollHold: pollHold, ActionsSessionTimeout: sessionTTL, RunnerLostTimeout: jobLease}
			opts.RateLimits.Disabled = noRateLimit
			opts.RateLimits.Secondary.Disabled = noSecondary
			sim := simgithub.New(opts)
			defer sim.Close()
			if configFile != "" {
				if err := applySimConfig(sim, configFile); err != nil {
					return err
				}
			}
			ln, err := (&net.ListenConfig{}).Listen(cmd.Context(), "tcp", listen)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", listen, err)
			}
			srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
			}()
			fmt.Fprintf(cmd.OutOrStdout(), "GitHub simulator listening on http://%s (GHES API base http://%s/api/v3/)\n", ln.Addr(), ln.Addr())
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8090", "address to listen on")
	f.StringVar(&configFile, "config", "", "JSON file of objects to create at start (see docs/simulator.md)")
	f.StringVar(&publicURL, "url", "", "public root URL used in webhook payloads and JIT configs (default: the request's)")
	f.BoolVar(&noRateLimit, "no-rate-limits", false, "turn rate limits and their headers off, as on GHES")
	f.BoolVar(&noSecondary, "no-secondary-rate-limits", false, "turn secondary rate limits off")
	f.BoolVar(&failNoMatch, "fail-jobs-without-runner", false, "fail a job at once when no registered runner could take it")
	f.DurationVar(&hookTimeout, "webhook-timeout", 10*time.Second, "webhook delivery timeout (GHES: 30s)")
	f.DurationVar(&pollHold, "actions-poll-hold", 50*time.Second, "how long a scale set's message long poll waits before answering 202")
	f.DurationVar(&sessionTTL, "actions-session-timeout", 2*time.Minute, "how long an unused scale-set message session lives (a second session gets 409 until then)")
	f.DurationVar(&jobLease, "runner-lost-timeout", 0, "the runners' job lease: a runner silent this long goes offline and its running job fails, as GitHub fails a dead runner's job about 10m after its last renewal (0: never)")
	return cmd
}

func applySimConfig(sim *simgithub.Sim, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading simulator config: %w", err)
	}
	var cfg simConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("parsing simulator config %s: %w", path, err)
	}
	for _, e := range cfg.Enterprises {
		if _, err := sim.CreateEnterprise(e); err != nil {
			return fmt.Errorf("creating enterprise %s: %w", e.Slug, err)
		}
	}
	for _, o := range cfg.Orgs {
		if _, err := sim.CreateOrg(o); err != nil {
			return fmt.Errorf("creating org %s: %w", o.Login, err)
		}
	}
	for _, r := range cfg.Repos {
		if _, err := sim.CreateRepo(r); err != nil {
			return fmt.Errorf("creating repo %s/%s: %w", r.Owner, r.Name, err)
		}
	}
	for _, a := range cfg.Apps {
		if a.PublicKeyPEM == "" {
			return fmt.Errorf("app %s: the config must give public_key_pem", a.Slug)
		}
		if _, err := sim.CreateApp(a); err != nil {
			return fmt.Errorf("creating app %s: %w", a.Slug, err)
		}
	}
	for _, in := range cfg.Installations {
		if _, err := sim.CreateInstallation(in); err != nil {
			return fmt.Errorf("installing app %d on %s: %w", in.AppID, in.Org, err)
		}
	}
	for _, p := range cfg.PATs {
		if err := sim.AddPAT(p); err != nil {
			return fmt.Errorf("adding PAT of %s: %w", p.Login, err)
		}
	}
	for _, h := range cfg.Hooks {
		if _, err := sim.CreateHook(h); err != nil {
			return fmt.Errorf("creating hook %s: %w", h.URL, err)
		}
	}
	for _, g := range cfg.RunnerGroups {
		if _, err := sim.CreateRunnerGroup(g); err != nil {
			return fmt.Errorf("creating runner group %s: %w", g.Name, err)
		}
	}
	if cfg.RateLimits != nil {
		sim.SetRateLimits(*cfg.RateLimits)
	}
	if cfg.Faults != nil {
		sim.SetFaults(*cfg.Faults)
	}
	if cfg.Settings != nil {
		sim.SetFailJobsWithoutRunner(cfg.Settings.FailJobsWithoutRunner)
	}
	return nil
}
