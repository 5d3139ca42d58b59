// Package manager assembles Gantry's controller manager: the cache (pods and Secrets
// restricted to Gantry's label), the demand Tracker and its webhook endpoint, the
// GitHub client provider, and the RunnerPool and Runner controllers. `gantry
// controller` and the integration tests build it the same way.
package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/netpol"
	"github.com/gantry-dev/gantry/internal/controller/nodes"
	"github.com/gantry-dev/gantry/internal/controller/rerun"
	"github.com/gantry-dev/gantry/internal/controller/resync"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/controller/runnerpool"
	"github.com/gantry-dev/gantry/internal/controller/scaleset"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
	"github.com/gantry-dev/gantry/internal/warm"
)

// WebhookSecretKey is the key of the webhook Secret that holds the webhook secret.
const WebhookSecretKey = "webhook_secret"

// Options configure the manager. Zero values take the documented defaults.
type Options struct {
	// MetricsAddr serves /metrics ("0" disables). Default ":8080".
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz ("0" disables). Default ":8081".
	ProbeAddr string
	// PprofAddr serves Go's profiles under /debug/pprof/; "" (the default) or "0" serves
	// none.
	PprofAddr string
	// WebhookAddr serves GitHub's webhooks at /webhook. Default ":9090".
	WebhookAddr string
	// WebhookSecret names the Secret holding webhook_secret (and, while rotating,
	// webhook_secret_previous).
	WebhookSecret types.NamespacedName
	// WebhookAdvertiseAddress is host:port where the other replicas reach this one's
	// webhook endpoint. With leader election, the leader publishes it on its Lease and
	// a standby forwards the deliveries it gets to it; empty, a standby answers 503.
	WebhookAdvertiseAddress string
	// EvictionWebhookAddr serves the eviction webhook (runner/evict.go) over TLS at
	// /evict-runner: an idle runner whose pod is being evicted is retired within the
	// eviction's request. "" (the default) serves none. EvictionWebhookCertDir holds its
	// certificate, tls.crt and tls.key.
	EvictionWebhookAddr, EvictionWebhookCertDir string
	// LeaderElection, with LeaderElectionNamespace, lets several replicas run with one
	// active.
	LeaderElection          bool
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election: a standby
	// takes over about LeaseDuration + RetryPeriod after a leader dies without releasing
	// its lease. Defaults 8s, 6s, 1s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Identity names this replica in scale set sessions (its pod name). Default: the
	// host name.
	Identity string
	// Namespaces restricts what is watched; empty means all namespaces.
	Namespaces []string
	// Concurrency is how many pools are reconciled at once. Default 16.
	Concurrency int
	// RunnerConcurrency is how many runners are reconciled at once: each waits on
	// GitHub and the API server, so many run side by side. Default 64.
	RunnerConcurrency int
	// GitHubTimeout bounds each GitHub request. Default 30s.
	GitHubTimeout time.Duration
	// GitHubCABundle is PEM certificates trusted, besides the system's, for GitHub
	// (Enterprise Server) hosts: a private CA. Empty trusts the system's only.
	GitHubCABundle []byte
	// GitHubAllowHTTP accepts http:// GitHub URLs (the simulator, test servers); without
	// it such pools are not Ready (InsecureGitHubURL).
	GitHubAllowHTTP bool
	// ResyncInterval bounds how long a lost webhook can delay a job: queued jobs are
	// listed from GitHub this often. Default 1m.
	ResyncInterval time.Duration
	// FailedRunnerRetention is how long a Failed Runner stays visible. Default 10m.
	FailedRunnerRetention time.Duration
	// RunnerNetworkPolicy, when set, is put in every namespace that holds RunnerPools
	// (internal/controller/netpol); nil puts none.
	RunnerNetworkPolicy *networkingv1.NetworkPolicy
	// UsageRepositories is how many repositories get usage series of their own (the
	// rest are "other"); default 100, negative: none. UsageWorkflows is how many
	// (repository, workflow) pairs do; default 0: no workflow label. UsageEvents
	// writes a RunnerUsage event for each runner that ends, one API server write each
	// (docs/usage.md); off by default.
	UsageRepositories, UsageWorkflows int
	UsageEvents                       bool
	// Clock defaults to the real clock.
	Clock clock.Clock
	// SeveralPerProcess lets tests run more than one manager in a process (controller
	// names are otherwise required to be unique, for their metrics).
	SeveralPerProcess bool
}

