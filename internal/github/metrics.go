package github

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the GitHub client. Labels are bounded: endpoint is a route template (no
// names or ids), code an HTTP status, credential the namespace/name of a credentials
// Secret, resource a GitHub rate-limit bucket ("core", "graphql", ...).
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_github_requests_total",
		Help: "GitHub API requests sent, by route template (e.g. \"POST /orgs/{org}/actions/runners/generate-jitconfig\") and HTTP status code (\"error\" when no response arrived).",
	}, []string{"endpoint", "code"})

	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gantry_github_request_duration_seconds",
		Help:    "Latency of GitHub API requests, by route template.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"endpoint"})

	rateLimitRemaining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gantry_github_rate_limit_remaining",
		Help: "Requests left in the current GitHub rate-limit window (X-RateLimit-Remaining), by credentials Secret and rate-limit resource.",
	}, []string{"credential", "resource"})

	rateLimitedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_github_rate_limited_total",
		Help: "GitHub responses that were rate limits (kind primary: budget exhausted; secondary: Retry-After or abuse limit), by credentials Secret.",
	}, []string{"credential", "kind"})

	blockedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_github_requests_blocked_total",
		Help: "GitHub API calls failed fast without a request because the credential was still rate limited.",
	}, []string{"credential"})
)

func init() {
	metrics.Registry.MustRegister(requestsTotal, requestDuration, rateLimitRemaining, rateLimitedTotal, blockedTotal)
}

// routeTemplate turns a request path into a bounded route template: the GHES /api/v3
// prefix is dropped, owner, repository, organization and enterprise names become
// {owner}, {repo}, {org}, {enterprise}, numbers become {id}, and any other segment
// that is not a lower-case API word becomes {param}.
func routeTemplate(method, path string) string {
	path = strings.TrimPrefix(path, "/api/v3")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := range segs {
		switch {
		case i == 1 && segs[0] == "repos":
			segs[i] = "{owner}"
		case i == 2 && segs[0] == "repos":
			segs[i] = "{repo}"
		case i == 1 && segs[0] == "orgs":
			segs[i] = "{org}"
		case i == 1 && segs[0] == "enterprises":
			segs[i] = "{enterprise}"
		case i == 1 && segs[0] == "users":
			segs[i] = "{user}"
		case allDigits(segs[i]):
			segs[i] = "{id}"
		case !isAPIWord(segs[i]):
			segs[i] = "{param}"
		}
	}
	return method + " /" + strings.Join(segs, "/")
}

func isAPIWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && c != '-' && c != '_' {
			return false
		}
	}
	return s != "" && len(s) <= 40
}
