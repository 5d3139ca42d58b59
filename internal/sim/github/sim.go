// Package github is Gantry's GitHub simulator: a stateful, in-memory HTTP server that
// speaks the REST endpoints a runner controller uses (same paths, JSON shapes, status
// codes and headers as api.github.com, and as GHES under /api/v3), authenticates PATs and
// GitHub Apps, enforces primary and secondary rate limits, assigns queued jobs to idle
// matching runners, sends signed workflow_job webhooks, and injects faults on request.
//
// Tests build it in process and drive it through its Go API:
//
//	sim := github.New(github.Options{})
//	defer sim.Close()
//	srv := httptest.NewServer(sim)
//	org, _ := sim.CreateOrg(github.OrgSpec{Login: "acme"})
//	job, _ := sim.QueueJob(github.JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux"}})
//
// The same state is reachable over HTTP through the admin API under /_sim/, and
// simulated runners speak the runner API under /_runner/ (package runnerapi). Runner
// scale sets speak the Actions service under /_actions/, as github.com/actions/scaleset
// calls it.
//
// One state model (state.go, assign.go, actions_state.go) under one lock; one file set
// per protocol: rest_*.go (REST, with the preamble of its handlers in router.go),
// actions_*.go (Actions service), runner.go (runner API), admin.go (admin API) and
// api_*.go (Go API). docs/simulator.md is the reference.
package github

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Options configure a Sim. The zero value is a usable simulator with GitHub.com's
// default rate limits.
type Options struct {
	// Clock drives token expiry, rate-limit windows, timestamps and long-poll waits.
	// Default: the real clock.
	Clock clock.Clock
	// URL is the simulator's public root URL (scheme://host), used in webhook payloads
	// and JIT configs. Default: the root of the request being served.
	URL string
	// PATs are the personal access tokens the simulator accepts.
	PATs []PAT
	// RateLimits configure primary and secondary rate limits. See RateLimits.
	RateLimits RateLimits
	// FailJobsWithoutRunner fails a job at once when no registered runner in scope
	// could ever take it, as GitHub did once, instead of leaving it queued.
	FailJobsWithoutRunner bool
	// InstallationTokenTTL is how long installation tokens live (default 1h).
	InstallationTokenTTL time.Duration
	// RegistrationTokenTTL is how long registration and remove tokens live (default 1h).
	RegistrationTokenTTL time.Duration
	// WebhookTimeout is the delivery timeout (default 10s; GHES uses 30s).
	WebhookTimeout time.Duration
	// WebhookWorkers is the number of concurrent webhook senders (default 4).
	WebhookWorkers int
	// WebhookQueueSize bounds the deliveries waiting for a sender (default 10000); a
	// delivery that finds the queue full is recorded as failed.
	WebhookQueueSize int
	// WebhookClient sends webhooks; default an http.Client with WebhookTimeout.
	WebhookClient *http.Client
	// Faults are the initial fault-injection settings.
	Faults Faults
	// RunnerLostTimeout, when positive, makes the simulator notice runners that stopped
	// talking to it, as GitHub notices a runner whose machine died: an online runner
	// with no runner-API call and no long poll in flight for this long goes offline; a
	// job it had started fails (timeline event "runner_lost"), a job only assigned to it
	// goes back to the queue. A running job is kept alive by POST
	// /_runner/jobs/{id}/renew (the actions runner renews its job lock every minute;
	// GitHub gives up after about ten). Zero (the default) never takes a runner offline.
	RunnerLostTimeout time.Duration

	// The Actions service (runner scale sets, actions_*.go).

	// ActionsPollHold is how long a message-queue long poll waits for a message
	// before it answers 202 (default 50s, as GitHub's broker holds it).
	ActionsPollHold time.Duration
	// ActionsSessionTimeout is how long a message session lives after its last use
	// (no long poll in flight): an abandoned session, such as a killed listener's,
	// blocks a new one (409) until then (default 2m).
	ActionsSessionTimeout time.Duration
	// ActionsAdminTokenTTL is how long the admin token of the runner-registration
	// bootstrap lives (default 1h); MessageQueueTokenTTL is how long a session's
	// queue token lives before the queue answers 401 (default 1h).
	ActionsAdminTokenTTL time.Duration
	MessageQueueTokenTTL time.Duration
	// ScaleSetAssignTimeout is how long a job assigned to a scale set may wait for
	// one of its runners before it is assigned again, at most three times (default
	// 5m; GitHub does not publish its figure).
	ScaleSetAssignTimeout time.Duration
}