func (o *Options) defaults() {
	if o.MetricsAddr == "" {
		o.MetricsAddr = ":8080"
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = ":8081"
	}
	if o.WebhookAddr == "" {
		o.WebhookAddr = ":9090"
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.RunnerConcurrency == 0 {
		o.RunnerConcurrency = 64
	}
	if o.GitHubTimeout == 0 {
		o.GitHubTimeout = 30 * time.Second
	}
	if o.ResyncInterval == 0 {
		o.ResyncInterval = time.Minute
	}
	if o.FailedRunnerRetention == 0 {
		o.FailedRunnerRetention = 10 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.UsageRepositories == 0 {
		o.UsageRepositories = DefaultUsageRepositories
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.Identity == "" {
		o.Identity, _ = os.Hostname()
	}
}

// DefaultUsageRepositories is how many repositories get usage series of their own by
// default: 17 series each per pool (docs/usage.md), about 1,700 for a pool.
const DefaultUsageRepositories = 100

// Leader election defaults: a standby takes over about 9 s after a leader dies without
// releasing its lease (controller-runtime's 15s/10s/2s took about 17 s), while a leader
// that cannot renew for 6 s steps down before another can lead.
const (
	DefaultLeaseDuration = 8 * time.Second
	DefaultRenewDeadline = 6 * time.Second
	DefaultRetryPeriod   = time.Second
)

func init() { crmetrics.Registry.MustRegister(demand.WebhookDeliveries, demand.UnmatchedJobs) }

// Scheme knows the core types and Gantry's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// Gantry is an assembled manager and the parts tests look into.
type Gantry struct {
	Manager ctrl.Manager
	Tracker *demand.Tracker
	Webhook *demand.WebhookHandler
	// WebhookListener is bound at New, so its address is known before Start.
	WebhookListener net.Listener
	// EvictionListener is the eviction webhook's, bound at New; nil when it is off.
	EvictionListener net.Listener
}

// RequestsHTTPClient is the HTTP client of the manager's client (its creates, patches,
// deletes and uncached reads): cfg's, on a connection to the API server of its own.
// controller-runtime otherwise sends them and every informer's watch over one HTTP/2
// connection, whose frames one goroutine on each side reads and writes. In a burst the
// watches of pods and Runners then fell behind the requests in flight beside them (a
// Runner, a Secret and a pod per job, up to 128 at once), and the API server cut them
// for not keeping up, each cut leaving the cache stale until the watch was made again:
// 27–40 watchers cut in a 500-job burst (`gantry sim run --scenario burst`), 105 in a
// 5,000-job one (`scale`). On a connection apart from the requests' they were cut 0–28
// times (median 1) and 8 times, and the last runner pods came 6–8 % sooner.
func RequestsHTTPClient(cfg *rest.Config) (*http.Client, error) {
	c := rest.CopyConfig(cfg)
	// client-go shares one transport, so one connection, between the clients of equal
	// configurations; a dialer of the configuration's own (client-go's default one)
	// makes it unequal.
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return rest.HTTPClientFor(c)
}

// New assembles the manager. It binds the webhook listener at once; Start serves it.
func New(cfg *rest.Config, opts Options) (*Gantry, error) {
	opts.defaults()
	managed := labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})
	cacheOpts := cache.Options{
		// No object's managedFields is read: the cache keeps none, so it holds less and
		// every read from it copies less.
		DefaultTransform: cache.TransformStripManagedFields(),
		// Pods and Secrets: only Gantry's own, so memory follows the number of runners,
		// not the size of the cluster.
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:    {Label: managed},
			&corev1.Secret{}: {Label: managed},
			// Cache volumes: only the PersistentVolumeClaims Gantry made.
			&corev1.PersistentVolumeClaim{}: {Label: managed},
			// Runner NetworkPolicies: only Gantry's.
			&networkingv1.NetworkPolicy{}: {Label: managed},
			// Nodes: every node, slimmed to what Gantry reads (nodes.Slim), one view for
			// all pools; started only where the controller may list and watch them.
			&corev1.Node{}: {Transform: nodes.Slim},
		},
	}
	if len(opts.Namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	leaderLabels, leaseNamespace, err := leaderElectionLabels(opts)
	if err != nil {
		return nil, err
	}
	requests, err := RequestsHTTPClient(cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		// The client's requests on a connection of their own, apart from the watches.
		Client:                        client.Options{HTTPClient: requests},
		Scheme:                        Scheme(),
		MapperProvider:                newRESTMapper,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:        opts.ProbeAddr,
		PprofBindAddress:              opts.PprofAddr,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
		LeaderElectionLabels:          leaderLabels,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(opts.SeveralPerProcess)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	nodeView, err := newNodeView(mgr)
	if err != nil {
		return nil, err
	}
	clk := opts.Clock
	tracker := demand.NewTracker(demand.NewRouter(), clk)
	tracker.SetLogger(ctrl.Log.WithName("demand"))
	ghOpts := github.Options{Timeout: opts.GitHubTimeout, Clock: clk}
	if len(opts.GitHubCABundle) > 0 {
		if ghOpts.Transport, err = github.TransportWithCABundle(opts.GitHubCABundle); err != nil {
			return nil, fmt.Errorf("GitHub CA bundle: %w", err)
		}
	}
	resolver := &controller.GitHubResolver{
		Reader:    mgr.GetAPIReader(),
		Provider:  github.NewProvider(github.ProviderOptions{Options: ghOpts}),
		Clock:     clk,
		SecretTTL: 30 * time.Second,
		AllowHTTP: opts.GitHubAllowHTTP,
	}
	failures := &controller.FailureBackoff{Clock: clk, Threshold: 3, Base: 30 * time.Second, Max: 10 * time.Minute}
	clients := &scaleset.Clients{Resolver: resolver}
	if len(opts.GitHubCABundle) > 0 {
		if clients.RootCAs, err = github.CertPoolWithBundle(opts.GitHubCABundle); err != nil {
			return nil, fmt.Errorf("GitHub CA bundle: %w", err)
		}
	}
	observations := &warm.Observations{}
	scaleSets := &scaleset.Manager{
		Clients: clients, Client: mgr.GetClient(), Tracker: tracker, Warm: observations, Clock: clk, Owner: opts.Identity,
		Log: ctrl.Log.WithName("scaleset"),
	}
	if err := mgr.Add(scaleSets); err != nil {
		return nil, err
	}

	sources := &source.Sources{Webhook: &source.Webhook{GitHub: resolver}, ScaleSet: scaleset.Source{Manager: scaleSets}}
	births := &controller.RunnerBirths{}
	slots := &runner.HookSlots{}
	if err := (&runnerpool.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Births: births, GitHub: resolver, Tracker: tracker, Failures: failures,
		Sources: sources, Events: mgr.GetEventRecorder("gantry-runnerpool"), Clock: clk, FailureThreshold: failures.Threshold,
		Warm: observations, WatchedNamespaces: opts.Namespaces, Nodes: nodeView, Slots: slots,
	}).SetupWithManager(mgr, opts.Concurrency); err != nil {
		return nil, err
	}
	reruns := &rerun.Reconciler{
		Client: mgr.GetClient(), GitHub: resolver, Events: mgr.GetEventRecorder("gantry-rerun"), Clock: clk, Tracker: tracker,
	}
	runners := &runner.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Births: births, GitHub: resolver, Tracker: tracker,
		Sources: sources, Failures: failures, Events: mgr.GetEventRecorder("gantry-runner"), Clock: clk,
		FailedRetention: opts.FailedRunnerRetention, Warm: observations,
		WatchedNamespaces: opts.Namespaces, HookNetworkPolicy: opts.RunnerNetworkPolicy, Nodes: nodeView, Slots: slots,
		Usage:    runner.UsageOptions{Repositories: max(0, opts.UsageRepositories), Workflows: max(0, opts.UsageWorkflows), Events: opts.UsageEvents},
		JobEvent: reruns.Wake,
	}
	if err := runners.SetupWithManager(mgr, opts.RunnerConcurrency); err != nil {
		return nil, err
	}
	var evictions net.Listener
	if opts.EvictionWebhookAddr != "" {
		es, err := newEvictionServer(mgr, opts.EvictionWebhookAddr, opts.EvictionWebhookCertDir, runners)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(es); err != nil {
			return nil, err
		}
		evictions = es.listener
	}

	if err := reruns.SetupWithManager(mgr); err != nil {
		return nil, err
	}

	if opts.RunnerNetworkPolicy != nil {
		if err := (&netpol.Reconciler{Client: mgr.GetClient(), Policy: opts.RunnerNetworkPolicy}).SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}

	if err := mgr.Add(&resync.Resync{
		Client: mgr.GetClient(), GitHub: resolver, Tracker: tracker, Clock: clk, Interval: opts.ResyncInterval,
	}); err != nil {
		return nil, err
	}

	secrets := &webhookSecrets{key: opts.WebhookSecret,
		cache: &controller.SecretCache{Reader: mgr.GetAPIReader(), Clock: clk, TTL: 30 * time.Second}}
	hook := demand.NewWebhookHandler(secrets.get, tracker, clk, ctrl.Log.WithName("webhook"))
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", opts.WebhookAddr)
	if err != nil {
		return nil, fmt.Errorf("listening for webhooks on %s: %w", opts.WebhookAddr, err)
	}
	ws := &webhookServer{handler: hook, listener: ln, tracker: tracker, self: opts.WebhookAdvertiseAddress, led: make(chan struct{})}
	if opts.LeaderElection && leaderLabels != nil {
		ws.lease = &leaseEndpoint{reader: mgr.GetAPIReader(), clock: clk,
			key: types.NamespacedName{Namespace: leaseNamespace, Name: leaderElectionID}}
	}
	if err := mgr.Add(ws); err != nil {
		return nil, err
	}
	if err := mgr.Add(&webhookLeader{server: ws}); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return &Gantry{Manager: mgr, Tracker: tracker, Webhook: hook, WebhookListener: ln, EvictionListener: evictions}, nil
}

