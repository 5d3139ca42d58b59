// Package scaleset is the runner scale set demand source: for every RunnerPool with
// demand.source ScaleSet it keeps a runner scale set on GitHub's Actions service and
// one message session for it, long-polls that session and turns its messages into the
// pool's demand — all inside the leader, in this one process, one goroutine per pool.
// It talks to the service with GitHub's own client, github.com/actions/scaleset, and
// its listener package.
package scaleset

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/actions/scaleset"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/github"
	"github.com/gantry-dev/gantry/internal/version"
)

// Clients builds and caches the Actions service clients of the pools: one set per
// credentials Secret, its content and the pool's github.url, shared by the pools that
// have all three in common. A scaleset.Client serializes its calls (one lock per
// client), so each key has clientsPerKey of them, used in turn: a burst's JIT
// configurations are not queued behind one another.
type Clients struct {
	Resolver *controller.GitHubResolver
	// RootCAs, when set, are trusted for the service's TLS (--github-ca-bundle).
	RootCAs *x509.CertPool
	// RetryMax bounds the client's own retries of a failed request (default 2).
	RetryMax int

	mu         sync.Mutex
	clients    map[clientKey]*clientSet
	httpClient *http.Client
}

const clientsPerKey = 4

// requestTimeout bounds each request to the Actions service.
const requestTimeout = 90 * time.Second

type clientKey struct {
	secret      types.NamespacedName
	fingerprint string
	url         string
}

type clientSet struct {
	clients []service
	next    int
}

var _ Services = (*Clients)(nil)

// For returns an Actions service client for the pool, or the errors of
// GitHubResolver.For (*controller.ConfigError, *controller.UnavailableError).
func (c *Clients) For(ctx context.Context, pool *v1alpha1.RunnerPool) (ActionsService, error) {
	_, data, fp, err := c.Resolver.Credentials(ctx, pool)
	if err != nil {
		return nil, err
	}
	key := clientKey{
		secret:      types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.GitHub.CredentialsSecretRef.Name},
		fingerprint: fp,
		url:         strings.TrimSuffix(pool.Spec.GitHub.URL, "/"),
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients == nil {
		c.clients = map[clientKey]*clientSet{}
	}
	set := c.clients[key]
	if set == nil {
		set = &clientSet{}
		for range clientsPerKey {
			sc, err := c.newClient(key.url, data)
			if err != nil {
				return nil, err
			}
			set.clients = append(set.clients, service{Client: sc})
		}
		for k := range c.clients {
			if k.secret == key.secret && k.url == key.url {
				delete(c.clients, k) // rotated credentials: drop the old clients
			}
		}
		c.clients[key] = set
	}
	sc := set.clients[set.next]
	set.next = (set.next + 1) % len(set.clients)
	if c.httpClient == nil {
		c.httpClient = newHTTPClient(c.RootCAs)
	}
	sc.closer = &sessionCloser{resolver: c.Resolver, pool: pool, http: c.httpClient}
	return sc, nil
}

func (c *Clients) newClient(configURL string, data map[string][]byte) (*scaleset.Client, error) {
	creds, err := github.ParseCredentials(data)
	if err != nil {
		return nil, &controller.ConfigError{Reason: controller.ReasonInvalidCredentials, Message: err.Error()}
	}
	retries := c.RetryMax
	if retries == 0 {
		retries = 2
	}
	// The timeout covers the long poll (the service holds it up to about 50 s) and
	// bounds a request that hangs, which would hold the client's lock meanwhile.
	opts := []scaleset.HTTPOption{scaleset.WithRetryMax(retries), scaleset.WithRetryWaitMax(5 * time.Second), scaleset.WithTimeout(requestTimeout)}
	if c.RootCAs != nil {
		opts = append(opts, scaleset.WithRootCAs(c.RootCAs))
	}
	info := scaleset.SystemInfo{System: "gantry", Version: version.Version, Subsystem: "controller"}
	if creds.IsApp() {
		return scaleset.NewClientWithGitHubApp(scaleset.ClientWithGitHubAppConfig{
			GitHubConfigURL: configURL,
			GitHubAppAuth: scaleset.GitHubAppAuth{
				ClientID:       fmt.Sprint(creds.App.AppID),
				InstallationID: creds.App.InstallationID,
				PrivateKey:     strings.TrimSpace(string(data[github.KeyAppPrivateKey])),
			},
			SystemInfo: info,
		}, opts...)
	}
	return scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
		GitHubConfigURL:     configURL,
		PersonalAccessToken: creds.Token,
		SystemInfo:          info,
	}, opts...)
}

// Typed failures of the Actions service, as the scaleset client reports them.

// IsRunnerNotFound reports a runner the service does not know (already removed).
func IsRunnerNotFound(err error) bool { return errors.Is(err, scaleset.RunnerNotFoundError) }

// IsRunnerExists reports a JIT configuration asked for a runner name already registered.
func IsRunnerExists(err error) bool { return errors.Is(err, scaleset.RunnerExistsError) }

// IsJobStillRunning reports a runner that cannot be removed: it runs a job.
func IsJobStillRunning(err error) bool { return errors.Is(err, scaleset.JobStillRunningError) }

// isSessionConflict reports the service's 409 for a second session of a scale set.
func isSessionConflict(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "SessionConflict") || strings.Contains(err.Error(), `status="409`))
}

// isNotFound reports a 404 from the service.
func isNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), `status="404`)
}
