package scaleset

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
)

// sessionCloser closes a message session by its id: the one a dead leader left open,
// recorded in the pool's status. github.com/actions/scaleset closes only the sessions
// its own client opened, so this speaks the protocol itself: the scope's registration
// token (GitHub REST, cached by Gantry's client), POST {api}/actions/runner-registration
// for the Actions service's URL and an admin token, then DELETE
// _apis/runtime/runnerscalesets/{id}/sessions/{sessionId}. Three calls, on a takeover only.
type sessionCloser struct {
	resolver *controller.GitHubResolver
	pool     *v1alpha1.RunnerPool
	http     *http.Client
}

func newHTTPClient(rootCAs *x509.CertPool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if rootCAs != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

func (c *sessionCloser) close(ctx context.Context, scaleSetID int, sessionID string) error {
	if c == nil || c.resolver == nil {
		return fmt.Errorf("closing session %s: no GitHub client", sessionID)
	}
	gh, sc, err := c.resolver.For(ctx, c.pool)
	if err != nil {
		return err
	}
	tok, err := gh.CreateRegistrationToken(ctx, sc)
	if err != nil {
		return fmt.Errorf("creating a registration token: %w", err)
	}
	body, _ := json.Marshal(map[string]string{"url": strings.TrimSuffix(c.pool.Spec.GitHub.URL, "/"), "runner_event": "register"})
	var admin struct {
		URL   string `json:"url"`
		Token string `json:"token"`
	}
	if err := c.do(ctx, http.MethodPost, sc.APIBaseURL()+"actions/runner-registration", "RemoteAuth "+tok.Token, body, http.StatusOK, &admin); err != nil {
		return fmt.Errorf("connecting to the Actions service: %w", err)
	}
	if admin.URL == "" || admin.Token == "" {
		return fmt.Errorf("connecting to the Actions service: the answer has no URL or token")
	}
	u := strings.TrimSuffix(admin.URL, "/") + fmt.Sprintf("/_apis/runtime/runnerscalesets/%d/sessions/%s?api-version=6.0-preview",
		scaleSetID, url.PathEscape(sessionID))
	err = c.do(ctx, http.MethodDelete, u, "Bearer "+admin.Token, nil, http.StatusNoContent, nil)
	if isNotFound(err) {
		return nil // gone already: closed, expired or dropped
	}
	return err
}

// do sends one request and decodes a JSON answer of status want into out. An error
// names the status as the scaleset client does (status="404 Not Found"), never a token.
func (c *sessionCloser) do(ctx context.Context, method, u, auth string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status=%q", method, req.URL.Path, resp.Status)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