// newNodeView is the shared view of the nodes (internal/controller/nodes), read from the
// manager's cache where the controller may list and watch nodes, disabled elsewhere (a
// namespaced install): one SelfSubjectAccessReview per verb, now.
func newNodeView(mgr ctrl.Manager) (*nodes.View, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok, err := nodes.Permitted(ctx, mgr.GetClient())
	if err != nil {
		return nil, err
	}
	if !ok {
		ctrl.Log.WithName("nodes").Info("Nodes are not read: the controller may not list and watch them; pools whose template leaves the OS or architecture open take linux/amd64")
		return &nodes.View{}, nil
	}
	return &nodes.View{Reader: mgr.GetClient()}, nil
}

// webhookSecrets are the webhook Secret's current and previous secrets, read at most
// once per the cache's TTL. A missing Secret has none (every delivery is refused); one
// that cannot be read keeps its last good secrets through an API server blip.
type webhookSecrets struct {
	cache *controller.SecretCache
	key   types.NamespacedName
}

func (w *webhookSecrets) get() [][]byte {
	if w.key.Name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	data, found, _ := w.cache.Get(ctx, w.key)
	if !found {
		return nil
	}
	return [][]byte{data[WebhookSecretKey], data[WebhookSecretKey+"_previous"]}
}
