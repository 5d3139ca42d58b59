package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gantry-dev/gantry/internal/controller/netpol"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/version"
)

func init() { extraCommands = append(extraCommands, newControllerCommand) }

// controllerFlags are the controller's settings. Every flag falls back to an environment
// variable: --webhook-secret to GANTRY_WEBHOOK_SECRET, and so on.
type controllerFlags struct {
	metricsAddr, probeAddr, webhookAddr, pprofAddr string
	webhookAdvertiseAddr                           string
	evictionWebhookAddr, evictionWebhookCertDir    string
	webhookSecret                                  string
	leaderElect                                    bool
	leaderElectionNamespace                        string
	leaseDuration, renewDeadline                   time.Duration
	retryPeriod                                    time.Duration
	namespaces                                     []string
	concurrency, runnerConcurrency                 int
	githubTimeout, resyncInterval                  time.Duration
	failedRunnerRetention                          time.Duration
	githubCABundle                                 string
	runnerNetworkPolicy                            string
	githubAllowHTTP                                bool
	logFormat, logLevel                            string
	usageRepositories, usageWorkflows              int
	usageEvents                                    bool
}

func newControllerCommand() *cobra.Command {
	f := &controllerFlags{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the Gantry controller manager (RunnerPool and Runner controllers, webhook endpoint)",
		Long: `Runs Gantry's controllers with leader election, health and readiness probes
(/healthz, /readyz), Prometheus metrics (/metrics) and GitHub's workflow_job webhook
endpoint (/webhook). Every flag can also be set with an environment variable: the flag's
name in capitals, dashes as underscores, prefixed with GANTRY_ (GANTRY_LEADER_ELECT=true).`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd.Flags())
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runController(f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint (0 disables)")
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fl.StringVar(&f.pprofAddr, "pprof-bind-address", "", "address of Go's profiling endpoints, /debug/pprof/ (default: off; never expose it beyond the pod)")
	fl.StringVar(&f.webhookAddr, "webhook-bind-address", ":9090", "address of GitHub's webhook endpoint, /webhook")
	fl.StringVar(&f.webhookAdvertiseAddr, "webhook-advertise-address", "", "HOST:PORT where the other replicas reach this one's webhook endpoint, so that a standby forwards deliveries to the leader (default: $POD_IP and the webhook port)")
	fl.StringVar(&f.evictionWebhookAddr, "eviction-webhook-bind-address", "", "address of the eviction webhook (HTTPS, /evict-runner), which retires an idle runner within its pod's eviction so that a drain need not wait for the pool's PodDisruptionBudget (default: off; the chart turns it on)")
	fl.StringVar(&f.evictionWebhookCertDir, "eviction-webhook-cert-dir", "", "directory holding the eviction webhook's certificate, tls.crt and tls.key (read again when they change)")
	fl.StringVar(&f.webhookSecret, "webhook-secret", "", "NAMESPACE/NAME of the Secret whose webhook_secret key verifies deliveries (needed for demand.source Webhook; without it every delivery is refused)")
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "elect one active replica (run several for HA)")
	fl.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's)")
	fl.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", manager.DefaultLeaseDuration, "how long a leader's lease lasts unrenewed: a standby takes over about this plus the retry period after a leader dies without releasing it")
	fl.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", manager.DefaultRenewDeadline, "how long the leader keeps trying to renew its lease before it steps down (less than the lease duration)")
	fl.DurationVar(&f.retryPeriod, "leader-elect-retry-period", manager.DefaultRetryPeriod, "how often replicas try to acquire or renew the lease")
	fl.StringSliceVar(&f.namespaces, "namespaces", nil, "namespaces to watch, comma-separated (default: all)")
	fl.IntVar(&f.concurrency, "concurrency", 16, "pools reconciled at once")
	fl.IntVar(&f.runnerConcurrency, "runner-concurrency", 64, "runners reconciled at once")
	fl.DurationVar(&f.githubTimeout, "github-timeout", 30*time.Second, "timeout of each GitHub API request")
	fl.StringVar(&f.githubCABundle, "github-ca-bundle", "", "PEM file of CA certificates trusted, besides the system's, for GitHub Enterprise Server hosts (a private CA)")
	fl.StringVar(&f.runnerNetworkPolicy, "runner-network-policy", "", "YAML file of a NetworkPolicy (a name, no namespace) put in every namespace that holds RunnerPools, owned by its pools (docs/security.md; default: none)")
	fl.BoolVar(&f.githubAllowHTTP, "github-allow-http", false, "accept http:// GitHub URLs (the GitHub simulator, test servers); without it such pools are not Ready")
	fl.DurationVar(&f.resyncInterval, "resync-interval", time.Minute, "how often queued jobs are listed from GitHub to recover lost webhooks: the bound on how long a lost delivery can delay a job")
	fl.DurationVar(&f.failedRunnerRetention, "failed-runner-retention", 10*time.Minute, "how long a Failed Runner stays visible (with its reason) before it is removed and unregistered")
	fl.IntVar(&f.usageRepositories, "usage-repositories", manager.DefaultUsageRepositories, "repositories with usage series of their own, the first to finish a job; the rest are counted as \"other\" (docs/usage.md; 0: none)")
	fl.IntVar(&f.usageWorkflows, "usage-workflows", 0, "(repository, workflow) pairs with usage series of their own; the rest are \"other\" (0: no workflow label)")
	fl.BoolVar(&f.usageEvents, "usage-events", false, "write a RunnerUsage event for each runner that ends (one API server write each), which `gantry usage` reads without Prometheus; the usage log line and metrics are written either way")
	fl.StringVar(&f.logFormat, "log-format", "json", "json or text")
	fl.StringVar(&f.logLevel, "log-level", "info", "info, debug (V(1)) or trace (V(2))")
	return cmd
}

