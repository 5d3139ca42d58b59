package github

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jwt "github.com/golang-jwt/jwt/v4"
	clocktesting "k8s.io/utils/clock/testing"
)

// Test credentials; never real secrets.
const (
	testPAT      = "ghp_testtokenwithallscopes0000000000000"
	testPATNoOrg = "ghp_testtokenwithreposcopeonly000000000"
	testPATEnt   = "ghp_testtokenwithenterprisescope0000000"
)

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

// appKey is one RSA key shared by the tests (generating one costs ~100 ms).
func appKey(t testing.TB) (*rsa.PrivateKey, string, string) {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	pub, err := x509.MarshalPKIXPublicKey(&testKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return testKey,
		string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey)})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
}

// world is a simulator with an enterprise "ent", an org "acme" in it with repos
// "acme/app" and "acme/lib", an App installed on acme, and three PATs.
type world struct {
	sim   *Sim
	srv   *httptest.Server
	clk   *clocktesting.FakeClock
	app   App
	inst  Installation
	key   *rsa.PrivateKey
	keyPM string
}

type worldOpts struct {
	opts      Options
	realClock bool
}

func newWorld(t testing.TB, wo worldOpts) *world {
	t.Helper()
	w := &world{}
	if !wo.realClock {
		w.clk = clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
		wo.opts.Clock = w.clk
	}
	wo.opts.PATs = append(wo.opts.PATs,
		PAT{Token: testPAT, Login: "admin", Scopes: []string{"repo", "admin:org", "admin:org_hook"}},
		PAT{Token: testPATNoOrg, Login: "dev", Scopes: []string{"repo"}},
		PAT{Token: testPATEnt, Login: "ent-admin", Scopes: []string{"manage_runners:enterprise", "repo"}},
	)
	w.sim = New(wo.opts)
	t.Cleanup(w.sim.Close)
	w.srv = httptest.NewServer(w.sim)
	t.Cleanup(w.srv.Close)
	must(w.sim.CreateEnterprise(EnterpriseSpec{Slug: "ent"}))
	must(w.sim.CreateOrg(OrgSpec{Login: "acme", Enterprise: "ent"}))
	must(w.sim.CreateOrg(OrgSpec{Login: "other"}))
	must(w.sim.CreateRepo(RepoSpec{Owner: "acme", Name: "app"}))
	must(w.sim.CreateRepo(RepoSpec{Owner: "acme", Name: "lib"}))
	must(w.sim.CreateRepo(RepoSpec{Owner: "other", Name: "site"}))
	var pubPEM string
	w.key, w.keyPM, pubPEM = appKey(t)
	w.app = must(w.sim.CreateApp(AppSpec{Slug: "gantry", Owner: "acme", PublicKeyPEM: pubPEM}))
	w.inst = must(w.sim.CreateInstallation(InstallationSpec{AppID: w.app.ID, Org: "acme"}))
	return w
}

// must returns v, or panics (failing the test) on a setup error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("setup failed: %v", err))
	}
	return v
}

// appJWT signs an App JWT issued at iat and expiring at exp.
func (w *world) appJWT(t testing.TB, iat, exp time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iat": iat.Unix(), "exp": exp.Unix(), "iss": w.app.ID})
	s, err := tok.SignedString(w.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (w *world) now() time.Time {
	if w.clk != nil {
		return w.clk.Now()
	}
	return time.Now()
}

// installationToken gets an installation token through the REST API.
func (w *world) installationToken(t testing.TB) string {
	t.Helper()
	resp := w.do(t, http.MethodPost, "/app/installations/"+itoa(w.inst.ID)+"/access_tokens", "Bearer "+w.appJWT(t, w.now().Add(-time.Minute), w.now().Add(5*time.Minute)), "")
	if resp.code != http.StatusCreated {
		t.Fatalf("access token: %d %s", resp.code, resp.body)
	}
	var out struct{ Token string }
	if err := json.Unmarshal(resp.body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Token
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

// do sends one request; auth is the whole Authorization header ("" for none).
func (w *world) do(t testing.TB, method, path, auth, body string) response {
	t.Helper()
	return w.doWith(t, method, path, auth, body, nil)
}

// doWith is do with extra request headers.
func (w *world) doWith(t testing.TB, method, path, auth, body string, header http.Header) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, w.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := w.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// errorBody is GitHub's error answer.
type errorBody struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
	Status           string `json:"status"`
}

func decodeError(t testing.TB, b []byte) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", b, err)
	}
	return e
}

// hookRecorder is a webhook receiver that keeps what it got.
type hookRecorder struct {
	mu     sync.Mutex
	got    []receivedHook
	status int
	srv    *httptest.Server
}

type receivedHook struct {
	header http.Header
	body   []byte
}

func newHookRecorder(t testing.TB) *hookRecorder {
	h := &hookRecorder{status: http.StatusOK}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, receivedHook{header: r.Header.Clone(), body: bytes.Clone(b)})
		code := h.status
		h.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookRecorder) received() []receivedHook {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]receivedHook(nil), h.got...)
}

// signJWT signs an App JWT for appID valid from now-30s for 5 minutes.
func signJWT(key *rsa.PrivateKey, appID int64, now time.Time) (string, error) {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iat": now.Add(-30 * time.Second).Unix(), "exp": now.Add(5 * time.Minute).Unix(), "iss": appID,
	})
	return tok.SignedString(key)
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func decodeJSON(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
}

var (
	otherKeyOnce sync.Once
	otherKey     *rsa.PrivateKey
)

// mustKey is an RSA key that belongs to no App.
func mustKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	otherKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		otherKey = k
	})
	return otherKey
}
