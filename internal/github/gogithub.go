package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v88/github"
	"k8s.io/utils/clock"
)

const (
	// registrationTokenMargin is how long before expiry a cached registration token is
	// replaced, so a runner never starts with a token about to expire.
	registrationTokenMargin = 5 * time.Minute
	// runnerGroupTTL is how long runner group ids are cached.
	runnerGroupTTL = 10 * time.Minute
	// perPage is the page size of every list call (GitHub's maximum).
	perPage = 100
	// defaultRunnerGroupID is the id of every scope's default runner group.
	defaultRunnerGroupID = 1
)

// Options configure a Client.
type Options struct {
	// Name identifies the credentials in metrics and messages, like "namespace/secret".
	// It must be bounded: never a token or a runner name.
	Name string
	// Clock drives rate-limit blocking and the token and group caches. Default: real.
	Clock clock.PassiveClock
	// Transport sends requests. Default: DefaultTransport.
	Transport http.RoundTripper
	// Timeout bounds each request. Default: 30s.
	Timeout time.Duration
	// UserAgent is sent with every request. Default: "gantry".
	UserAgent string
}

// sharedTransport is the one DefaultTransport every Client without a Transport of its
// own sends through, so that they share its connections as they shared
// http.DefaultTransport's.
var sharedTransport = sync.OnceValues(DefaultTransport)

// NewClient returns a Client that authenticates with creds. App credentials get an
// installation token through ghinstallation, cached until a minute before expiry.
func NewClient(creds Credentials, opts Options) (Client, error) {
	if creds.App == nil && creds.Token == "" {
		return nil, errors.New("no GitHub credentials: parse them with ParseCredentials")
	}
	if opts.Name == "" {
		opts.Name = "unnamed"
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Transport == nil {
		t, err := sharedTransport()
		if err != nil {
			return nil, err
		}
		opts.Transport = t
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "gantry"
	}
	return &client{
		creds:     creds,
		opts:      opts,
		hosts:     map[string]*hostClient{},
		regTokens: map[Scope]RegistrationToken{},
		groups:    map[Scope]groupCache{},

		runnerPages: map[Scope][]runnerPage{},
		runLists:    map[Scope]map[string]condPage{},
		jobLists:    map[Scope]map[int64][]condPage{},
		runPages:    map[runKey]condPage{},
	}, nil
}

type client struct {
	creds Credentials
	opts  Options

	mu        sync.Mutex
	hosts     map[string]*hostClient // by API base URL
	regTokens map[Scope]RegistrationToken
	regFlight singleflight.Group
	// groupFlight shares one runner-group listing among concurrent lookups of a scope.
	groupFlight singleflight.Group
	groups      map[Scope]groupCache
	// runnerPages are the pages of each scope's last full runner list, with their ETags.
	runnerPages map[Scope][]runnerPage
	// runLists and jobLists are the pages of each repository's last listing of queued
	// jobs (queuedjobs.go), with their ETags.
	runLists map[Scope]map[string]condPage
	jobLists map[Scope]map[int64][]condPage
	// runPages are the last answers of GetWorkflowRun, per run, while it is not
	// completed (runs.go).
	runPages map[runKey]condPage
}

// hostClient talks to one API host. Its rate-limit state is shared by all scopes there.
type hostClient struct {
	api *gh.Client // authenticated with the token or the installation token
	app *gh.Client // authenticated as the App (JWT); nil for a token
	// installation is the App's installation token transport (its token's permissions,
	// inspect.go); nil for a token.
	installation *ghinstallation.Transport
}

type groupCache struct {
	ids     map[string]int64 // by lower-cased name
	fetched time.Time
}

func (c *client) host(scope Scope) (*hostClient, error) {
	if scope.Kind == "" {
		return nil, errors.New("empty scope: build it with ParseURL")
	}
	if err := c.creds.ValidateFor(scope); err != nil {
		return nil, err
	}
	base := scope.APIBaseURL()
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.hosts[base]; ok {
		return h, nil
	}
	rl := &rateLimitTransport{next: c.opts.Transport, clock: c.opts.Clock, credential: c.opts.Name}
	h := &hostClient{}
	var err error
	if c.creds.App != nil {
		a := c.creds.App
		itr := ghinstallation.NewFromAppsTransport(ghinstallation.NewAppsTransportFromPrivateKey(rl, a.AppID, a.PrivateKey), a.InstallationID)
		itr.BaseURL = strings.TrimSuffix(base, "/")
		h.installation = itr
		if h.api, err = c.newGitHub(scope, itr); err != nil {
			return nil, err
		}
		if h.app, err = c.newGitHub(scope, ghinstallation.NewAppsTransportFromPrivateKey(rl, a.AppID, a.PrivateKey)); err != nil {
			return nil, err
		}
	} else if h.api, err = c.newGitHub(scope, &tokenTransport{token: c.creds.Token, next: rl}); err != nil {
		return nil, err
	}
	c.hosts[base] = h
	return h, nil
}

func (c *client) newGitHub(scope Scope, rt http.RoundTripper) (*gh.Client, error) {
	opts := []gh.ClientOptionsFunc{
		gh.WithHTTPClient(&http.Client{Transport: rt, Timeout: c.opts.Timeout}),
		// rateLimitTransport owns rate limiting, on the injected clock.
		gh.WithDisableRateLimitCheck(),
		gh.WithUserAgent(c.opts.UserAgent),
	}
	if scope.IsGHES() {
		opts = append(opts, gh.WithEnterpriseURLs(scope.APIBaseURL(), scope.Scheme+"://"+scope.Host+"/api/uploads/"))
	}
	cl, err := gh.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("building GitHub client for %s: %w", scope.APIBaseURL(), err)
	}
	return cl, nil
}

