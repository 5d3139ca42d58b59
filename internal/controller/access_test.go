package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/github"
)

// groupClient answers RunnerGroupID with err and counts the calls.
type groupClient struct {
	github.Client
	err   error
	calls int
}

func (c *groupClient) RunnerGroupID(context.Context, github.Scope, string) (int64, error) {
	c.calls++
	return 1, c.err
}

func TestCheckAsksGitHubOncePerTTLAndSaysWhatToFix(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gc := &groupClient{}
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "creds"}, Data: map[string][]byte{"github_token": []byte("ghp_x")}}
	r := &GitHubResolver{
		Reader:    fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build(),
		Provider:  github.NewProvider(github.ProviderOptions{NewClient: func(github.Credentials, github.Options) (github.Client, error) { return gc, nil }}),
		Clock:     clk,
		SecretTTL: 30 * time.Second,
	}
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "p"}}
	pool.Spec.GitHub = v1alpha1.GitHubSpec{URL: "https://github.com/acme", RunnerGroup: "Default",
		CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"}}
	ctx := context.Background()
	reason := func(err error) string {
		var cfg *ConfigError
		var down *UnavailableError
		switch {
		case err == nil:
			return ""
		case errors.As(err, &cfg):
			return cfg.Reason
		case errors.As(err, &down):
			return "unavailable:" + down.Reason
		}
		return "other: " + err.Error()
	}

	steps := []struct {
		name      string
		err       error
		advance   time.Duration
		want      string
		wantCalls int
	}{
		{name: "refused", err: github.NewUnauthorizedError("401", nil), want: v1alpha1.ReasonCredentialsRefused, wantCalls: 1},
		{name: "kept for accessRetry", err: nil, advance: 10 * time.Second, want: v1alpha1.ReasonCredentialsRefused, wantCalls: 1},
		{name: "asked again after accessRetry: repaired", err: nil, advance: accessRetry, want: "", wantCalls: 2},
		{name: "a success is kept for accessTTL", err: github.NewUnauthorizedError("401", nil), advance: accessTTL - time.Second, want: "", wantCalls: 2},
		{name: "an outage after a success keeps the success", err: errors.New("502"), advance: time.Second, want: "", wantCalls: 3},
		{name: "no such group", err: github.NewNotFoundError("looking up", github.ErrNoSuchRunnerGroup), advance: accessRetry, want: v1alpha1.ReasonRunnerGroupNotFound, wantCalls: 4},
		{name: "no such organization", err: github.NewNotFoundError("looking up", errors.New("404")), advance: accessRetry, want: v1alpha1.ReasonScopeNotFound, wantCalls: 5},
		{name: "app uninstalled", err: github.NewAppNotInstalledError("404 on the installation token", nil), advance: accessRetry, want: v1alpha1.ReasonAppNotInstalled, wantCalls: 6},
	}
	for _, st := range steps {
		clk.Step(st.advance)
		gc.err = st.err
		got := reason(r.Check(ctx, pool))
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s: reason (-want +got):\n%s", st.name, diff)
		}
		if gc.calls != st.wantCalls {
			t.Errorf("%s: %d calls to GitHub, want %d", st.name, gc.calls, st.wantCalls)
		}
	}

	// Without a previous success, an outage is reported as one, and the Secret is not
	// blamed.
	pool.Spec.GitHub.RunnerGroup = "other"
	gc.err = errors.New("502 Bad Gateway")
	if got := reason(r.Check(ctx, pool)); got != "unavailable:"+v1alpha1.ReasonGitHubUnavailable {
		t.Errorf("outage on a first check: %s, want unavailable:%s", got, v1alpha1.ReasonGitHubUnavailable)
	}
}
