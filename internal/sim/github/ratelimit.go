package github

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RateLimits configure the simulator's rate limits. Zero fields take GitHub.com's
// defaults; Disabled turns all limits and their headers off, as on GHES.
type RateLimits struct {
	Disabled bool `json:"disabled"`
	// PAT, Installation and App are primary limits per Window for each PAT,
	// installation and App (JWT) credential (default 5000 each).
	PAT          int `json:"pat,omitempty"`
	Installation int `json:"installation,omitempty"`
	App          int `json:"app,omitempty"`
	// Unauthenticated is the limit per client IP of anonymous requests (default 60).
	Unauthenticated int `json:"unauthenticated,omitempty"`
	// Window is the primary window (default 1h).
	Window Duration `json:"window,omitempty"`
	// ExhaustedStatus is the status of a primary-limit answer: 403 (default) or 429.
	ExhaustedStatus int `json:"exhausted_status,omitempty"`
	// Secondary are the secondary limits.
	Secondary SecondaryLimits `json:"secondary"`
	// ActionsService is the primary limit per Window of each scope's calls to the
	// Actions service (runner scale sets). GitHub publishes none, so the default, 0,
	// is no limit; secondary limits do not apply to the service.
	ActionsService int `json:"actions_service,omitempty"`
}

// SecondaryLimits are GitHub's secondary rate limits, per credential.
type SecondaryLimits struct {
	Disabled bool `json:"disabled"`
	// PointsPerMinute is the budget per endpoint and minute (default 900); a GET or
	// HEAD costs 1 point, other methods 5.
	PointsPerMinute int `json:"points_per_minute,omitempty"`
	// Concurrent is the number of requests in flight allowed (default 100).
	Concurrent int `json:"concurrent,omitempty"`
	// Status is the status of a secondary-limit answer: 403 (default) or 429.
	Status int `json:"status,omitempty"`
}

func (rl RateLimits) withDefaults() RateLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&rl.PAT, 5000)
	def(&rl.Installation, 5000)
	def(&rl.App, 5000)
	def(&rl.Unauthenticated, 60)
	def(&rl.ExhaustedStatus, http.StatusForbidden)
	def(&rl.Secondary.PointsPerMinute, 900)
	def(&rl.Secondary.Concurrent, 100)
	def(&rl.Secondary.Status, http.StatusForbidden)
	if rl.Window <= 0 {
		rl.Window = Duration(time.Hour)
	}
	return rl
}

type primaryBucket struct {
	limit int
	used  int
	reset time.Time
}

type pointsWindow struct {
	points int
	reset  time.Time
}

// rateLimiter holds the limiters' counters; it has its own lock, apart from the model.
type rateLimiter struct {
	mu       sync.Mutex
	cfg      RateLimits
	primary  map[string]*primaryBucket
	points   map[string]*pointsWindow
	inflight map[string]int
}

func newRateLimiter(cfg RateLimits) *rateLimiter {
	return &rateLimiter{cfg: cfg, primary: map[string]*primaryBucket{}, points: map[string]*pointsWindow{}, inflight: map[string]int{}}
}

func (rl *rateLimiter) set(cfg RateLimits) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.cfg = cfg.withDefaults()
	rl.primary = map[string]*primaryBucket{}
	rl.points = map[string]*pointsWindow{}
}

func (rl *rateLimiter) config() RateLimits {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.cfg
}

// rateSubject says whose budget a request spends.
type rateSubject struct {
	key   string
	kind  credKind
	limit int
}

func (rl *rateLimiter) limitFor(sub rateSubject) int {
	if sub.limit > 0 {
		return sub.limit
	}
	switch sub.kind {
	case credPAT:
		return rl.cfg.PAT
	case credInstallation:
		return rl.cfg.Installation
	case credApp:
		return rl.cfg.App
	case credActions:
		return rl.cfg.ActionsService
	}
	return rl.cfg.Unauthenticated
}

// bucket returns the primary bucket of sub, starting a new window when the last ended.
func (rl *rateLimiter) bucket(sub rateSubject, now time.Time) *primaryBucket {
	b := rl.primary[sub.key]
	if b == nil || !now.Before(b.reset) {
		// Reset is whole epoch seconds (X-RateLimit-Reset): round up, so a window lasts
		// at least Window.
		b = &primaryBucket{limit: rl.limitFor(sub), reset: now.Add(time.Duration(rl.cfg.Window) + time.Second - 1).Truncate(time.Second)}
		rl.primary[sub.key] = b
	}
	return b
}

