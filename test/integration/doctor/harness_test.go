// Package doctor tests `gantry doctor` against a real kube-apiserver, a Gantry manager
// and the GitHub simulator over HTTP (and HTTPS from a private CA): one test per problem
// doctor names, each asserting the findings and the exit status, and a healthy case.
package doctor

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/doctor"
	"github.com/gantry-dev/gantry/internal/github"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.UseDevMode(false)))
	testenv.Main(m, &env)
}

const (
	testToken     = "ghp_simulatedtokenfordoctortests00000000"
	webhookSecret = "gantry-doctor-test-webhook-secret"
)

// world is one test's namespace, simulator (organization acme, repository acme/api)
// and Gantry manager.
type world struct {
	t  *testing.T
	ns string
	st *stack.Stack
	// appHook is the App's webhook, once app made one.
	appHook int64
}

func newWorld(t *testing.T, o stack.Options) *world {
	t.Helper()
	o.Token, o.CredentialsSecret, o.WebhookSecret = testToken, "github-creds", webhookSecret
	o.RateLimits = simgithub.RateLimits{Disabled: true}
	w := &world{t: t, ns: env.Namespace(t)}
	w.st = stack.Start(t, env, w.ns, o)
	return w
}

func (w *world) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	w.t.Cleanup(cancel)
	return ctx
}

// pool is a valid pool of this world: organization acme, labels linux.
func (w *world) pool(name string) *testutil.RunnerPoolBuilder {
	return testutil.RunnerPool(w.ns, name).URL(w.st.SimURL + "/acme").Credentials("github-creds").Labels("linux")
}

// apply creates the pool and waits until the controller has reconciled it, so that
// doctor sees the controller's verdict, not a race with it.
func (w *world) apply(p *v1alpha1.RunnerPool) {
	w.t.Helper()
	if err := env.Client.Create(w.ctx(), p); err != nil {
		w.t.Fatalf("creating pool %s: %v", p.Name, err)
	}
	w.waitReconciled(p.Namespace, p.Name)
}

func (w *world) waitReconciled(ns, name string) {
	w.t.Helper()
	eventually(w.t, "pool "+ns+"/"+name+" reconciled", func() bool {
		var p v1alpha1.RunnerPool
		if err := env.Client.Get(w.ctx(), types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
			return false
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.ObservedGeneration == p.Generation
	})
}

func (w *world) secret(name string, data map[string]string) {
	w.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, StringData: data}
	if err := env.Client.Create(w.ctx(), s); err != nil {
		w.t.Fatalf("creating Secret %s: %v", name, err)
	}
}

// app creates a GitHub App installed on acme whose webhook goes to hookURL signed with
// secret, and a Secret "github-app" holding its credentials.
func (w *world) app(hookURL, secret string) {
	w.t.Helper()
	a, err := w.st.Sim.CreateApp(simgithub.AppSpec{Slug: "gantry-" + w.ns, Owner: "acme", WebhookURL: hookURL, WebhookSecret: secret})
	if err != nil {
		w.t.Fatal(err)
	}
	w.appHook = a.HookID
	inst, err := w.st.Sim.CreateInstallation(simgithub.InstallationSpec{AppID: a.ID, Org: "acme"})
	if err != nil {
		w.t.Fatal(err)
	}
	w.secret("github-app", map[string]string{
		github.KeyAppID:             itoa(a.ID),
		github.KeyAppInstallationID: itoa(inst.ID),
		github.KeyAppPrivateKey:     a.PrivateKeyPEM,
	})
}

// queue queues a job and waits until the App's delivery of a queued job has an answer
// (the simulator does not record which job a delivery carries).
func (w *world) queue(repo string, labels ...string) {
	w.t.Helper()
	j, err := w.st.Sim.QueueJob(simgithub.JobSpec{Repo: repo, Labels: labels})
	if err != nil {
		w.t.Fatal(err)
	}
	deliveries := func() []simgithub.Delivery { return w.st.Sim.Deliveries() }
	eventually(w.t, "the App's delivery of the queued job answered", func() bool {
		for _, d := range deliveries() {
			if d.Action == "queued" && d.Done && d.HookID == w.appHook {
				return true
			}
		}
		return false
	}, func() { w.t.Logf("deliveries: %+v (job %d, App hook %d)", deliveries(), j.ID, w.appHook) })
}

// doctor runs doctor on this world's namespace, as `gantry doctor -n NS` would.
func (w *world) doctor(job *doctor.JobQuery, caBundle []byte) *doctor.Report {
	w.t.Helper()
	return w.doctorAs(env.Client, job, caBundle)
}

// doctorAs runs doctor with a Kubernetes client of someone's: their rights.
func (w *world) doctorAs(kube client.Client, job *doctor.JobQuery, caBundle []byte) *doctor.Report {
	w.t.Helper()
	opts := github.Options{Timeout: 10 * time.Second}
	if caBundle != nil {
		tr, err := github.TransportWithCABundle(caBundle)
		if err != nil {
			w.t.Fatal(err)
		}
		opts.Transport = tr
	}
	rep, err := doctor.Run(w.ctx(), doctor.Options{
		Kube:                kube,
		Namespace:           w.ns,
		ControllerNamespace: w.ns,
		Job:                 job,
		GitHub: &controller.GitHubResolver{Reader: kube, Clock: clock.RealClock{}, AllowHTTP: true,
			Provider: github.NewProvider(github.ProviderOptions{Options: opts})},
	})
	if err != nil {
		w.t.Fatalf("doctor: %v", err)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("doctor's report:\n%s", text.String())
	return rep
}

// expect checks the report's findings and exit status.
func expect(t *testing.T, rep *doctor.Report, want ...doctor.Finding) {
	t.Helper()
	if diff := cmp.Diff(want, rep.Findings()); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	wantExit := 0
	if len(want) > 0 {
		wantExit = 1
	}
	if got := rep.ExitCode(); got != wantExit {
		t.Errorf("exit status = %d, want %d", got, wantExit)
	}
}

// check returns a pool's check by name.
func check(t *testing.T, rep *doctor.Report, pool, name string) doctor.Check {
	t.Helper()
	for _, p := range rep.Pools {
		if strings.HasSuffix(p.Pool, "/"+pool) {
			for _, c := range p.Checks {
				if c.Name == name {
					return c
				}
			}
		}
	}
	t.Fatalf("no check %s of pool %s in the report", name, pool)
	return doctor.Check{}
}

// eventually polls cond until it holds or 90 s pass; then it runs dump and fails.
func eventually(t *testing.T, what string, cond func() bool, dump ...func()) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range dump {
		d()
	}
	t.Fatalf("timed out waiting for %s", what)
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}