// applyEnv sets every flag not given on the command line from GANTRY_<FLAG_NAME>.
func applyEnv(fs *pflag.FlagSet) error {
	var errs []string
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed {
			return
		}
		name := "GANTRY_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := fs.Set(fl.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", name, v, err))
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("invalid environment: %s", strings.Join(errs, "; "))
	}
	return nil
}

func newLogger(format, level string) (zap.Opts, error) {
	var lvl zapcore.Level
	switch level {
	case "info":
		lvl = zapcore.InfoLevel
	case "debug":
		lvl = zapcore.Level(-1)
	case "trace":
		lvl = zapcore.Level(-2)
	default:
		return nil, fmt.Errorf("--log-level %q: want info, debug or trace", level)
	}
	var enc zap.Opts
	switch format {
	case "json":
		enc = zap.JSONEncoder()
	case "text":
		enc = zap.ConsoleEncoder()
	default:
		return nil, fmt.Errorf("--log-format %q: want json or text", format)
	}
	return func(o *zap.Options) {
		enc(o)
		o.Level = lvl
		o.Development = false
		o.ZapOpts = append(o.ZapOpts, uberzap.WrapCore(lazyFields))
	}, nil
}

// lazyFields makes a logger's fields (WithValues) encoded only once it writes a line.
// controller-runtime gives every reconcile a logger with its object and a reconcile ID,
// and most reconciles write nothing at the default level. Encoded ahead, WithValues took
// about 4 % of the controller's CPU under load; lazily, about 1.5 % (pprof, `gantry sim
// run --scenario steady`).
func lazyFields(c zapcore.Core) zapcore.Core { return lazyCore{c} }

// lazyCore defers With to zapcore.NewLazyWith, and stays lazy through a chain of them.
type lazyCore struct{ zapcore.Core }

func (c lazyCore) With(fields []zapcore.Field) zapcore.Core {
	return lazyCore{zapcore.NewLazyWith(c.Core, fields)}
}

