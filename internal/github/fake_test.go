package github

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// fakeGitHub is an httptest server that speaks GitHub's REST paths under a GHES base
// (/api/v3). Each test registers only the routes it needs, with GitHub's JSON shapes,
// status codes and headers.
type fakeGitHub struct {
	t   *testing.T
	srv *httptest.Server
	mux *http.ServeMux

	mu    sync.Mutex
	calls []string
	auths []string
}

// testToken is the personal access token test clients send.
const testToken = "ghp_testTOKEN0123456789abcdefghijklmnopqrst"

func newFakeGitHub(t *testing.T) *fakeGitHub {
	t.Helper()
	f := &fakeGitHub{t: t, mux: http.NewServeMux()}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		call := r.Method + " " + strings.TrimPrefix(r.URL.Path, "/api/v3")
		if r.URL.RawQuery != "" {
			call += "?" + r.URL.RawQuery
		}
		f.calls = append(f.calls, call)
		f.auths = append(f.auths, r.Header.Get("Authorization"))
		f.mu.Unlock()
		f.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// handle registers h for a GitHub route like "GET /orgs/{org}/actions/runners", served
// under the GHES API base.
func (f *fakeGitHub) handle(pattern string, h http.HandlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	f.mux.HandleFunc(method+" /api/v3"+path, h)
}

// scope parses a scope on the fake's host: "acme", "acme/app", "enterprises/big".
func (f *fakeGitHub) scope(path string) Scope {
	f.t.Helper()
	s, err := ParseURL(f.srv.URL + "/" + path)
	if err != nil {
		f.t.Fatalf("ParseURL: %v", err)
	}
	return s
}

func (f *fakeGitHub) gotCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeGitHub) gotAuths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auths...)
}

// newTokenClient returns a PAT client for the fake, on a fake clock.
func newTokenClient(t *testing.T, name string, clk *clocktesting.FakePassiveClock) Client {
	t.Helper()
	c, err := NewClient(Credentials{Token: testToken}, Options{Name: name, Clock: clk})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

func newClock() *clocktesting.FakePassiveClock {
	return clocktesting.NewFakePassiveClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ghError writes GitHub's error body.
func ghError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{
		"message":           msg,
		"documentation_url": "https://docs.github.com/rest",
	})
}

// runnerJSON is a runner as GitHub returns it.
func runnerJSON(id int64, name, status string, busy bool, labels ...string) map[string]any {
	ls := []map[string]any{}
	for i, l := range labels {
		typ := "custom"
		if l == "self-hosted" || l == "linux" || l == "x64" {
			typ = "read-only"
		}
		ls = append(ls, map[string]any{"id": i + 1, "name": l, "type": typ})
	}
	return map[string]any{"id": id, "name": name, "os": "linux", "status": status, "busy": busy, "labels": ls}
}
