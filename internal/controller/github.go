package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/github"
)

// ConfigError is a problem with a pool's configuration that only its owner can fix
// (a bad URL, a missing or malformed credentials Secret). Reason is the Degraded
// condition's reason.
type ConfigError struct {
	Reason  string
	Message string
}

func (e *ConfigError) Error() string { return e.Message }

// Degraded reasons for configuration problems found without asking GitHub. What GitHub
// answers has its reasons in api/v1alpha1 (CredentialsRefused, AppNotInstalled, ...).
const (
	ReasonInvalidURL         = "InvalidURL"
	ReasonSecretNotFound     = "CredentialsSecretNotFound"
	ReasonInvalidCredentials = "InvalidCredentials"
	// ReasonInsecureURL: github.url starts with http:// and the controller was not
	// started with --github-allow-http.
	ReasonInsecureURL = "InsecureGitHubURL"
)

// AllowHTTPFlag is the controller flag that lets pools use http:// GitHub URLs.
const AllowHTTPFlag = "--github-allow-http"

// GitHubResolver finds the GitHub client and scope of a pool. Credentials Secrets are
// the user's and carry no Gantry label, so they are read directly from the API server,
// at most once per SecretTTL per Secret, instead of through a cluster-wide informer.
type GitHubResolver struct {
	Reader    client.Reader
	Provider  *github.Provider
	Clock     clock.PassiveClock
	SecretTTL time.Duration
	// AllowHTTP accepts http:// GitHub URLs (the simulator, a test server). Without it
	// such a pool gets a ConfigError: credentials must not cross the network in clear.
	AllowHTTP bool

	mu      sync.Mutex
	secrets *SecretCache
	access  map[accessKey]accessEntry
}

// For returns the client and scope of a pool, or a *ConfigError the pool's owner
// must fix, or an *UnavailableError (the Secret could not be read). It does not call
// GitHub; Check does.
func (r *GitHubResolver) For(ctx context.Context, pool *v1alpha1.RunnerPool) (github.Client, github.Scope, error) {
	c, scope, _, err := r.resolve(ctx, pool)
	return c, scope, err
}

// resolve is For, plus a fingerprint of the credentials Secret's data.
func (r *GitHubResolver) resolve(ctx context.Context, pool *v1alpha1.RunnerPool) (github.Client, github.Scope, string, error) {
	scope, err := github.ParseURL(pool.Spec.GitHub.URL)
	if err != nil {
		return nil, github.Scope{}, "", &ConfigError{Reason: ReasonInvalidURL, Message: err.Error()}
	}
	if scope.Scheme == "http" && !r.AllowHTTP {
		return nil, scope, "", &ConfigError{Reason: ReasonInsecureURL, Message: fmt.Sprintf(
			"github.url %s uses http://: credentials would cross the network unencrypted, so the controller refuses it "+
				"unless started with %s (meant for the GitHub simulator and test servers); use https:// "+
				"and, for a private CA, the controller's --github-ca-bundle", pool.Spec.GitHub.URL, AllowHTTPFlag)}
	}
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.GitHub.CredentialsSecretRef.Name}
	data, err := r.secretData(ctx, key)
	if err != nil {
		return nil, scope, "", err
	}
	c, err := r.Provider.Get(key, data)
	if err != nil {
		return nil, scope, "", &ConfigError{Reason: ReasonInvalidCredentials, Message: err.Error()}
	}
	return c, scope, fingerprint(data), nil
}

// Credentials returns the pool's scope, the data of its credentials Secret (checked to
// hold a token or App credentials) and a fingerprint of that data, for clients other
// than github.Client (the Actions service's). Errors are those of For.
func (r *GitHubResolver) Credentials(ctx context.Context, pool *v1alpha1.RunnerPool) (github.Scope, map[string][]byte, string, error) {
	_, scope, fp, err := r.resolve(ctx, pool)
	if err != nil {
		return scope, nil, "", err
	}
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.GitHub.CredentialsSecretRef.Name}
	data, err := r.secretData(ctx, key)
	return scope, data, fp, err
}

func (r *GitHubResolver) secretData(ctx context.Context, key types.NamespacedName) (map[string][]byte, error) {
	data, found, err := r.secretCache().Get(ctx, key)
	if err != nil {
		return nil, &UnavailableError{Reason: v1alpha1.ReasonCredentialsSecretUnreadable, Message: fmt.Sprintf(
			"could not read credentials secret %s from the API server: %v; check the controller's RBAC (get secrets) and the API server", key, err)}
	}
	if !found {
		return nil, &ConfigError{Reason: ReasonSecretNotFound, Message: fmt.Sprintf(
			"credentials secret %s not found: create it with github_token, or github_app_id, "+
				"github_app_installation_id and github_app_private_key", key)}
	}
	return data, nil
}

func (r *GitHubResolver) secretCache() *SecretCache {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = &SecretCache{Reader: r.Reader, Clock: r.Clock, TTL: r.SecretTTL}
	}
	return r.secrets
}
