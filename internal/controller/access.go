package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/github"
)

// UnavailableError says the pool's access to GitHub could not be checked right now: the
// credentials Secret could not be read from the API server, or GitHub did not answer.
// Nothing is wrong with the pool as far as Gantry knows; runners are still created
// and retry on their own.
type UnavailableError struct {
	Reason  string
	Message string
}

func (e *UnavailableError) Error() string { return e.Message }

// How long the answer of an access check is kept per credentials and scope: a success
// for accessTTL, a refusal or an outage for accessRetry, so that a fixed Secret or an
// App installed again makes the pool Ready within about a minute.
const (
	accessTTL   = 10 * time.Minute
	accessRetry = 30 * time.Second
	// accessCheckRunner is the runner name a repository pool's check lists runners by:
	// an answer, empty or not, proves the credentials can manage the repository's runners.
	accessCheckRunner = "gantry-access-check"
)

type accessKey struct {
	secret      types.NamespacedName
	fingerprint string
	scope       string
	group       string
}

type accessEntry struct {
	err    error // nil, *ConfigError or *UnavailableError
	nextAt time.Time
	everOK bool
}

// Check asks GitHub whether the pool's credentials work for its scope, with one cheap,
// registration-token-free call: the runner group lookup for an organization or an
// enterprise (cached by the client and reused by registration, so it usually costs
// nothing extra), a runner listing by name for a repository. The answer is kept per
// credentials and scope — accessTTL after a success, accessRetry after anything else —
// so a pool reconcile does not call GitHub. It returns nil, a *ConfigError whose reason
// says what to fix (CredentialsRefused, AppNotInstalled, RunnerGroupNotFound,
// ScopeNotFound, or a Secret problem), or an *UnavailableError. A blip of GitHub after
// a success keeps the success until the next check.
func (r *GitHubResolver) Check(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	gh, sc, fp, err := r.resolve(ctx, pool)
	if err != nil {
		return err
	}
	key := accessKey{
		secret:      types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.GitHub.CredentialsSecretRef.Name},
		fingerprint: fp, scope: sc.String(),
	}
	if sc.Kind != github.ScopeRepository {
		key.group = strings.ToLower(pool.Spec.GitHub.RunnerGroup)
	}
	now := r.Clock.Now()
	r.mu.Lock()
	if r.access == nil {
		r.access = map[accessKey]accessEntry{}
	}
	e, ok := r.access[key]
	r.mu.Unlock()
	if ok && now.Before(e.nextAt) {
		return e.err
	}

	if sc.Kind == github.ScopeRepository {
		_, err = gh.ListRunners(ctx, sc, accessCheckRunner)
	} else {
		_, err = gh.RunnerGroupID(ctx, sc, pool.Spec.GitHub.RunnerGroup)
	}
	verdict := accessVerdict(err, pool, sc, key.secret)
	next := now.Add(accessRetry)
	if verdict == nil {
		next = now.Add(accessTTL)
	}
	var down *UnavailableError
	if errors.As(verdict, &down) && e.everOK {
		verdict = nil // GitHub's outage says nothing against credentials that worked
	}
	r.mu.Lock()
	r.access[key] = accessEntry{err: verdict, nextAt: next, everOK: e.everOK || verdict == nil}
	r.mu.Unlock()
	return verdict
}

// accessVerdict turns the check's answer into what the pool's owner is told.
func accessVerdict(err error, pool *v1alpha1.RunnerPool, sc github.Scope, secret types.NamespacedName) error {
	switch {
	case err == nil:
		return nil
	case github.IsAppNotInstalled(err):
		return &ConfigError{Reason: v1alpha1.ReasonAppNotInstalled, Message: err.Error()}
	case github.IsUnauthorized(err):
		return &ConfigError{Reason: v1alpha1.ReasonCredentialsRefused, Message: fmt.Sprintf(
			"GitHub refused the credentials in Secret %s for %s: %v; fix the token or the App's permissions (Self-hosted runners: write)", secret, sc, err)}
	case github.IsNotFound(err) && errors.Is(err, github.ErrNoSuchRunnerGroup):
		return &ConfigError{Reason: v1alpha1.ReasonRunnerGroupNotFound, Message: fmt.Sprintf(
			"%s has no runner group %q: create it on GitHub, or set github.runnerGroup to an existing group", sc, pool.Spec.GitHub.RunnerGroup)}
	case github.IsNotFound(err):
		return &ConfigError{Reason: v1alpha1.ReasonScopeNotFound, Message: fmt.Sprintf(
			"GitHub does not know %s, or the credentials in Secret %s cannot see it (404): check github.url and which accounts the token or App installation covers", sc, secret)}
	case github.IsRateLimited(err):
		return &UnavailableError{Reason: v1alpha1.ReasonGitHubUnavailable, Message: fmt.Sprintf(
			"could not check the pool's access to %s: the credentials are rate limited for %s", sc, github.RetryAfter(err).Round(time.Second))}
	}
	return &UnavailableError{Reason: v1alpha1.ReasonGitHubUnavailable, Message: fmt.Sprintf(
		"could not check the pool's access to %s: %v", sc, err)}
}

// fingerprint identifies a Secret's data without keeping it: a rotated Secret is
// checked again at once.
func fingerprint(data map[string][]byte) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		_, _ = fmt.Fprintf(h, "%d:%s:%d:", len(k), k, len(data[k]))
		_, _ = h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
