package github

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

const (
	// defaultSecondaryBackoff is how long to wait after a secondary rate limit that
	// names no Retry-After: GitHub's documentation says at least one minute.
	defaultSecondaryBackoff = time.Minute
	// maxPeekBody bounds how much of a 403 body is read to tell a rate limit from a
	// permission error.
	maxPeekBody = 64 << 10
)

// rateLimitTransport meters every request and enforces GitHub's rate limits for one
// credential on one API host. It sits directly above the network transport, beneath
// the auth transport, so it also sees (and guards) the App installation-token exchange.
//
// On each response it reads X-RateLimit-Remaining/-Reset/-Resource into
// gantry_github_rate_limit_remaining. A 403/429 with Retry-After, or with Remaining 0
// and a Reset time, or a 429/403 whose body says "rate limit", becomes a RateLimited
// error, and the credential is blocked until then: calls fail fast with RateLimited
// and no network traffic. A 2xx with Remaining 0 blocks too, so the next call does not
// spend a request to learn the budget is gone. 5xx and other statuses pass through.
type rateLimitTransport struct {
	next       http.RoundTripper
	clock      clock.PassiveClock
	credential string

	mu           sync.Mutex
	blockedUntil time.Time
}

func (t *rateLimitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	endpoint := routeTemplate(req.Method, req.URL.Path)
	now := t.clock.Now()
	if wait := t.blocked(now); wait > 0 {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		blockedTotal.WithLabelValues(t.credential).Inc()
		return nil, NewRateLimitedError(fmt.Sprintf("GitHub rate limit for credential %s still exhausted, not sending %s", t.credential, endpoint), wait)
	}

	resp, err := t.next.RoundTrip(req)
	requestDuration.WithLabelValues(endpoint).Observe(t.clock.Since(now).Seconds())
	if err != nil {
		requestsTotal.WithLabelValues(endpoint, "error").Inc()
		return nil, err
	}
	requestsTotal.WithLabelValues(endpoint, strconv.Itoa(resp.StatusCode)).Inc()

	now = t.clock.Now()
	remaining, hasRemaining := headerInt(resp.Header, "X-RateLimit-Remaining")
	if hasRemaining {
		rateLimitRemaining.WithLabelValues(t.credential, rateLimitResource(resp.Header)).Set(float64(remaining))
	}
	reset, hasReset := headerInt(resp.Header, "X-RateLimit-Reset")
	resetWait := time.Duration(0)
	if hasReset {
		resetWait = time.Unix(int64(reset), 0).Sub(now)
	}

	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
		wait, kind, limited := t.classify(resp, now, hasRemaining && remaining == 0 && hasReset, resetWait)
		if limited {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxPeekBody))
			_ = resp.Body.Close()
			wait = max(wait, time.Second)
			t.block(now.Add(wait))
			rateLimitedTotal.WithLabelValues(t.credential, kind).Inc()
			return nil, NewRateLimitedError(fmt.Sprintf("GitHub %s rate limit for credential %s exceeded on %s (HTTP %d)", kind, t.credential, endpoint, resp.StatusCode), wait)
		}
		return resp, nil
	}
	if hasRemaining && remaining == 0 && hasReset && resetWait > 0 && resp.StatusCode < 300 {
		t.block(now.Add(resetWait))
	}
	return resp, nil
}

// classify tells a rate-limit response from another 403/429 and says how long to wait.
// It may replace resp.Body with an equivalent reader after peeking at it.
func (t *rateLimitTransport) classify(resp *http.Response, now time.Time, exhausted bool, resetWait time.Duration) (time.Duration, string, bool) {
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && secs >= 0 {
			return time.Duration(secs) * time.Second, "secondary", true
		}
		if at, err := http.ParseTime(ra); err == nil {
			return at.Sub(now), "secondary", true
		}
	}
	if exhausted {
		return resetWait, "primary", true
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return defaultSecondaryBackoff, "secondary", true
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxPeekBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(bytes.ToLower(body), []byte("rate limit")) {
		return defaultSecondaryBackoff, "secondary", true
	}
	return 0, "", false
}

func (t *rateLimitTransport) blocked(now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Before(t.blockedUntil) {
		return t.blockedUntil.Sub(now)
	}
	return 0
}

func (t *rateLimitTransport) block(until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if until.After(t.blockedUntil) {
		t.blockedUntil = until
	}
}

func headerInt(h http.Header, key string) (int, bool) {
	v := h.Get(key)
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	return n, err == nil
}

// rateLimitResource returns X-RateLimit-Resource if it is a plain word (GitHub's
// buckets are "core", "graphql", "search", ...), else "core", so a broken server
// cannot grow the label set.
func rateLimitResource(h http.Header) string {
	r := h.Get("X-RateLimit-Resource")
	if r == "" || !isAPIWord(r) {
		return "core"
	}
	return r
}

// tokenTransport authenticates with a personal access token.
type tokenTransport struct {
	token string
	next  http.RoundTripper
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}
