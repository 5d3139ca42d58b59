package github

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-cmp/cmp"
)

const (
	testAppID          = 1234
	testInstallationID = 77
)

// testKey is generated once: RSA key generation is slow under -race.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func pemKey(k *rsa.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}

// verifyAppJWT checks an App JWT the way GitHub does: RS256 with the App's public key,
// issuer = App ID, issued in the past, expiring within 10 minutes.
func verifyAppJWT(r *http.Request, pub *rsa.PublicKey) error {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return fmt.Errorf("no Bearer JWT")
	}
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		if tok.Method.Alg() != "RS256" {
			return nil, fmt.Errorf("alg %s, want RS256", tok.Method.Alg())
		}
		return pub, nil
	})
	if err != nil {
		return err
	}
	if claims.Issuer != strconv.Itoa(testAppID) {
		return fmt.Errorf("iss %q, want %d", claims.Issuer, testAppID)
	}
	if claims.IssuedAt == nil || claims.ExpiresAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute || claims.IssuedAt.After(time.Now()) {
		return fmt.Errorf("iat/exp out of bounds")
	}
	return nil
}

// appServer adds GitHub's App endpoints to a fake: the installation token exchange
// (the first token issued is already within a minute of expiry, later ones last an
// hour), and the App's hook delivery log.
func appServer(t *testing.T, f *fakeGitHub) *atomic.Int32 {
	var issued atomic.Int32
	pub := &testKey().PublicKey
	f.handle("POST /app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
		if err := verifyAppJWT(r, pub); err != nil {
			ghError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
			return
		}
		if r.PathValue("id") != strconv.Itoa(testInstallationID) {
			ghError(w, http.StatusNotFound, "Not Found")
			return
		}
		n := issued.Add(1)
		ttl := time.Hour
		if n == 1 {
			ttl = 30 * time.Second
		}
		writeJSON(w, http.StatusCreated, map[string]any{
			"token":       fmt.Sprintf("ghs_installation%d", n),
			"expires_at":  time.Now().Add(ttl).UTC().Format(time.RFC3339),
			"permissions": map[string]string{"organization_self_hosted_runners": "write"},
		})
	})
	f.handle("GET /orgs/acme/actions/runners/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "token ghs_installation") {
			ghError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		writeJSON(w, http.StatusOK, runnerJSON(1, "r1", "online", false))
	})
	f.handle("GET /app/hook/deliveries", func(w http.ResponseWriter, r *http.Request) {
		if err := verifyAppJWT(r, pub); err != nil {
			ghError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
			return
		}
		if r.URL.Query().Get("cursor") == "" {
			w.Header().Set("Link", fmt.Sprintf(`<http://%s/api/v3/app/hook/deliveries?per_page=100&cursor=v1_2>; rel="next"`, r.Host))
			writeJSON(w, http.StatusOK, []map[string]any{
				{"id": 3, "guid": "g3", "delivered_at": "2026-05-01T11:00:00Z", "redelivery": false, "duration": 0.2, "status": "OK", "status_code": 200, "event": "workflow_job", "action": "queued", "installation_id": testInstallationID, "repository_id": 9},
			})
			return
		}
		writeJSON(w, http.StatusOK, []map[string]any{
			{"id": 2, "guid": "g2", "delivered_at": "2026-05-01T10:00:00Z", "redelivery": false, "duration": 10.0, "status": "Timed out", "status_code": 0, "event": "workflow_job", "action": "completed", "installation_id": testInstallationID, "repository_id": 9},
		})
	})
	f.handle("POST /app/hook/deliveries/{id}/attempts", func(w http.ResponseWriter, r *http.Request) {
		if err := verifyAppJWT(r, pub); err != nil {
			ghError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
			return
		}
		if r.PathValue("id") != "2" {
			ghError(w, http.StatusNotFound, "Not Found")
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]any{})
	})
	return &issued
}

