package github

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAuthErrors(t *testing.T) {
	w := newWorld(t, worldOpts{})
	now := w.now()
	inst := "token " + w.installationToken(t)
	otherKey := func() string {
		// A JWT for the App signed by a key that is not the App's.
		tok, err := signJWT(mustKey(t), w.app.ID, now)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	tests := []struct {
		name, method, path, auth string
		wantCode                 int
		wantMessage              string
	}{
		{"no credentials", "GET", "/orgs/acme/actions/runners", "", 401, msgRequiresAuth},
		{"unknown token", "GET", "/orgs/acme/actions/runners", "token ghp_nope", 401, msgBadCredentials},
		{"garbled header", "GET", "/orgs/acme/actions/runners", "tokenonly", 401, msgBadCredentials},
		{"bad basic", "GET", "/orgs/acme/actions/runners", "Basic !!!", 401, msgBadCredentials},
		{"basic with PAT", "GET", "/orgs/acme/actions/runners", "Basic " + base64Std("admin:"+testPAT), 200, ""},
		{"PAT without admin:org", "GET", "/orgs/acme/actions/runners", "token " + testPATNoOrg, 403, msgPATScope},
		{"PAT with repo scope on repo", "GET", "/repos/acme/app/actions/runners", "token " + testPATNoOrg, 200, ""},
		{"installation on its org", "GET", "/orgs/acme/actions/runners", inst, 200, ""},
		{"installation on another org", "GET", "/orgs/other/actions/runners", inst, 403, msgIntegration},
		{"installation on enterprise", "GET", "/enterprises/ent/actions/runners", inst, 403, msgIntegration},
		{"enterprise PAT on enterprise", "GET", "/enterprises/ent/actions/runners", "token " + testPATEnt, 200, ""},
		{"missing org is 404 first", "GET", "/orgs/nope/actions/runners", inst, 404, msgNotFound},
		{"JWT on a token route", "GET", "/orgs/acme/actions/runners", "Bearer " + w.appJWT(t, now, now.Add(time.Minute)), 403, msgIntegration},
		{"token on an App route", "GET", "/app", inst, 401, msgJWTDecode},
		{"no credentials on an App route", "GET", "/app", "", 401, msgJWTDecode},
		{"expired JWT", "GET", "/app", "Bearer " + w.appJWT(t, now.Add(-20*time.Minute), now.Add(-time.Minute)), 401, msgJWTExpired},
		{"JWT exp too far", "GET", "/app", "Bearer " + w.appJWT(t, now, now.Add(time.Hour)), 401, msgJWTTooFar},
		{"JWT issued in the future", "GET", "/app", "Bearer " + w.appJWT(t, now.Add(5*time.Minute), now.Add(8*time.Minute)), 401, msgJWTIssuedAt},
		{"JWT with the wrong key", "GET", "/app", otherKey(), 401, msgJWTDecode},
		{"JWT garbage", "GET", "/app", "Bearer eyJ.eyJ.sig", 401, msgJWTDecode},
		{"valid JWT", "GET", "/app", "Bearer " + w.appJWT(t, now.Add(-time.Minute), now.Add(9*time.Minute)), 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := w.do(t, tc.method, tc.path, tc.auth, "")
			if resp.code != tc.wantCode {
				t.Fatalf("status = %d, want %d (body %s)", resp.code, tc.wantCode, resp.body)
			}
			if tc.wantMessage == "" {
				return
			}
			want := errorBody{Message: tc.wantMessage, DocumentationURL: docsREST, Status: strconv.Itoa(tc.wantCode)}
			if diff := cmp.Diff(want, decodeError(t, resp.body)); diff != "" {
				t.Errorf("error body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInstallationTokenExpires(t *testing.T) {
	w := newWorld(t, worldOpts{})
	tok := "token " + w.installationToken(t)
	if got := w.do(t, "GET", "/orgs/acme/actions/runners", tok, "").code; got != http.StatusOK {
		t.Fatalf("fresh token: status %d", got)
	}
	w.clk.Step(time.Hour)
	resp := w.do(t, "GET", "/orgs/acme/actions/runners", tok, "")
	if diff := cmp.Diff(errorBody{msgBadCredentials, docsREST, "401"}, decodeError(t, resp.body)); resp.code != 401 || diff != "" {
		t.Errorf("expired token: status %d, body (-want +got):\n%s", resp.code, diff)
	}
}

func TestBadInput(t *testing.T) {
	w := newWorld(t, worldOpts{})
	auth := "token " + testPAT
	tests := []struct {
		name, method, path, body string
		wantCode                 int
		wantMessage              string
	}{
		{"unknown route", "GET", "/orgs/acme/nothing-here", "", 404, msgNotFound},
		{"unknown route under GHES", "GET", "/api/v3/nothing", "", 404, msgNotFound},
		{"wrong method", "PUT", "/orgs/acme/actions/runners/registration-token", "", 404, msgNotFound},
		{"non-numeric runner id", "GET", "/orgs/acme/actions/runners/abc", "", 404, msgNotFound},
		{"malformed JSON", "POST", "/orgs/acme/actions/runners/generate-jitconfig", `{"name":`, 400, msgParseJSON},
		{"JSON array body", "POST", "/orgs/acme/actions/runners/generate-jitconfig", `[1]`, 422, "Invalid request.\n\nBody must be a JSON object."},
		{"wrong field type", "POST", "/orgs/acme/actions/runners/generate-jitconfig", `{"name":1}`, 422, "Invalid request.\n\nFor 'properties/name', a number is not a string."},
		{"missing name", "POST", "/orgs/acme/actions/runners/generate-jitconfig", `{"runner_group_id":1,"labels":["a"]}`, 422, "Invalid request.\n\n\"name\" wasn't supplied."},
		{"no labels", "POST", "/orgs/acme/actions/runners/generate-jitconfig", `{"name":"a","runner_group_id":1,"labels":[]}`, 422, "Invalid request.\n\nFor 'properties/labels', the number of items must be between 1 and 100."},
		{"bad group", "POST", "/orgs/acme/actions/runners/generate-jitconfig", `{"name":"a","runner_group_id":77,"labels":["x"]}`, 422, msgValidationFailed},
		{"bad delivery cursor", "GET", "/orgs/acme/hooks/1/deliveries?cursor=x", "", 422, msgValidationFailed},
		{"unknown admin route", "GET", "/_sim/nothing", "", 404, msgNotFound},
		{"admin malformed JSON", "POST", "/_sim/orgs", "{", 400, msgParseJSON},
		{"runner API without credential", "POST", "/_runner/session", "", 401, msgRequiresAuth},
		{"runner API bad credential", "GET", "/_runner/jobs/next", "", 401, msgRequiresAuth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := w.do(t, tc.method, tc.path, auth, tc.body)
			if strings.HasPrefix(tc.path, "/_runner/") {
				resp = w.do(t, tc.method, tc.path, "", tc.body)
			}
			if resp.code != tc.wantCode {
				t.Fatalf("status = %d, want %d (body %s)", resp.code, tc.wantCode, resp.body)
			}
			if got := decodeError(t, resp.body).Message; got != tc.wantMessage {
				t.Errorf("message = %q, want %q", got, tc.wantMessage)
			}
		})
	}
}

func TestListRunnersPagination(t *testing.T) {
	w := newWorld(t, worldOpts{})
	for i := range 5 {
		must(w.sim.GenerateJITConfig(JITSpec{Scope: "acme", Name: "r" + strconv.Itoa(i), Labels: []string{"x"}}))
	}
	tests := []struct {
		query     string
		wantNames []string
		wantLink  string
	}{
		{"?per_page=2", []string{"r0", "r1"}, `<URL/orgs/acme/actions/runners?page=2&per_page=2>; rel="next", <URL/orgs/acme/actions/runners?page=3&per_page=2>; rel="last"`},
		{"?per_page=2&page=3", []string{"r4"}, `<URL/orgs/acme/actions/runners?page=2&per_page=2>; rel="prev", <URL/orgs/acme/actions/runners?page=1&per_page=2>; rel="first"`},
		{"?per_page=500", []string{"r0", "r1", "r2", "r3", "r4"}, ""},
		{"?per_page=abc&page=-1", []string{"r0", "r1", "r2", "r3", "r4"}, ""},
		{"?name=R3", []string{"r3"}, ""},
		{"?page=9", nil, `<URL/orgs/acme/actions/runners?page=1&per_page=30>; rel="prev", <URL/orgs/acme/actions/runners?page=1&per_page=30>; rel="first"`},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			resp := w.do(t, "GET", "/orgs/acme/actions/runners"+tc.query, "token "+testPAT, "")
			var got struct {
				TotalCount int `json:"total_count"`
				Runners    []struct{ Name string }
			}
			decodeJSON(t, resp.body, &got)
			var names []string
			for _, r := range got.Runners {
				names = append(names, r.Name)
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLink, strings.ReplaceAll(resp.header.Get("Link"), w.srv.URL, "URL")); diff != "" {
				t.Errorf("Link (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRateLimits(t *testing.T) {
	tests := []struct {
		name       string
		limits     RateLimits
		requests   int
		method     string
		wantLast   int
		wantHeader map[string]string
		wantMsg    string
	}{
		{
			name: "primary exhausted", limits: RateLimits{PAT: 3}, requests: 4, method: "GET", wantLast: 403,
			wantHeader: map[string]string{"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "3", "X-RateLimit-Resource": "core"},
			wantMsg:    "API rate limit exceeded for user ID",
		},
		{
			name: "primary exhausted as 429", limits: RateLimits{PAT: 2, ExhaustedStatus: 429}, requests: 3, method: "GET", wantLast: 429,
			wantHeader: map[string]string{"X-RateLimit-Remaining": "0"},
			wantMsg:    "API rate limit exceeded",
		},
		{
			name: "within limits", limits: RateLimits{PAT: 10}, requests: 4, method: "GET", wantLast: 200,
			wantHeader: map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "6", "X-RateLimit-Used": "4"},
		},
		{
			name: "secondary points per endpoint", limits: RateLimits{Secondary: SecondaryLimits{PointsPerMinute: 10}}, requests: 3, method: "POST", wantLast: 403,
			wantHeader: map[string]string{"Retry-After": "60", "X-RateLimit-Remaining": "4998"},
			wantMsg:    "You have exceeded a secondary rate limit",
		},
		{
			name: "off as on GHES", limits: RateLimits{Disabled: true, PAT: 1}, requests: 5, method: "GET", wantLast: 200,
			wantHeader: map[string]string{"X-RateLimit-Limit": "", "X-RateLimit-Remaining": ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, worldOpts{opts: Options{RateLimits: tc.limits}})
			path := "/orgs/acme/actions/runners"
			if tc.method == "POST" {
				path += "/registration-token"
			}
			var resp response
			for range tc.requests {
				resp = w.do(t, tc.method, path, "token "+testPAT, "")
			}
			if resp.code != tc.wantLast {
				t.Fatalf("last status = %d, want %d (%s)", resp.code, tc.wantLast, resp.body)
			}
			got := map[string]string{}
			for k := range tc.wantHeader {
				got[k] = resp.header.Get(k)
			}
			if diff := cmp.Diff(tc.wantHeader, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if tc.wantMsg != "" && !strings.HasPrefix(decodeError(t, resp.body).Message, tc.wantMsg) {
				t.Errorf("message = %q, want prefix %q", decodeError(t, resp.body).Message, tc.wantMsg)
			}
		})
	}
}

func TestRateLimitWindowsReset(t *testing.T) {
	w := newWorld(t, worldOpts{opts: Options{RateLimits: RateLimits{PAT: 2, Secondary: SecondaryLimits{PointsPerMinute: 5}}}})
	inst := "token " + testPAT // installation tokens would expire with the hour
	get := func() response { return w.do(t, "GET", "/orgs/acme/actions/runners", inst, "") }
	post := func() response { return w.do(t, "POST", "/orgs/acme/actions/runners/registration-token", inst, "") }
	steps := []struct {
		name     string
		advance  time.Duration
		call     func() response
		wantCode int
	}{
		{"first", 0, get, 200},
		{"second", 0, get, 200},
		{"primary exhausted", 0, get, 403},
		{"window over", time.Hour, post, 201},
		{"secondary exhausted", 0, post, 403},
		{"minute over", time.Minute, post, 201},
	}
	for _, st := range steps {
		w.clk.Step(st.advance)
		if got := st.call(); got.code != st.wantCode {
			t.Fatalf("%s: status %d, want %d (%s)", st.name, got.code, st.wantCode, got.body)
		}
	}
	// GET /rate_limit reports the budget and does not spend it.
	for range 2 {
		resp := w.do(t, "GET", "/rate_limit", inst, "")
		var rl struct{ Rate rateResource }
		decodeJSON(t, resp.body, &rl)
		if rl.Rate.Used != 2 || rl.Rate.Limit != 2 {
			t.Errorf("rate = %+v, want used 2 of 2", rl.Rate)
		}
	}
}

func TestSecondaryConcurrency(t *testing.T) {
	w := newWorld(t, worldOpts{opts: Options{RateLimits: RateLimits{Secondary: SecondaryLimits{Concurrent: 1}}}})
	// Hold one request in flight with injected latency, then send a second.
	w.sim.SetFaults(Faults{Endpoints: map[string]EndpointFaults{"GET /orgs/{org}/actions/runners": {Latency: Duration(300 * time.Millisecond)}}})
	done := make(chan response, 1)
	go func() { done <- w.do(t, "GET", "/repos/acme/app/actions/runners", "token "+testPAT, "") }()
	first := w.do(t, "GET", "/orgs/acme/actions/runners", "token "+testPAT, "")
	second := <-done
	codes := []int{first.code, second.code}
	if codes[0] != 200 || (codes[1] != 200 && codes[1] != 403) {
		t.Fatalf("codes = %v", codes)
	}
	// Deterministic part: while a request is in flight, the limiter refuses.
	release, e := w.sim.rl.admit(http.Header{}, rateSubject{key: "pat:x", kind: credPAT}, w.sim.routes.all[0], w.now(), true)
	if e != nil {
		t.Fatal(e.Message)
	}
	if _, e := w.sim.rl.admit(http.Header{}, rateSubject{key: "pat:x", kind: credPAT}, w.sim.routes.all[0], w.now(), true); e == nil || e.header["Retry-After"] == "" {
		t.Errorf("second concurrent request admitted, want a secondary limit with Retry-After")
	}
	release()
	if _, e := w.sim.rl.admit(http.Header{}, rateSubject{key: "pat:x", kind: credPAT}, w.sim.routes.all[0], w.now(), true); e != nil {
		t.Errorf("after release: %s", e.Message)
	}
}

func TestFaultInjectionIsReproducible(t *testing.T) {
	run := func() []int {
		w := newWorld(t, worldOpts{opts: Options{Faults: Faults{Seed: 42, Endpoints: map[string]EndpointFaults{
			"GET /orgs/{org}/actions/runners": {ErrorRate: 0.5, ErrorStatus: 503},
		}}}})
		var codes []int
		for range 20 {
			codes = append(codes, w.do(t, "GET", "/orgs/acme/actions/runners", "token "+testPAT, "").code)
		}
		counts := w.sim.CallCounts()["GET /orgs/{org}/actions/runners"]
		if counts.Total != 20 || counts.ByStatus[200]+counts.ByStatus[503] != 20 {
			t.Errorf("call counts = %+v", counts)
		}
		return codes
	}
	a, b := run(), run()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different faults (-first +second):\n%s", diff)
	}
	n503 := 0
	for _, c := range a {
		if c == 503 {
			n503++
		}
	}
	if n503 == 0 || n503 == len(a) {
		t.Errorf("%d of %d answers were 503, want some but not all", n503, len(a))
	}
}

// A GET answers with an ETag; asked again with it in If-None-Match, the unchanged answer
// is 304 with no body and does not count against the rate limit, as on GitHub.
func TestConditionalRequests(t *testing.T) {
	w := newWorld(t, worldOpts{opts: Options{RateLimits: RateLimits{PAT: 10}}})
	get := func(etag string) response {
		t.Helper()
		h := http.Header{}
		if etag != "" {
			h.Set("If-None-Match", etag)
		}
		return w.doWith(t, "GET", "/orgs/acme/actions/runners", "token "+testPAT, "", h)
	}
	first := get("")
	etag := first.header.Get("ETag")
	if first.code != 200 || !strings.HasPrefix(etag, `W/"`) {
		t.Fatalf("first GET: status %d, ETag %q; want 200 with a weak ETag", first.code, etag)
	}
	if got := first.header.Get("X-RateLimit-Remaining"); got != "9" {
		t.Errorf("after one GET, X-RateLimit-Remaining = %s, want 9", got)
	}
	same := get(etag)
	if same.code != http.StatusNotModified || len(same.body) != 0 {
		t.Fatalf("GET with its ETag: status %d, %d bytes; want 304 with no body", same.code, len(same.body))
	}
	if got := same.header.Get("X-RateLimit-Remaining"); got != "9" {
		t.Errorf("after a 304, X-RateLimit-Remaining = %s, want 9 (a 304 is not counted)", got)
	}
	if got := same.header.Get("ETag"); got != etag {
		t.Errorf("304's ETag = %q, want %q", got, etag)
	}
	must(w.sim.GenerateJITConfig(JITSpec{Scope: "acme", Name: "r0", Labels: []string{"x"}}))
	changed := get(etag)
	if changed.code != 200 || changed.header.Get("ETag") == etag {
		t.Fatalf("GET after a change: status %d, ETag %q; want 200 with a new ETag", changed.code, changed.header.Get("ETag"))
	}
	if got := changed.header.Get("X-RateLimit-Remaining"); got != "8" {
		t.Errorf("after a changed answer, X-RateLimit-Remaining = %s, want 8", got)
	}
	if got := w.sim.CallCounts()["GET /orgs/{org}/actions/runners"].ByStatus[http.StatusNotModified]; got != 1 {
		t.Errorf("call counts record %d answers 304, want 1", got)
	}
}
