// Package stack starts, for one integration test, what Gantry runs against: the GitHub
// simulator over HTTP with organization acme and repository acme/api, the credentials
// and webhook Secrets in the test's namespace, a Gantry manager watching that namespace,
// and acme's webhook pointing at the manager once it takes deliveries.
package stack

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/selfsigned"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testenv"
)

// Options are what the test packages choose differently.
type Options struct {
	// Token is the PAT the simulator accepts and the credentials Secret holds.
	Token string
	// CredentialsSecret is the name of the Secret holding github_token.
	CredentialsSecret string
	// WebhookSecret signs acme's deliveries.
	WebhookSecret string
	// RateLimits are the simulator's.
	RateLimits simgithub.RateLimits
	// TLS, if set, serves the simulator over HTTPS with this CA's server certificate
	// (SimURL is then https://) and has the manager trust the CA through its CA bundle,
	// with http:// GitHub URLs refused.
	TLS *CA
	// ActionsSessionTimeout and ActionsPollHold are the simulated Actions service's
	// (simgithub.Options); zero keeps its defaults.
	ActionsSessionTimeout, ActionsPollHold time.Duration
	// Clock, if set, is the manager's (manager.Options.Clock).
	Clock clock.Clock
	// ExtraNamespaces are watched besides the test's namespace (a Kubernetes-mode
	// pool's containerMode.namespace).
	ExtraNamespaces []string
	// RunnerNetworkPolicy, if set, is the manager's (manager.Options.RunnerNetworkPolicy).
	RunnerNetworkPolicy *networkingv1.NetworkPolicy
	// RunnerLostTimeout is the simulator's job lease (simgithub.Options): a started job
	// its runner stops renewing fails this long after. Zero: never.
	RunnerLostTimeout time.Duration
	// UsageEvents is the manager's (manager.Options.UsageEvents).
	UsageEvents bool
	// EvictionWebhook serves the manager's eviction webhook with a certificate of a CA
	// of the test's own, and registers it for the evictions of the test's namespace (a
	// ValidatingWebhookConfiguration removed when the test ends), as the chart does.
	EvictionWebhook bool
}

// Stack is one test's simulator and manager.
type Stack struct {
	Sim     *simgithub.Sim
	SimURL  string
	Gantry  *manager.Gantry
	HookURL string
}