func appCredentials(t *testing.T, key *rsa.PrivateKey, installation int64) Credentials {
	t.Helper()
	creds, err := ParseCredentials(map[string][]byte{
		KeyAppID:             []byte(strconv.Itoa(testAppID)),
		KeyAppInstallationID: []byte(strconv.FormatInt(installation, 10) + "\n"),
		KeyAppPrivateKey:     pemKey(key),
	})
	if err != nil {
		t.Fatalf("ParseCredentials: %v", err)
	}
	return creds
}

func TestAppInstallationTokenIsReusedAndRefreshedNearExpiry(t *testing.T) {
	f := newFakeGitHub(t)
	issued := appServer(t, f)
	c, err := NewClient(appCredentials(t, testKey(), testInstallationID), Options{Name: "ns/app", Clock: newClock()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := c.GetRunner(context.Background(), f.scope("acme"), 1); err != nil {
			t.Fatalf("call %d: GetRunner() error = %v", i, err)
		}
	}
	// Token 1 was issued 30s before expiry, so the second call refreshed it; token 2
	// lasts an hour and served the rest.
	if got := issued.Load(); got != 2 {
		t.Errorf("installation tokens issued = %d, want 2", got)
	}
	var apiAuths []string
	for i, call := range f.gotCalls() {
		if strings.HasPrefix(call, "GET /orgs/acme/actions/runners/") {
			apiAuths = append(apiAuths, f.gotAuths()[i])
		}
	}
	want := []string{"token ghs_installation1", "token ghs_installation2", "token ghs_installation2", "token ghs_installation2"}
	if diff := cmp.Diff(want, apiAuths); diff != "" {
		t.Errorf("Authorization of API calls (-want +got):\n%s", diff)
	}
}

func TestAppCredentialFailures(t *testing.T) {
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		key          *rsa.PrivateKey
		installation int64
		scope        string
		wantCalls    int
	}{
		{"wrong private key", otherKey, testInstallationID, "acme", 1},
		{"unknown installation", testKey(), 999, "acme", 1},
		{"enterprise scope", testKey(), testInstallationID, "enterprises/big", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			appServer(t, f)
			c, err := NewClient(appCredentials(t, tt.key, tt.installation), Options{Name: "ns/app-fail", Clock: newClock()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.GetRunner(context.Background(), f.scope(tt.scope), 1)
			if !IsUnauthorized(err) {
				t.Fatalf("GetRunner() error = %v, want Unauthorized", err)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error leaks key material: %v", err)
			}
			if n := len(f.gotCalls()); n != tt.wantCalls {
				t.Errorf("GitHub got %d calls, want %d", n, tt.wantCalls)
			}
		})
	}
}

func TestAppHookDeliveries(t *testing.T) {
	f := newFakeGitHub(t)
	appServer(t, f)
	c, err := NewClient(appCredentials(t, testKey(), testInstallationID), Options{Name: "ns/app-hooks", Clock: newClock()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	scope := f.scope("acme")

	var got []HookDelivery
	cursor := ""
	for range 5 {
		page, err := c.ListHookDeliveries(ctx, scope, cursor)
		if err != nil {
			t.Fatalf("ListHookDeliveries(%q) error = %v", cursor, err)
		}
		got = append(got, page.Deliveries...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	want := []HookDelivery{
		{ID: 3, GUID: "g3", DeliveredAt: at("2026-05-01T11:00:00Z"), Status: "OK", StatusCode: 200, Event: "workflow_job", Action: "queued"},
		{ID: 2, GUID: "g2", DeliveredAt: at("2026-05-01T10:00:00Z"), Status: "Timed out", Event: "workflow_job", Action: "completed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
	if err := c.RedeliverHookDelivery(ctx, scope, 2); err != nil {
		t.Errorf("RedeliverHookDelivery(2) error = %v", err)
	}
	if err := c.RedeliverHookDelivery(ctx, scope, 5); !IsNotFound(err) {
		t.Errorf("RedeliverHookDelivery(5) error = %v, want NotFound", err)
	}
	wantCalls := []string{
		"GET /app/hook/deliveries?per_page=100",
		"GET /app/hook/deliveries?cursor=v1_2&per_page=100",
		"POST /app/hook/deliveries/2/attempts",
		"POST /app/hook/deliveries/5/attempts",
	}
	if diff := cmp.Diff(wantCalls, f.gotCalls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
