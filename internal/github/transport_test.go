package github

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// rateLimitHeaders sets GitHub's primary rate-limit headers.
func rateLimitHeaders(w http.ResponseWriter, remaining int, reset time.Time) {
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	w.Header().Set("X-RateLimit-Used", strconv.Itoa(5000-remaining))
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	w.Header().Set("X-RateLimit-Resource", "core")
}

func TestRateLimitBlocksAndRecovers(t *testing.T) {
	tests := []struct {
		name      string
		limited   func(w http.ResponseWriter, now time.Time)
		wantWait  time.Duration
		wantKind  string
		wantReset time.Duration // when the credential is unblocked
	}{
		{
			name: "secondary 403 with Retry-After",
			limited: func(w http.ResponseWriter, now time.Time) {
				rateLimitHeaders(w, 4000, now.Add(time.Hour))
				w.Header().Set("Retry-After", "30")
				ghError(w, http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
			},
			wantWait: 30 * time.Second, wantKind: "secondary",
		},
		{
			name: "429 with Retry-After",
			limited: func(w http.ResponseWriter, now time.Time) {
				w.Header().Set("Retry-After", "90")
				ghError(w, http.StatusTooManyRequests, "Too Many Requests")
			},
			wantWait: 90 * time.Second, wantKind: "secondary",
		},
		{
			name: "primary 403 with remaining 0 and reset",
			limited: func(w http.ResponseWriter, now time.Time) {
				rateLimitHeaders(w, 0, now.Add(20*time.Minute))
				ghError(w, http.StatusForbidden, "API rate limit exceeded for user ID 1.")
			},
			wantWait: 20 * time.Minute, wantKind: "primary",
		},
		{
			name: "secondary 403 without headers waits a minute",
			limited: func(w http.ResponseWriter, now time.Time) {
				ghError(w, http.StatusForbidden, "You have exceeded a secondary rate limit.")
			},
			wantWait: time.Minute, wantKind: "secondary",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			clk := newClock()
			var limit atomic.Bool
			limit.Store(true)
			f.handle("GET /orgs/acme/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
				if limit.Load() {
					tt.limited(w, clk.Now())
					return
				}
				rateLimitHeaders(w, 4999, clk.Now().Add(time.Hour))
				writeJSON(w, http.StatusOK, runnerJSON(1, "r1", "online", false))
			})
			cred := "ns/rl-" + tt.name
			c := newTokenClient(t, cred, clk)
			scope := f.scope("acme")
			ctx := context.Background()
			limitedBefore := testutil.ToFloat64(rateLimitedTotal.WithLabelValues(cred, tt.wantKind))
			blockedBefore := testutil.ToFloat64(blockedTotal.WithLabelValues(cred))

			_, err := c.GetRunner(ctx, scope, 1)
			if !IsRateLimited(err) {
				t.Fatalf("GetRunner() error = %v, want RateLimited", err)
			}
			if got := RetryAfter(err); got != tt.wantWait {
				t.Errorf("RetryAfter() = %v, want %v", got, tt.wantWait)
			}
			if got := testutil.ToFloat64(rateLimitedTotal.WithLabelValues(cred, tt.wantKind)) - limitedBefore; got != 1 {
				t.Errorf("gantry_github_rate_limited_total{kind=%q} grew by %v, want 1", tt.wantKind, got)
			}

			// While blocked, calls fail fast without touching the network, with the
			// remaining wait.
			limit.Store(false)
			clk.SetTime(clk.Now().Add(tt.wantWait / 2))
			_, err = c.GetRunner(ctx, scope, 1)
			if !IsRateLimited(err) {
				t.Fatalf("GetRunner() while blocked: error = %v, want RateLimited", err)
			}
			if got, want := RetryAfter(err), tt.wantWait-tt.wantWait/2; got != want {
				t.Errorf("RetryAfter() while blocked = %v, want %v", got, want)
			}
			if n := len(f.gotCalls()); n != 1 {
				t.Errorf("GitHub got %d calls while blocked, want 1 (the rate-limited one)", n)
			}
			if got := testutil.ToFloat64(blockedTotal.WithLabelValues(cred)) - blockedBefore; got != 1 {
				t.Errorf("gantry_github_requests_blocked_total grew by %v, want 1", got)
			}

			// Once the fake clock passes the reset, calls go through again.
			clk.SetTime(clk.Now().Add(tt.wantWait))
			if _, err := c.GetRunner(ctx, scope, 1); err != nil {
				t.Fatalf("GetRunner() after the reset: error = %v", err)
			}
			if n := len(f.gotCalls()); n != 2 {
				t.Errorf("GitHub got %d calls, want 2", n)
			}
		})
	}
}

func TestForbiddenWithoutRateLimitIsUnauthorized(t *testing.T) {
	f := newFakeGitHub(t)
	f.handle("POST /orgs/acme/actions/runners/registration-token", func(w http.ResponseWriter, r *http.Request) {
		rateLimitHeaders(w, 4321, time.Now().Add(time.Hour))
		ghError(w, http.StatusForbidden, "Resource not accessible by personal access token")
	})
	c := newTokenClient(t, "ns/forbidden", newClock())
	_, err := c.CreateRegistrationToken(context.Background(), f.scope("acme"))
	if !IsUnauthorized(err) || IsRateLimited(err) {
		t.Fatalf("error = %v (reason %q), want Unauthorized", err, ReasonOf(err))
	}
	if _, ok := errors.AsType[*Error](err); !ok {
		t.Errorf("errors.As(*Error) failed on %v", err)
	}
	// Not blocked: the next call reaches GitHub.
	_, _ = c.CreateRegistrationToken(context.Background(), f.scope("acme"))
	if n := len(f.gotCalls()); n != 2 {
		t.Errorf("GitHub got %d calls, want 2", n)
	}
}