// Start starts the stack in namespace ns and stops it when the test ends.
func Start(t *testing.T, env *testenv.Env, ns string, o Options) *Stack {
	t.Helper()
	s := &Stack{}
	srv := httptest.NewUnstartedServer(nil)
	s.SimURL = "http://" + srv.Listener.Addr().String()
	if o.TLS != nil {
		s.SimURL = "https://" + srv.Listener.Addr().String()
		srv.TLS = o.TLS.ServerConfig(t)
	}
	s.Sim = simgithub.New(simgithub.Options{
		URL:                   s.SimURL,
		PATs:                  []simgithub.PAT{{Token: o.Token, Login: "ci-bot", Scopes: []string{"repo", "admin:org", "manage_runners:org", "admin:org_hook"}}},
		RateLimits:            o.RateLimits,
		ActionsSessionTimeout: o.ActionsSessionTimeout,
		ActionsPollHold:       o.ActionsPollHold,
		RunnerLostTimeout:     o.RunnerLostTimeout,
	})
	srv.Config.Handler = s.Sim
	if o.TLS != nil {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() { srv.Close(); s.Sim.Close() })
	if _, err := s.Sim.CreateOrg(simgithub.OrgSpec{Login: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "api"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, secret := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.CredentialsSecret},
			Data: map[string][]byte{"github_token": []byte(o.Token)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gantry-webhook"},
			Data: map[string][]byte{manager.WebhookSecretKey: []byte(o.WebhookSecret)}},
	} {
		if err := env.Client.Create(ctx, secret); err != nil {
			t.Fatalf("creating Secret %s: %v", secret.Name, err)
		}
	}

	mopts := ManagerOptions(ns)
	mopts.Namespaces = append(mopts.Namespaces, o.ExtraNamespaces...)
	if o.Clock != nil {
		mopts.Clock = o.Clock
	}
	mopts.RunnerNetworkPolicy = o.RunnerNetworkPolicy
	mopts.UsageEvents = o.UsageEvents
	if o.TLS != nil {
		mopts.GitHubCABundle, mopts.GitHubAllowHTTP = o.TLS.PEM, false
	}
	var evictionCA []byte
	if o.EvictionWebhook {
		cert, err := selfsigned.New([]string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := cert.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		mopts.EvictionWebhookAddr, mopts.EvictionWebhookCertDir, evictionCA = "127.0.0.1:0", dir, cert.CAPEM
	}
	g, err := manager.New(env.Config, mopts)
	if err != nil {
		t.Fatal(err)
	}
	s.Gantry = g
	if o.EvictionWebhook {
		registerEvictionWebhook(ctx, t, env, ns, "https://"+g.EvictionListener.Addr().String()+runner.EvictionWebhookPath, evictionCA)
	}
	mctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Manager.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with an error: %v\n%s", err, GantryGoroutines())
		}
	})
	s.HookURL = "http://" + g.WebhookListener.Addr().String() + "/webhook"

	// A replica answers 503 until it leads; GitHub would record such a delivery as
	// failed. Wait until this one takes deliveries (a GET is then refused as 405).
	if err := waitTakingDeliveries(ctx, s.HookURL); err != nil {
		t.Fatalf("the manager does not take webhook deliveries: %v", err)
	}
	if _, err := s.Sim.CreateHook(simgithub.HookSpec{Org: "acme", URL: s.HookURL, Secret: o.WebhookSecret, Events: []string{"workflow_job"}}); err != nil {
		t.Fatal(err)
	}
	return s
}

func waitTakingDeliveries(ctx context.Context, hookURL string) error {
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hookURL, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return nil
			}
			last = nil
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return last
			}
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ManagerOptions are the options of the manager Start runs, watching namespace ns: for
// a test that starts and stops managers of its own.
func ManagerOptions(ns string) manager.Options {
	return manager.Options{
		MetricsAddr:           "0",
		ProbeAddr:             "0",
		WebhookAddr:           "127.0.0.1:0",
		WebhookSecret:         types.NamespacedName{Namespace: ns, Name: "gantry-webhook"},
		Namespaces:            []string{ns},
		Concurrency:           4,
		GitHubTimeout:         10 * time.Second,
		FailedRunnerRetention: time.Hour,
		ResyncInterval:        time.Second,
		SeveralPerProcess:     true,
		GitHubAllowHTTP:       true,
	}
}

// GantryGoroutines returns the stacks of the goroutines running Gantry's code or
// controller-runtime's (its manager, its controllers' workers and their work queues):
// what a manager that does not stop is still waiting for.
func GantryGoroutines() string {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	var keep []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		for _, pkg := range []string{"gantry/internal/controller", "gantry/internal/manager", "gantry/internal/demand",
			"gantry/internal/github", "gantry/internal/warm", "controller-runtime/pkg/manager", "controller-runtime/pkg/internal/controller",
			"controller-runtime/pkg/controller/priorityqueue"} {
			if strings.Contains(g, pkg) {
				keep = append(keep, g)
				break
			}
		}
	}
	return "goroutines still running:\n" + strings.Join(keep, "\n\n")
}

// registerEvictionWebhook sends the evictions of namespace ns to the eviction webhook at
// url, until the test ends.
func registerEvictionWebhook(ctx context.Context, t *testing.T, env *testenv.Env, ns, url string, ca []byte) {
	t.Helper()
	vwc := runner.EvictionWebhookConfiguration("gantry-eviction-"+ns,
		admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
		&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}, 5)
	if err := env.Client.Create(ctx, vwc); err != nil {
		t.Fatalf("registering the eviction webhook: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := env.Client.Delete(ctx, vwc); err != nil {
			t.Errorf("removing the eviction webhook's configuration: %v", err)
		}
	})
}
