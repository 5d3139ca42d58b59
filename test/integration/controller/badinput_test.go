package controller

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// A pool's configuration problems show as Degraded and not Ready, with a message that
// says what is wrong and what to fix — and never the secret values.
func TestBadPoolConfigurationSaysWhatToFix(t *testing.T) {
	w := newWorld(t)
	const leaked = "-----BEGIN RSA PRIVATE KEY-----not-a-key"
	w.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "malformed"},
		Data: map[string][]byte{
			"github_app_id":              []byte("twelve"),
			"github_app_installation_id": []byte("42"),
			"github_app_private_key":     []byte(leaked),
		},
	})
	w.create(w.pool("malformed").Credentials("malformed").MinIdle(1).Obj())
	w.create(w.pool("apihost").URL("https://api.github.com/acme").MinIdle(1).Obj())

	tests := []struct {
		pool, reason string
		wantInMsg    []string
	}{
		{"malformed", "InvalidCredentials", []string{"malformed", "github_app_id"}},
		{"apihost", "InvalidURL", []string{"github.url must be"}},
	}
	for _, tt := range tests {
		w.eventually(tt.pool+" Degraded with "+tt.reason, func() (bool, error) {
			c := meta.FindStatusCondition(w.getPool(tt.pool).Status.Conditions, v1alpha1.ConditionDegraded)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tt.reason {
				return false, nil
			}
			for _, want := range tt.wantInMsg {
				if !strings.Contains(c.Message, want) {
					t.Errorf("%s: Degraded message %q does not say %q", tt.pool, c.Message, want)
				}
			}
			if strings.Contains(c.Message, "not-a-key") {
				t.Errorf("%s: Degraded message leaks the private key", tt.pool)
			}
			return true, nil
		})
		if n := len(w.runners(tt.pool)); n != 0 {
			t.Errorf("%s: a misconfigured pool created %d runners", tt.pool, n)
		}
	}
}