// advertiseAddress is --webhook-advertise-address, or else the pod's IP (POD_IP, from
// the downward API) with the webhook port; "" when neither is known.
func advertiseAddress(flag, bind string) string {
	if flag != "" {
		return flag
	}
	ip := os.Getenv("POD_IP")
	_, port, err := net.SplitHostPort(bind)
	if ip == "" || err != nil || port == "" {
		return ""
	}
	return net.JoinHostPort(ip, port)
}

func parseNamespacedName(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("%q is not NAMESPACE/NAME", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

func runController(f *controllerFlags) error {
	logOpts, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(logOpts))
	log := ctrl.Log.WithName("setup")
	var hookSecret types.NamespacedName
	if f.webhookSecret == "" {
		log.Info("No --webhook-secret: the webhook endpoint refuses every delivery. Pools with demand.source ScaleSet need none; " +
			"Webhook pools then learn of jobs only from resync")
	} else if hookSecret, err = parseNamespacedName(f.webhookSecret); err != nil {
		return fmt.Errorf("--webhook-secret: %w", err)
	}
	var caBundle []byte
	if f.githubCABundle != "" {
		if caBundle, err = os.ReadFile(f.githubCABundle); err != nil {
			return fmt.Errorf("--github-ca-bundle: %w", err)
		}
	}
	var runnerPolicy *networkingv1.NetworkPolicy
	if f.runnerNetworkPolicy != "" {
		b, err := os.ReadFile(f.runnerNetworkPolicy)
		if err != nil {
			return fmt.Errorf("--runner-network-policy: %w", err)
		}
		if runnerPolicy, err = netpol.Parse(b); err != nil {
			return fmt.Errorf("--runner-network-policy %s: %w", f.runnerNetworkPolicy, err)
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the cluster (KUBECONFIG or in-cluster config): %w", err)
	}
	if f.usageRepositories < 0 || f.usageWorkflows < 0 {
		return fmt.Errorf("--usage-repositories %d, --usage-workflows %d: want 0 or more", f.usageRepositories, f.usageWorkflows)
	}
	usageRepositories := f.usageRepositories
	if usageRepositories == 0 {
		usageRepositories = -1 // none; the manager's 0 is its default
	}
	g, err := manager.New(cfg, manager.Options{
		MetricsAddr:             f.metricsAddr,
		PprofAddr:               f.pprofAddr,
		ProbeAddr:               f.probeAddr,
		WebhookAddr:             f.webhookAddr,
		WebhookSecret:           hookSecret,
		WebhookAdvertiseAddress: advertiseAddress(f.webhookAdvertiseAddr, f.webhookAddr),
		EvictionWebhookAddr:     f.evictionWebhookAddr,
		EvictionWebhookCertDir:  f.evictionWebhookCertDir,
		LeaderElection:          f.leaderElect,
		LeaderElectionNamespace: f.leaderElectionNamespace,
		LeaseDuration:           f.leaseDuration,
		RenewDeadline:           f.renewDeadline,
		RetryPeriod:             f.retryPeriod,
		Identity:                os.Getenv("POD_NAME"),
		Namespaces:              f.namespaces,
		Concurrency:             f.concurrency,
		RunnerConcurrency:       f.runnerConcurrency,
		GitHubTimeout:           f.githubTimeout,
		GitHubCABundle:          caBundle,
		GitHubAllowHTTP:         f.githubAllowHTTP,
		ResyncInterval:          f.resyncInterval,
		FailedRunnerRetention:   f.failedRunnerRetention,
		RunnerNetworkPolicy:     runnerPolicy,
		UsageRepositories:       usageRepositories,
		UsageWorkflows:          f.usageWorkflows,
		UsageEvents:             f.usageEvents,
	})
	if err != nil {
		return err
	}
	log.Info("Starting Gantry controller", "version", version.Get().Version, "webhook", g.WebhookListener.Addr().String(),
		"leaderElection", f.leaderElect, "namespaces", strconv.Itoa(len(f.namespaces)))
	return g.Manager.Start(ctrl.SetupSignalHandler())
}
