// Call counts of every route, by answer status.

package github

import (
	"net/http"
	"strings"
	"sync"
)

// CallCount is how often one REST route was called, by answer status.
type CallCount struct {
	Total    int64         `json:"total"`
	ByStatus map[int]int64 `json:"by_status"`
}

// Counted is how many of the calls count against GitHub's primary rate limit: all but
// those answered 304 Not Modified (conditional requests).
func (c CallCount) Counted() int64 { return c.Total - c.ByStatus[http.StatusNotModified] }

// routeUnmatched keys the calls that matched no route.
const routeUnmatched = "unmatched"

type callCounter struct {
	mu sync.Mutex
	m  map[string]*CallCount
}

func (cc *callCounter) init() { cc.m = map[string]*CallCount{} }

func (cc *callCounter) add(id string, status int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	c := cc.m[id]
	if c == nil {
		c = &CallCount{ByStatus: map[int]int64{}}
		cc.m[id] = c
	}
	c.Total++
	c.ByStatus[status]++
}

func (cc *callCounter) snapshot() map[string]CallCount {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := make(map[string]CallCount, len(cc.m))
	for k, v := range cc.m {
		by := make(map[int]int64, len(v.ByStatus))
		for s, n := range v.ByStatus {
			by[s] = n
		}
		out[k] = CallCount{Total: v.Total, ByStatus: by}
	}
	return out
}

func (cc *callCounter) reset() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.m = map[string]*CallCount{}
}

// statusWriter records the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// IsActionsServiceRoute reports whether a call count's route id ("METHOD /path", as
// CallCounts keys them) is the Actions service's (actions_routes.go): its bootstrap,
// POST /actions/runner-registration, or a route under /_apis/ (scale sets, sessions,
// the message queue, acquirejobs, agents). Every other route is REST, "unmatched" too:
// the calls no route matched are counted together, whichever API they were for.
func IsActionsServiceRoute(id string) bool {
	_, path, _ := strings.Cut(id, " ")
	return path == "/actions/runner-registration" || strings.HasPrefix(path, "/_apis/")
}