// Hostile or broken deliveries get the documented answers through the controller's own
// listener, and none of them becomes demand.
func TestWebhookEndpointRefusesBadDeliveries(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("hooks").Obj())
	// The jobs are in a repository the simulator does not have: resync, which runs as
	// soon as the manager leads, cannot list it and leaves the Tracker's count alone —
	// for a repository it can list, it would drop a job GitHub does not have.
	body := []byte(`{"action":"queued","workflow_job":{"id":77,"labels":["linux"]},"repository":{"name":"ghost","html_url":"` +
		w.simURL + `/acme/ghost","owner":{"login":"acme"}}}`)
	tests := []struct {
		name     string
		method   string
		event    string
		body     []byte
		sig      string
		wantCode int
	}{
		{"bad signature", http.MethodPost, "workflow_job", body, demand.Sign([]byte("wrong"), body), http.StatusUnauthorized},
		{"no signature", http.MethodPost, "workflow_job", body, "", http.StatusUnauthorized},
		{"malformed body", http.MethodPost, "workflow_job", []byte("{"), demand.Sign([]byte(webhookSecret), []byte("{")), http.StatusBadRequest},
		{"unused event", http.MethodPost, "issues", []byte(`{}`), demand.Sign([]byte(webhookSecret), []byte(`{}`)), http.StatusOK},
		{"GET", http.MethodGet, "workflow_job", nil, "", http.StatusMethodNotAllowed},
		{"oversized", http.MethodPost, "workflow_job", bytes.Repeat([]byte("x"), demand.MaxWebhookBody+1), "sha256=00", http.StatusRequestEntityTooLarge},
	}
	for i, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, tt.method, w.hookURL, bytes.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-GitHub-Event", tt.event)
		req.Header.Set("X-GitHub-Delivery", "bad-"+strconv.Itoa(i))
		if tt.sig != "" {
			req.Header.Set("X-Hub-Signature-256", tt.sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != tt.wantCode {
			t.Errorf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.wantCode)
		}
	}
	// Barrier: one valid delivery after the bad ones. Deliveries reach the Tracker in
	// order, so once it counts, anything wrongly accepted before it would count too.
	good := []byte(`{"action":"queued","workflow_job":{"id":78,"labels":["linux"]},"repository":{"name":"ghost","html_url":"` +
		w.simURL + `/acme/ghost","owner":{"login":"acme"}}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.hookURL, bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-GitHub-Event", "workflow_job")
	req.Header.Set("X-GitHub-Delivery", "good")
	req.Header.Set("X-Hub-Signature-256", demand.Sign([]byte(webhookSecret), good))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("valid delivery: status %d, want 202", resp.StatusCode)
	}
	w.eventually("the valid delivery to count", func() (bool, error) {
		return w.gantry.Tracker.Demand(keyOf(w.ns, "hooks")).Queued > 0, nil
	})
	if q := w.gantry.Tracker.Demand(keyOf(w.ns, "hooks")).Queued; q != 1 {
		t.Errorf("queued jobs = %d, want only the valid delivery's", q)
	}
}

// A pool with GitHub App credentials registers runners with an installation token
// obtained from a JWT the simulator verifies.
func TestGitHubAppCredentialsRegisterRunners(t *testing.T) {
	w := newWorld(t)
	app, err := w.sim.CreateApp(simgithub.AppSpec{Slug: "gantry-test", Owner: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := w.sim.CreateInstallation(simgithub.InstallationSpec{AppID: app.ID, Org: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	w.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "github-app"},
		Data: map[string][]byte{
			"github_app_id":              []byte(strconv.FormatInt(app.ID, 10)),
			"github_app_installation_id": []byte(strconv.FormatInt(inst.ID, 10)),
			"github_app_private_key":     []byte(app.PrivateKeyPEM),
		},
	})
	w.create(w.pool("app").Credentials("github-app").MinIdle(2).Obj())
	w.eventually("two runners registered with App credentials", func() (bool, error) {
		rs := w.runners("app")
		if len(rs) != 2 {
			return false, nil
		}
		for _, r := range rs {
			if !w.hasPod(r.Name) {
				return false, nil
			}
		}
		return len(w.sim.Runners()) == 2, nil
	})
	tokens := w.sim.CallCounts()["POST /app/installations/{installation_id}/access_tokens"].Total
	if tokens != 1 {
		t.Errorf("installation tokens issued = %d, want 1 (cached for both runners)", tokens)
	}
}

// The very first delivery of a repository is lost, so no listing would poll it; with
// GitHub App credentials resync finds the failed delivery in the App's delivery log and
// asks GitHub to send it again.
func TestFailedAppDeliveriesAreRedelivered(t *testing.T) {
	w := newWorld(t)
	if _, err := w.sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	app, err := w.sim.CreateApp(simgithub.AppSpec{Slug: "gantry-redeliver", Owner: "acme", WebhookURL: w.hookURL, WebhookSecret: webhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := w.sim.CreateInstallation(simgithub.InstallationSpec{AppID: app.ID, Org: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	w.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "github-app"},
		Data: map[string][]byte{
			"github_app_id":              []byte(strconv.FormatInt(app.ID, 10)),
			"github_app_installation_id": []byte(strconv.FormatInt(inst.ID, 10)),
			"github_app_private_key":     []byte(app.PrivateKeyPEM),
		},
	})
	w.sim.SetFaults(simgithub.Faults{Seed: 1, Webhooks: simgithub.WebhookFaults{DropRate: 1}})
	w.create(w.pool("app-org").Credentials("github-app").Obj())
	w.eventually("the pool Ready", func() (bool, error) {
		return meta.IsStatusConditionTrue(w.getPool("app-org").Status.Conditions, v1alpha1.ConditionReady), nil
	})
	if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/web", Labels: []string{"linux"}, Duration: simgithub.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// The job goes to the org hook and to the App's hook, each by its own sender
	// worker: the faults stay on until every one of its deliveries has failed, or the
	// App's delivery could slip through once the org hook's has failed.
	w.eventually("every queued delivery recorded as failed", func() (bool, error) {
		n := 0
		for _, d := range w.sim.Deliveries() {
			if d.Action != "queued" {
				continue
			}
			if !d.Done {
				return false, nil
			}
			if d.StatusCode/100 == 2 {
				return false, fmt.Errorf("delivery %d succeeded with the drop fault on", d.ID)
			}
			n++
		}
		return n > 0, nil
	})
	w.sim.SetFaults(simgithub.Faults{})
	// The simulator records a delivery's status once the controller has answered it,
	// which may be after the runner the delivery asked for exists: wait for both.
	// Redelivery waits on resync rounds, which a loaded machine slows: allow two minutes.
	w.eventuallyWithin(2*time.Minute, "a successful redelivery and a runner for the redelivered job", func() (bool, error) {
		redelivered := false
		for _, d := range w.sim.Deliveries() {
			if d.Redelivery && d.Done && d.StatusCode/100 == 2 {
				redelivered = true
			}
		}
		runners := len(w.runners("app-org"))
		if !redelivered || runners != 1 {
			return false, fmt.Errorf("successful redelivery: %v; runners: %d", redelivered, runners)
		}
		return true, nil
	})
}