// admit applies the limits to one request of route by sub. It sets the X-RateLimit-*
// headers, and returns an error answer when a limit is exhausted, or a release func
// to call when the request is done. count=false admits without spending the primary
// budget (GET /rate_limit).
func (rl *rateLimiter) admit(h http.Header, sub rateSubject, rt *route, now time.Time, count bool) (release func(), e *apiError) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.cfg.Disabled || (sub.kind == credActions && rl.cfg.ActionsService <= 0) {
		return func() {}, nil
	}
	b := rl.bucket(sub, now)
	setHeaders := func() {
		h.Set("X-RateLimit-Limit", strconv.Itoa(b.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(max(0, b.limit-b.used)))
		h.Set("X-RateLimit-Used", strconv.Itoa(b.used))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(b.reset.Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
	}
	if !rl.cfg.Secondary.Disabled && sub.kind != credNone && sub.kind != credActions {
		sec := rl.cfg.Secondary
		if rl.inflight[sub.key] >= sec.Concurrent {
			setHeaders()
			return nil, secondaryError(sec.Status, 1)
		}
		cost := 1
		if rt.method != http.MethodGet && rt.method != http.MethodHead {
			cost = 5
		}
		pk := sub.key + " " + rt.id
		w := rl.points[pk]
		if w == nil || !now.Before(w.reset) {
			w = &pointsWindow{reset: now.Add(time.Minute)}
			rl.points[pk] = w
		}
		if w.points+cost > sec.PointsPerMinute {
			setHeaders()
			retry := int((w.reset.Sub(now) + time.Second - 1) / time.Second)
			return nil, secondaryError(sec.Status, max(1, retry))
		}
		w.points += cost
	}
	if count {
		if b.used >= b.limit {
			setHeaders()
			e := newError(rl.cfg.ExhaustedStatus, primaryMessage(sub))
			e.DocumentationURL = docsPrimaryLimit
			return nil, e
		}
		b.used++
	}
	setHeaders()
	if sub.kind == credNone || sub.kind == credActions || rl.cfg.Secondary.Disabled {
		return func() {}, nil
	}
	rl.inflight[sub.key]++
	return func() {
		rl.mu.Lock()
		defer rl.mu.Unlock()
		rl.inflight[sub.key]--
	}, nil
}

// refund gives back the primary-limit call admit spent on a request answered 304 Not
// Modified, which GitHub does not count, and sets the X-RateLimit-* headers again.
func (rl *rateLimiter) refund(h http.Header, sub rateSubject, now time.Time) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.cfg.Disabled || sub.kind == credActions {
		return
	}
	b := rl.bucket(sub, now)
	if b.used > 0 {
		b.used--
	}
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(0, b.limit-b.used)))
	h.Set("X-RateLimit-Used", strconv.Itoa(b.used))
}

func primaryMessage(sub rateSubject) string {
	switch sub.kind {
	case credInstallation:
		return "API rate limit exceeded for installation ID " + sub.key[len("installation:"):] + "."
	case credPAT:
		return "API rate limit exceeded for user ID " + sub.key[len("pat:"):] + "."
	case credApp:
		return "API rate limit exceeded for app ID " + sub.key[len("app:"):] + "."
	case credActions:
		return "API rate limit exceeded for " + sub.key + "."
	}
	return "API rate limit exceeded for " + sub.key + ". (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)"
}

func secondaryError(status, retryAfter int) *apiError {
	e := newError(status, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.")
	e.DocumentationURL = docsSecondaryLimit
	e.header = map[string]string{"Retry-After": strconv.Itoa(retryAfter)}
	return e
}

// rateResource is one entry of GET /rate_limit.
type rateResource struct {
	Limit     int   `json:"limit"`
	Used      int   `json:"used"`
	Remaining int   `json:"remaining"`
	Reset     int64 `json:"reset"`
}

func (rl *rateLimiter) overview(sub rateSubject, now time.Time) (rateResource, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.cfg.Disabled {
		return rateResource{}, false
	}
	b := rl.bucket(sub, now)
	return rateResource{Limit: b.limit, Used: b.used, Remaining: max(0, b.limit-b.used), Reset: b.reset.Unix()}, true
}