func TestSuccessWithExhaustedBudgetBlocksNextCall(t *testing.T) {
	f := newFakeGitHub(t)
	clk := newClock()
	f.handle("GET /orgs/acme/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
		rateLimitHeaders(w, 0, clk.Now().Add(10*time.Minute))
		writeJSON(w, http.StatusOK, runnerJSON(1, "r1", "online", false))
	})
	c := newTokenClient(t, "ns/exhausted", clk)
	if _, err := c.GetRunner(context.Background(), f.scope("acme"), 1); err != nil {
		t.Fatalf("first GetRunner() error = %v", err)
	}
	_, err := c.GetRunner(context.Background(), f.scope("acme"), 1)
	if !IsRateLimited(err) || RetryAfter(err) != 10*time.Minute {
		t.Fatalf("second GetRunner() error = %v (retry after %v), want RateLimited for 10m", err, RetryAfter(err))
	}
	if n := len(f.gotCalls()); n != 1 {
		t.Errorf("GitHub got %d calls, want 1", n)
	}
}

func TestServerErrorIsOrdinaryAndDoesNotBlock(t *testing.T) {
	f := newFakeGitHub(t)
	f.handle("GET /orgs/acme/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60") // ignored on 5xx
		ghError(w, http.StatusServiceUnavailable, "Service Unavailable")
	})
	c := newTokenClient(t, "ns/5xx", newClock())
	for range 2 {
		_, err := c.GetRunner(context.Background(), f.scope("acme"), 1)
		if err == nil || ReasonOf(err) != "" {
			t.Fatalf("GetRunner() error = %v (reason %q), want an ordinary error", err, ReasonOf(err))
		}
	}
	if n := len(f.gotCalls()); n != 2 {
		t.Errorf("GitHub got %d calls, want 2", n)
	}
}

func TestMetrics(t *testing.T) {
	f := newFakeGitHub(t)
	clk := newClock()
	var remaining atomic.Int64
	remaining.Store(4900)
	f.handle("POST /orgs/acme/actions/runners/generate-jitconfig", func(w http.ResponseWriter, r *http.Request) {
		left := remaining.Add(-1)
		rateLimitHeaders(w, int(left), clk.Now().Add(time.Hour))
		writeJSON(w, http.StatusCreated, map[string]any{"runner": runnerJSON(left, "r", "offline", false), "encoded_jit_config": "x"})
	})
	f.handle("GET /orgs/acme/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "4800")
		w.Header().Set("X-RateLimit-Resource", "RUNNER 123 !!") // not a bucket name: falls back to core
		ghError(w, http.StatusNotFound, "Not Found")
	})
	const cred = "ns/metrics"
	c := newTokenClient(t, cred, clk)
	jit := "POST /orgs/{org}/actions/runners/generate-jitconfig"
	get := "GET /orgs/{org}/actions/runners/{id}"
	before201 := testutil.ToFloat64(requestsTotal.WithLabelValues(jit, "201"))
	before404 := testutil.ToFloat64(requestsTotal.WithLabelValues(get, "404"))

	for i := range 3 {
		if _, err := c.GenerateJITConfig(context.Background(), f.scope("acme"), JITConfigRequest{Name: "r" + strconv.Itoa(i), Labels: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(rateLimitRemaining.WithLabelValues(cred, "core")); got != 4897 {
		t.Errorf("gantry_github_rate_limit_remaining = %v, want 4897", got)
	}
	_, _ = c.GetRunner(context.Background(), f.scope("acme"), 77)

	got := map[string]float64{
		jit + " 201": testutil.ToFloat64(requestsTotal.WithLabelValues(jit, "201")) - before201,
		get + " 404": testutil.ToFloat64(requestsTotal.WithLabelValues(get, "404")) - before404,
		"remaining":  testutil.ToFloat64(rateLimitRemaining.WithLabelValues(cred, "core")),
	}
	want := map[string]float64{jit + " 201": 3, get + " 404": 1, "remaining": 4800}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func TestRouteTemplate(t *testing.T) {
	tests := []struct {
		method, path, want string
	}{
		{"POST", "/orgs/acme/actions/runners/generate-jitconfig", "POST /orgs/{org}/actions/runners/generate-jitconfig"},
		{"POST", "/api/v3/repos/acme/app/actions/runners/registration-token", "POST /repos/{owner}/{repo}/actions/runners/registration-token"},
		{"DELETE", "/enterprises/big/actions/runners/123", "DELETE /enterprises/{enterprise}/actions/runners/{id}"},
		{"GET", "/repos/Acme/My.Repo/actions/runs/99/jobs", "GET /repos/{owner}/{repo}/actions/runs/{id}/jobs"},
		{"POST", "/app/installations/5/access_tokens", "POST /app/installations/{id}/access_tokens"},
		{"POST", "/app/hook/deliveries/12/attempts", "POST /app/hook/deliveries/{id}/attempts"},
		{"GET", "/unknown/Runner-Name-42", "GET /unknown/{param}"},
		{"GET", "/repos/acme", "GET /repos/{owner}"},
	}
	for _, tt := range tests {
		if got := routeTemplate(tt.method, tt.path); got != tt.want {
			t.Errorf("routeTemplate(%s, %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}