// classify turns a go-github or ghinstallation error into a typed Error where callers
// act on it. on422, if set, classifies 422 Unprocessable Entity.
func (c *client) classify(err error, what string, on422 func(*gh.ErrorResponse) error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	if he, ok := errors.AsType[*ghinstallation.HTTPError](err); ok && he.Response != nil {
		// ghinstallation leaves a failed token response open for inspection.
		_ = he.Response.Body.Close()
		code := he.Response.StatusCode
		if code == http.StatusNotFound {
			return NewAppNotInstalledError(fmt.Sprintf("%s: GitHub has no such installation of the %s in Secret %s (HTTP 404 on the installation token): install the App on the account, or fix %s",
				what, c.creds, c.opts.Name, KeyAppInstallationID), nil)
		}
		if code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusNotFound {
			return NewUnauthorizedError(fmt.Sprintf("%s: GitHub refused an installation token for %s from Secret %s (HTTP %d): check %s, %s and %s",
				what, c.creds, c.opts.Name, code, KeyAppID, KeyAppInstallationID, KeyAppPrivateKey), nil)
		}
		return fmt.Errorf("%s: getting an installation token for %s: HTTP %d", what, c.creds, code)
	}
	if er, ok := errors.AsType[*gh.ErrorResponse](err); ok && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusUnauthorized:
			return NewUnauthorizedError(fmt.Sprintf("%s: GitHub rejected the %s in Secret %s", what, c.creds, c.opts.Name), err)
		case http.StatusForbidden:
			return NewUnauthorizedError(fmt.Sprintf("%s: GitHub denied the %s in Secret %s access", what, c.creds, c.opts.Name), err)
		case http.StatusNotFound:
			return NewNotFoundError(what, err)
		case http.StatusUnprocessableEntity:
			if on422 != nil {
				if e := on422(er); e != nil {
					return e
				}
			}
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (c *client) GenerateJITConfig(ctx context.Context, scope Scope, req JITConfigRequest) (JITConfig, error) {
	what := fmt.Sprintf("generating JIT config for runner %q in %s", req.Name, scope)
	if req.Name == "" {
		return JITConfig{}, fmt.Errorf("%s: the runner needs a name", what)
	}
	if len(req.Labels) < 1 || len(req.Labels) > 100 {
		return JITConfig{}, fmt.Errorf("%s: GitHub takes 1 to 100 labels, got %d", what, len(req.Labels))
	}
	h, err := c.host(scope)
	if err != nil {
		return JITConfig{}, fmt.Errorf("%s: %w", what, err)
	}
	body := &gh.GenerateJITConfigRequest{Name: req.Name, RunnerGroupID: req.RunnerGroupID, Labels: req.Labels}
	if body.RunnerGroupID == 0 {
		body.RunnerGroupID = defaultRunnerGroupID
	}
	if req.WorkFolder != "" {
		body.WorkFolder = gh.Ptr(req.WorkFolder)
	}
	var cfg *gh.JITRunnerConfig
	switch scope.Kind {
	case ScopeRepository:
		cfg, _, err = h.api.Actions.GenerateRepoJITConfig(ctx, scope.Owner, scope.Repo, body)
	case ScopeOrganization:
		cfg, _, err = h.api.Actions.GenerateOrgJITConfig(ctx, scope.Owner, body)
	case ScopeEnterprise:
		cfg, _, err = h.api.Enterprise.GenerateEnterpriseJITConfig(ctx, scope.Enterprise, body)
	}
	if err != nil {
		return JITConfig{}, c.classify(err, what, func(er *gh.ErrorResponse) error {
			// "Already exists - A runner with the name … already exists." or, as
			// "Validation Failed", the same words in the errors list.
			alreadyExists := strings.Contains(strings.ToLower(er.Message), "already exists")
			for _, e := range er.Errors {
				alreadyExists = alreadyExists || strings.Contains(strings.ToLower(e.Message), "already exists")
			}
			if alreadyExists {
				return NewAlreadyExistsError(what, err)
			}
			return nil
		})
	}
	if cfg.GetEncodedJITConfig() == "" || cfg.Runner == nil {
		return JITConfig{}, fmt.Errorf("%s: GitHub's answer has no runner or encoded_jit_config", what)
	}
	return JITConfig{Runner: toRunner(cfg.Runner), EncodedJITConfig: cfg.GetEncodedJITConfig()}, nil
}

func (c *client) CreateRegistrationToken(ctx context.Context, scope Scope) (RegistrationToken, error) {
	what := fmt.Sprintf("creating registration token for %s", scope)
	now := c.opts.Clock.Now()
	c.mu.Lock()
	tok, ok := c.regTokens[scope]
	c.mu.Unlock()
	if ok && now.Before(tok.ExpiresAt.Add(-registrationTokenMargin)) {
		return tok, nil
	}
	// A burst asks for the token from many reconciles at once: one request serves them.
	v, err, _ := c.regFlight.Do(scope.String(), func() (any, error) { return c.fetchRegistrationToken(ctx, scope, what, now) })
	if err != nil {
		return RegistrationToken{}, err
	}
	return v.(RegistrationToken), nil
}

func (c *client) fetchRegistrationToken(ctx context.Context, scope Scope, what string, now time.Time) (RegistrationToken, error) {
	h, err := c.host(scope)
	if err != nil {
		return RegistrationToken{}, fmt.Errorf("%s: %w", what, err)
	}
	var rt *gh.RegistrationToken
	switch scope.Kind {
	case ScopeRepository:
		rt, _, err = h.api.Actions.CreateRegistrationToken(ctx, scope.Owner, scope.Repo)
	case ScopeOrganization:
		rt, _, err = h.api.Actions.CreateOrganizationRegistrationToken(ctx, scope.Owner)
	case ScopeEnterprise:
		rt, _, err = h.api.Enterprise.CreateRegistrationToken(ctx, scope.Enterprise)
	}
	if err != nil {
		return RegistrationToken{}, c.classify(err, what, nil)
	}
	if rt.GetToken() == "" || rt.ExpiresAt == nil {
		return RegistrationToken{}, fmt.Errorf("%s: GitHub's answer has no token or expires_at", what)
	}
	tok := RegistrationToken{Token: rt.GetToken(), ExpiresAt: rt.ExpiresAt.Time}
	if now.Before(tok.ExpiresAt.Add(-registrationTokenMargin)) {
		c.mu.Lock()
		c.regTokens[scope] = tok
		c.mu.Unlock()
	}
	return tok, nil
}

func (c *client) GetRunner(ctx context.Context, scope Scope, id int64) (Runner, error) {
	what := fmt.Sprintf("getting runner %d in %s", id, scope)
	h, err := c.host(scope)
	if err != nil {
		return Runner{}, fmt.Errorf("%s: %w", what, err)
	}
	var r *gh.Runner
	switch scope.Kind {
	case ScopeRepository:
		r, _, err = h.api.Actions.GetRunner(ctx, scope.Owner, scope.Repo, id)
	case ScopeOrganization:
		r, _, err = h.api.Actions.GetOrganizationRunner(ctx, scope.Owner, id)
	case ScopeEnterprise:
		r, _, err = h.api.Enterprise.GetRunner(ctx, scope.Enterprise, id)
	}
	if err != nil {
		return Runner{}, c.classify(err, what, nil)
	}
	return toRunner(r), nil
}

func (c *client) ListRunners(ctx context.Context, scope Scope, name string) ([]Runner, error) {
	what := fmt.Sprintf("listing runners in %s", scope)
	h, err := c.host(scope)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	opts := &gh.ListRunnersOptions{ListOptions: gh.ListOptions{PerPage: perPage}}
	if name != "" {
		opts.Name = gh.Ptr(name)
	}
	var seq func(func(*gh.Runner, error) bool)
	switch scope.Kind {
	case ScopeRepository:
		seq = h.api.Actions.ListRunnersIter(ctx, scope.Owner, scope.Repo, opts)
	case ScopeOrganization:
		seq = h.api.Actions.ListOrganizationRunnersIter(ctx, scope.Owner, opts)
	case ScopeEnterprise:
		seq = h.api.Enterprise.ListRunnersIter(ctx, scope.Enterprise, opts)
	}
	runners := []Runner{}
	for r, err := range seq {
		if err != nil {
			return nil, c.classify(err, what, nil)
		}
		runners = append(runners, toRunner(r))
	}
	return runners, nil
}

func (c *client) DeleteRunner(ctx context.Context, scope Scope, id int64) error {
	what := fmt.Sprintf("deleting runner %d in %s", id, scope)
	h, err := c.host(scope)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch scope.Kind {
	case ScopeRepository:
		_, err = h.api.Actions.RemoveRunner(ctx, scope.Owner, scope.Repo, id)
	case ScopeOrganization:
		_, err = h.api.Actions.RemoveOrganizationRunner(ctx, scope.Owner, id)
	case ScopeEnterprise:
		_, err = h.api.Enterprise.RemoveRunner(ctx, scope.Enterprise, id)
	}
	return c.classify(err, what, func(*gh.ErrorResponse) error {
		return NewBusyError(what+": the runner is running a job", err)
	})
}

// listRunnerGroups lists a scope's runner groups into the cache: name (lower case) → id.
func (c *client) listRunnerGroups(ctx context.Context, scope Scope, what string, now time.Time) (map[string]int64, error) {
	h, err := c.host(scope)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	ids := map[string]int64{}
	switch scope.Kind {
	case ScopeOrganization:
		opts := &gh.ListOrgRunnerGroupOptions{ListOptions: gh.ListOptions{PerPage: perPage}}
		for g, err := range h.api.Actions.ListOrganizationRunnerGroupsIter(ctx, scope.Owner, opts) {
			if err != nil {
				return nil, c.classify(err, what, nil)
			}
			ids[strings.ToLower(g.GetName())] = g.GetID()
		}
	case ScopeEnterprise:
		opts := &gh.ListEnterpriseRunnerGroupOptions{ListOptions: gh.ListOptions{PerPage: perPage}}
		for g, err := range h.api.Enterprise.ListRunnerGroupsIter(ctx, scope.Enterprise, opts) {
			if err != nil {
				return nil, c.classify(err, what, nil)
			}
			ids[strings.ToLower(g.GetName())] = g.GetID()
		}
	}
	c.mu.Lock()
	c.groups[scope] = groupCache{ids: ids, fetched: now}
	c.mu.Unlock()
	return ids, nil
}

func (c *client) RunnerGroupID(ctx context.Context, scope Scope, group string) (int64, error) {
	if scope.Kind == ScopeRepository {
		return defaultRunnerGroupID, nil
	}
	what := fmt.Sprintf("looking up runner group %q in %s", group, scope)
	key := strings.ToLower(group)
	now := c.opts.Clock.Now()
	c.mu.Lock()
	gc, ok := c.groups[scope]
	c.mu.Unlock()
	if ok && now.Sub(gc.fetched) < runnerGroupTTL {
		if id, ok := gc.ids[key]; ok {
			return id, nil
		}
	}
	// A burst asks from many reconciles at once on a cold cache: one listing serves them.
	v, err, _ := c.groupFlight.Do(scope.String(), func() (any, error) { return c.listRunnerGroups(ctx, scope, what, now) })
	if err != nil {
		return 0, err
	}
	id, ok := v.(map[string]int64)[key]
	if !ok {
		return 0, NewNotFoundError(what, ErrNoSuchRunnerGroup)
	}
	return id, nil
}

func (c *client) appClient(scope Scope, what string) (*gh.Client, error) {
	if c.creds.App == nil {
		return nil, NewUnauthorizedError(what+": the App webhook delivery log needs GitHub App credentials, Secret "+c.opts.Name+" holds a token", nil)
	}
	h, err := c.host(Scope{Kind: ScopeOrganization, Scheme: scope.Scheme, Host: scope.Host, Owner: "-"})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return h.app, nil
}

func (c *client) ListHookDeliveries(ctx context.Context, scope Scope, cursor string) (HookDeliveryPage, error) {
	what := "listing the GitHub App's webhook deliveries on " + scope.Host
	app, err := c.appClient(scope, what)
	if err != nil {
		return HookDeliveryPage{}, err
	}
	ds, resp, err := app.Apps.ListHookDeliveries(ctx, &gh.ListCursorOptions{Cursor: cursor, PerPage: perPage})
	if err != nil {
		return HookDeliveryPage{}, c.classify(err, what, nil)
	}
	page := HookDeliveryPage{Deliveries: []HookDelivery{}, NextCursor: resp.Cursor}
	for _, d := range ds {
		page.Deliveries = append(page.Deliveries, HookDelivery{
			ID:          d.GetID(),
			GUID:        d.GetGUID(),
			DeliveredAt: d.GetDeliveredAt().Time,
			Redelivery:  d.GetRedelivery(),
			Status:      d.GetStatus(),
			StatusCode:  d.GetStatusCode(),
			Event:       d.GetEvent(),
			Action:      d.GetAction(),
		})
	}
	return page, nil
}

func (c *client) RedeliverHookDelivery(ctx context.Context, scope Scope, id int64) error {
	what := fmt.Sprintf("redelivering webhook delivery %d on %s", id, scope.Host)
	app, err := c.appClient(scope, what)
	if err != nil {
		return err
	}
	_, _, err = app.Apps.RedeliverHookDelivery(ctx, id)
	if _, ok := errors.AsType[*gh.AcceptedError](err); ok {
		return nil // 202: the attempt is queued.
	}
	return c.classify(err, what, nil)
}

func toRunner(r *gh.Runner) Runner {
	out := Runner{
		ID:     r.GetID(),
		Name:   r.GetName(),
		OS:     r.GetOS(),
		Status: RunnerStatus(r.GetStatus()),
		Busy:   r.GetBusy(),
		Labels: []string{},
	}
	for _, l := range r.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out
}
