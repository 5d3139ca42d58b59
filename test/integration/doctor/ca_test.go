package doctor

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/doctor"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// A GitHub Enterprise Server whose certificate a private CA signed: the simulator serves
// HTTPS with such a certificate. The controller, given the CA bundle (and not allowed
// http://), registers a runner over TLS; doctor with the bundle finds nothing wrong, and
// without it says the certificate is not trusted and how to fix that.
func TestPrivateCA(t *testing.T) {
	ca := stack.NewCA(t)
	w := newWorld(t, stack.Options{TLS: ca})
	if !strings.HasPrefix(w.st.SimURL, "https://") {
		t.Fatalf("simulator URL %s is not https", w.st.SimURL)
	}
	w.apply(w.pool("warm").MinIdle(1).Obj())

	eventually(t, "a runner registered on GitHub over TLS", func() bool {
		var list v1alpha1.RunnerList
		if err := env.Client.List(w.ctx(), &list, client.InNamespace(w.ns)); err != nil {
			return false
		}
		// The runner's registration is the simulator's to show at once; its status
		// records it with the runner's first change.
		return len(list.Items) > 0 && len(w.st.Sim.Runners()) > 0
	})

	expect(t, w.doctor(nil, ca.PEM))

	rep := w.doctor(nil, nil)
	expect(t, rep, doctor.FindingGitHubUnreachable)
	if c := check(t, rep, "warm", doctor.CheckGitHub); !strings.Contains(c.Fix, "--github-ca-bundle") {
		t.Errorf("github check without the CA: fix %q, want it to point at --github-ca-bundle", c.Fix)
	}
}

// Without --github-allow-http, a pool whose github.url is http:// is not Ready, with a
// message that names the flag; doctor reports it.
func TestHTTPRefusedWithoutFlag(t *testing.T) {
	ca := stack.NewCA(t) // a stack on TLS runs its manager without --github-allow-http
	w := newWorld(t, stack.Options{TLS: ca})
	w.apply(w.pool("plain").URL("http://127.0.0.1:1/acme").Obj())
	p := &v1alpha1.RunnerPool{}
	if err := env.Client.Get(w.ctx(), client.ObjectKey{Namespace: w.ns, Name: "plain"}, p); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != "False" || c.Reason != controller.ReasonInsecureURL || !strings.Contains(c.Message, "--github-allow-http") {
		t.Errorf("Ready = %+v, want False InsecureGitHubURL naming --github-allow-http", c)
	}
	rep := w.doctor(nil, nil)
	if c := check(t, rep, "plain", doctor.CheckController); c.Result != doctor.FindingPoolNotReady || !strings.Contains(c.Message, "InsecureGitHubURL") {
		t.Errorf("controller check = %+v, want PoolNotReady naming InsecureGitHubURL", c)
	}
	if rep.ExitCode() != 1 {
		t.Errorf("exit status = %d, want 1", rep.ExitCode())
	}
}