// Sim is the GitHub simulator. It is an http.Handler; all methods are safe for
// concurrent use.
type Sim struct {
	opts  Options
	clk   clock.Clock
	start time.Time

	// mu guards the whole model (state.go). Webhooks found while holding it go to
	// outbox and are handed to the senders by unlock, never sent under the lock.
	mu     sync.Mutex
	st     *state
	outbox []*delivery

	// wf is the re-run protocol (rerun_*.go), guarded by mu as well.
	wf *Workflows

	rl     *rateLimiter
	faults *faultInjector
	calls  callCounter
	hooks  *webhookSender

	lastURL   atomic.Pointer[string]
	routes    *router
	svcRoutes *router

	stopSweep chan struct{}
	sweepDone chan struct{}
	closeOnce sync.Once
}

// New returns a simulator configured by opts. Call Close to stop its webhook senders.
func New(opts Options) *Sim {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.InstallationTokenTTL <= 0 {
		opts.InstallationTokenTTL = time.Hour
	}
	if opts.RegistrationTokenTTL <= 0 {
		opts.RegistrationTokenTTL = time.Hour
	}
	if opts.WebhookTimeout <= 0 {
		opts.WebhookTimeout = 10 * time.Second
	}
	if opts.WebhookWorkers <= 0 {
		opts.WebhookWorkers = 4
	}
	if opts.WebhookQueueSize <= 0 {
		opts.WebhookQueueSize = 10000
	}
	opts.actionsDefaults()
	s := &Sim{
		opts:  opts,
		clk:   opts.Clock,
		start: opts.Clock.Now(),
		st:    newState(),
	}
	s.st.failWithoutRunner = opts.FailJobsWithoutRunner
	s.rl = newRateLimiter(opts.RateLimits.withDefaults())
	s.faults = newFaultInjector(opts.Faults)
	s.calls.init()
	for _, p := range opts.PATs {
		s.st.addPAT(p)
	}
	s.wf = &Workflows{s: s}
	s.routes = newRouter(s)
	s.svcRoutes = newActionsRouter(s)
	s.hooks = newWebhookSender(s, opts)
	s.stopSweep, s.sweepDone = make(chan struct{}), make(chan struct{})
	if opts.RunnerLostTimeout > 0 {
		go s.sweepLostRunners(opts.RunnerLostTimeout)
	} else {
		close(s.sweepDone)
	}
	return s
}

// Close stops the webhook senders and the lost-runner sweeper. Deliveries still
// queued are dropped.
func (s *Sim) Close() {
	s.closeOnce.Do(func() { close(s.stopSweep) })
	<-s.sweepDone
	s.hooks.close()
}

// ServeHTTP serves the REST API (at the root and under /api/v3), the Actions service
// under /_actions/, the admin API under /_sim/ and the runner API under /_runner/.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
				panic(v)
			}
			writeError(w, http.StatusInternalServerError, "Server Error")
		}
	}()
	root := s.rootURL(r)
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/_sim/") || p == "/_sim":
		s.serveAdmin(w, r)
	case strings.HasPrefix(p, "/_runner/"):
		s.serveRunner(w, r, root)
	case strings.HasPrefix(p, actionsPrefix+"/"):
		s.serveActions(w, r, strings.TrimPrefix(p, actionsPrefix), root)
	case p == pathRunnerRegistration || p == "/api/v3"+pathRunnerRegistration:
		s.serveActions(w, r, pathRunnerRegistration, root)
	case p == "/api/v3" || strings.HasPrefix(p, "/api/v3/"):
		s.serveREST(w, r, strings.TrimPrefix(p, "/api/v3"), root+"/api/v3", true)
	default:
		s.serveREST(w, r, p, root, false)
	}
}

// rootURL is the simulator's root URL as seen by this request (or Options.URL).
func (s *Sim) rootURL(r *http.Request) string {
	if s.opts.URL != "" {
		return strings.TrimRight(s.opts.URL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u := (&url.URL{Scheme: scheme, Host: r.Host}).String()
	if last := s.lastURL.Load(); last == nil || *last != u {
		s.lastURL.Store(&u)
	}
	return u
}

// publicURL is the root URL used where no request is at hand (webhook payloads).
func (s *Sim) publicURL() string {
	if s.opts.URL != "" {
		return strings.TrimRight(s.opts.URL, "/")
	}
	if u := s.lastURL.Load(); u != nil {
		return *u
	}
	return "http://127.0.0.1"
}

// lock takes the state lock; unlock releases it and hands the webhooks found meanwhile
// to the senders.
func (s *Sim) lock() { s.mu.Lock() }

func (s *Sim) unlock() {
	out := s.outbox
	s.outbox = nil
	s.mu.Unlock()
	for _, d := range out {
		s.hooks.enqueue(d)
	}
}

func (s *Sim) now() time.Time { return s.clk.Now() }
