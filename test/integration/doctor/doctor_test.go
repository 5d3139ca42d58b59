package doctor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/doctor"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// A pool with App credentials that GitHub accepts, a runner group that admits the
// repository, webhooks delivered and accepted, and a job that routes: exit status 0.
func TestHealthy(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.app(w.st.HookURL, webhookSecret)
	w.apply(w.pool("linux").Credentials("github-app").Obj())
	w.queue("acme/api", "self-hosted", "linux")

	rep := w.doctor(&doctor.JobQuery{Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "linux"}}, nil)
	expect(t, rep)
	for _, name := range []string{doctor.CheckSecret, doctor.CheckGitHub, doctor.CheckRunnerGroup, doctor.CheckWebhooks, doctor.CheckController} {
		if c := check(t, rep, "linux", name); c.Status != doctor.OK {
			t.Errorf("check %s = %+v, want ok", name, c)
		}
	}
	if c := check(t, rep, "linux", doctor.CheckWebhooks); !strings.Contains(c.Message, "answered 202") {
		t.Errorf("webhooks check = %q, want the last delivery answered 202", c.Message)
	}
	if rep.Route == nil || rep.Route.Pool != w.ns+"/linux" {
		t.Errorf("route = %+v, want pool %s/linux", rep.Route, w.ns)
	}
}

// With no pool at all, or a --pool that does not exist.
func TestNoPools(t *testing.T) {
	ns := env.Namespace(t)
	rep, err := doctor.Run(t.Context(), doctor.Options{Kube: env.Client, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, rep, doctor.FindingNoPools)

	rep, err = doctor.Run(t.Context(), doctor.Options{Kube: env.Client, Pool: &types.NamespacedName{Namespace: ns, Name: "nope"}})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, rep, doctor.FindingPoolNotFound)
}

// The Secret is missing: doctor says so, and the controller holds the pool not Ready.
func TestCredentialsSecretNotFound(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.apply(w.pool("linux").Credentials("missing").Obj())
	rep := w.doctor(nil, nil)
	expect(t, rep, doctor.FindingSecretNotFound, doctor.FindingPoolNotReady)
	if c := check(t, rep, "linux", doctor.CheckGitHub); c.Status != doctor.Skipped {
		t.Errorf("github check after a missing Secret = %+v, want skipped", c)
	}
}

// The Secret is incomplete: an App id without the other two keys.
func TestInvalidCredentials(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.secret("half-app", map[string]string{"github_app_id": "12"})
	w.apply(w.pool("linux").Credentials("half-app").Obj())
	rep := w.doctor(nil, nil)
	expect(t, rep, doctor.FindingInvalidCredentials, doctor.FindingPoolNotReady)
	if c := check(t, rep, "linux", doctor.CheckSecret); !strings.Contains(c.Message, "github_app_installation_id") {
		t.Errorf("secret check = %q, want it to name the missing key", c.Message)
	}
}

// A URL the API server accepts but that can never work.
func TestInvalidURL(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.apply(w.pool("linux").URL("http://127.0.0.1:99999/acme").Obj())
	expect(t, w.doctor(nil, nil), doctor.FindingInvalidURL, doctor.FindingPoolNotReady)
}

// GitHub refuses the token: doctor says so, and so does the pool's Ready condition.
func TestCredentialsRejected(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.secret("wrong-token", map[string]string{"github_token": "ghp_notatokenthesimulatorknows000000000"})
	w.apply(w.pool("linux").Credentials("wrong-token").Obj())
	expect(t, w.doctor(nil, nil), doctor.FindingCredentialsRejected, doctor.FindingPoolNotReady)
}

// The organization does not exist (or the credentials cannot see it).
func TestScopeNotFound(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.apply(w.pool("linux").URL(w.st.SimURL + "/no-such-org").Obj())
	expect(t, w.doctor(nil, nil), doctor.FindingPoolNotReady, doctor.FindingScopeNotFound)
}

// Nothing answers at the GitHub host.
func TestGitHubUnreachable(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.apply(w.pool("linux").URL("http://127.0.0.1:1/acme").Obj())
	expect(t, w.doctor(nil, nil), doctor.FindingGitHubUnreachable, doctor.FindingPoolNotReady)
}

// The pool names a runner group the organization does not have.
func TestRunnerGroupNotFound(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.apply(w.pool("linux").RunnerGroup("gpu-fleet").Obj())
	rep := w.doctor(nil, nil)
	expect(t, rep, doctor.FindingPoolNotReady, doctor.FindingRunnerGroupNotFound)
	if c := check(t, rep, "linux", doctor.CheckRunnerGroup); !strings.Contains(c.Message, "Default") {
		t.Errorf("runner-group check = %q, want it to list the groups there are", c.Message)
	}
}

// A public repository's job and the Default group, which (as on GitHub) does not allow
// public repositories; a group that does allow them passes.
func TestRunnerGroupRefusesPublicRepositories(t *testing.T) {
	w := newWorld(t, stack.Options{})
	if _, err := w.st.Sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "site", Public: true}); err != nil {
		t.Fatal(err)
	}
	w.apply(w.pool("linux").Obj())
	job := &doctor.JobQuery{Owner: "acme", Repo: "site", Labels: []string{"linux"}}
	rep := w.doctor(job, nil)
	expect(t, rep, doctor.FindingRunnerGroupNoPublic)

	if _, err := w.st.Sim.CreateRunnerGroup(simgithub.RunnerGroupSpec{Org: "acme", Name: "open-source", AllowsPublicRepositories: true}); err != nil {
		t.Fatal(err)
	}
	w2 := &world{t: t, ns: env.Namespace(t), st: w.st}
	w2.secret("github-creds", map[string]string{"github_token": testToken})
	// The manager watches the first namespace only: doctor's controller check would
	// fail here, so only the runner-group check is asserted.
	if err := env.Client.Create(w.ctx(), w2.pool("public").RunnerGroup("open-source").Obj()); err != nil {
		t.Fatal(err)
	}
	if c := check(t, w2.doctor(job, nil), "public", doctor.CheckRunnerGroup); c.Status != doctor.OK || !strings.Contains(c.Message, "admits acme/site") {
		t.Errorf("runner-group check of a group allowing public repositories = %+v, want ok, admits acme/site", c)
	}
}

// A group visible to selected repositories only, and a job of another repository.
func TestRunnerGroupNotVisible(t *testing.T) {
	w := newWorld(t, stack.Options{})
	if _, err := w.st.Sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Sim.CreateRunnerGroup(simgithub.RunnerGroupSpec{Org: "acme", Name: "api-only", Visibility: "selected", Repositories: []string{"api"}}); err != nil {
		t.Fatal(err)
	}
	w.apply(w.pool("linux").RunnerGroup("api-only").Obj())
	expect(t, w.doctor(&doctor.JobQuery{Owner: "acme", Repo: "api", Labels: []string{"linux"}}, nil))
	expect(t, w.doctor(&doctor.JobQuery{Owner: "acme", Repo: "web", Labels: []string{"linux"}}, nil), doctor.FindingRunnerGroupNotVisible)
}

// A pool in a namespace no controller watches.
func TestPoolNotReconciled(t *testing.T) {
	w := newWorld(t, stack.Options{})
	other := &world{t: t, ns: env.Namespace(t), st: w.st}
	other.secret("github-creds", map[string]string{"github_token": testToken})
	if err := env.Client.Create(w.ctx(), other.pool("linux").Obj()); err != nil {
		t.Fatal(err)
	}
	rep := other.doctor(nil, nil)
	expect(t, rep, doctor.FindingPoolNotReconciled)
	if c := check(t, rep, "linux", doctor.CheckController); !strings.Contains(c.Fix, other.ns) {
		t.Errorf("controller check fix = %q, want it to name the namespace", c.Fix)
	}
}

// The App's webhook secret differs from the controller's: deliveries answered 401.
func TestWebhookSignatureMismatch(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.app(w.st.HookURL, "not-the-controllers-secret")
	w.apply(w.pool("linux").Credentials("github-app").Obj())
	w.queue("acme/api", "self-hosted", "linux")
	expect(t, w.doctor(nil, nil), doctor.FindingWebhookSignatureInvalid)
}

// The App has never sent a workflow_job delivery.
func TestNoWebhookDeliveries(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.app(w.st.HookURL, webhookSecret)
	w.apply(w.pool("linux").Credentials("github-app").Obj())
	expect(t, w.doctor(nil, nil), doctor.FindingNoWebhookDeliveries)
}

// The App's webhook URL reaches nothing.
func TestWebhookDeliveryFailed(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.app("http://127.0.0.1:1/webhook", webhookSecret)
	w.apply(w.pool("linux").Credentials("github-app").Obj())
	w.queue("acme/api", "self-hosted", "linux")
	expect(t, w.doctor(nil, nil), doctor.FindingWebhookDeliveryFailed)
}

// Routing: the closest pool takes the job, each other pool says why not, and a job no
// pool takes is a problem.
func TestRouting(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.apply(w.pool("linux").Obj())
	w.apply(w.pool("gpu").Labels("linux", "gpu").Obj())
	w.apply(w.pool("api").URL(w.st.SimURL + "/acme/api").Labels("linux").Obj())

	rep := w.doctor(&doctor.JobQuery{Owner: "acme", Repo: "web", Labels: []string{"self-hosted", "linux", "gpu"}}, nil)
	expect(t, rep)
	why := map[string]doctor.PoolDecision{}
	for _, d := range rep.Route.Pools {
		why[strings.TrimPrefix(d.Pool, w.ns+"/")] = d
	}
	if d := why["gpu"]; !d.Takes {
		t.Errorf("gpu pool: %+v, want it to take the job", d)
	}
	if d := why["linux"]; d.Matches || !strings.Contains(d.Why, `"gpu"`) {
		t.Errorf("linux pool: %+v, want it not to match for lack of label gpu", d)
	}
	if d := why["api"]; d.Matches || !strings.Contains(d.Why, "repository acme/api") {
		t.Errorf("api pool: %+v, want it not to match for its scope", d)
	}

	rep = w.doctor(&doctor.JobQuery{Owner: "acme", Repo: "api", Labels: []string{"linux"}}, nil)
	expect(t, rep)
	if rep.Route.Pool != w.ns+"/api" {
		t.Errorf("route of an acme/api job = %q, want the repository pool", rep.Route.Pool)
	}
	for _, d := range rep.Route.Pools {
		if strings.HasSuffix(d.Pool, "/linux") && (!d.Matches || !strings.Contains(d.Why, "more specific")) {
			t.Errorf("linux pool: %+v, want a match that loses to the more specific scope", d)
		}
	}

	expect(t, w.doctor(&doctor.JobQuery{Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "windows"}}, nil), doctor.FindingNoPoolMatches)
}

// A webhook Service of type LoadBalancer behind the controller NetworkPolicy that
// kustomize installs (config/components/network-policies/controller.yaml), which admits
// only the cluster's pods: GitHub's deliveries would be dropped, and doctor says so.
// Once the policy admits GitHub's hook ranges, as docs/install.md shows, it does not;
// nor for a ClusterIP Service (an Ingress or a gateway carries the deliveries).
func TestWebhookBlockedByNetworkPolicy(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.apply(w.pool("linux").Obj())
	policy, svc := w.loadBalancerBehindControllerPolicy()
	blocked := func(rep *doctor.Report) bool {
		return slices.Contains(rep.Findings(), doctor.FindingWebhookBlockedByNetworkPolicy)
	}
	if !blocked(w.doctor(nil, nil)) {
		t.Errorf("a LoadBalancer webhook Service behind the default controller policy: no %s", doctor.FindingWebhookBlockedByNetworkPolicy)
	}

	// GitHub's hook ranges admitted, as docs/install.md's LoadBalancer values do.
	patch := client.MergeFrom(policy.DeepCopy())
	policy.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "192.30.252.0/22"}}, {IPBlock: &networkingv1.IPBlock{CIDR: "140.82.112.0/20"}},
	}
	if err := env.Client.Patch(w.ctx(), policy, patch); err != nil {
		t.Fatal(err)
	}
	if blocked(w.doctor(nil, nil)) {
		t.Errorf("the policy admits GitHub's hook ranges, yet doctor reports %s", doctor.FindingWebhookBlockedByNetworkPolicy)
	}

	// Back to the default policy, behind a ClusterIP Service: nothing comes from outside.
	patch = client.MergeFrom(policy.DeepCopy())
	policy.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
	if err := env.Client.Patch(w.ctx(), policy, patch); err != nil {
		t.Fatal(err)
	}
	svcPatch := client.MergeFrom(svc.DeepCopy())
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if err := env.Client.Patch(w.ctx(), svc, svcPatch); err != nil {
		t.Fatal(err)
	}
	if blocked(w.doctor(nil, nil)) {
		t.Errorf("a ClusterIP webhook Service: doctor reports %s", doctor.FindingWebhookBlockedByNetworkPolicy)
	}
}

// loadBalancerBehindControllerPolicy makes the world's namespace hold what an install
// with a LoadBalancer webhook Service holds: the controller's pod, the Service, and the
// controller's default NetworkPolicy (config/components/network-policies).
func (w *world) loadBalancerBehindControllerPolicy() (*networkingv1.NetworkPolicy, *corev1.Service) {
	t := w.t
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "config", "components", "network-policies", "controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var policy networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(b, &policy); err != nil {
		t.Fatal(err)
	}
	policy.Namespace = w.ns
	controllerLabels := policy.Spec.PodSelector.MatchLabels
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "gantry-controller-0", Labels: controllerLabels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "gantry",
			Ports: []corev1.ContainerPort{{Name: "webhook", ContainerPort: 9090}}}}},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "gantry-webhook",
			Labels: map[string]string{"app.kubernetes.io/name": "gantry", "app.kubernetes.io/component": "webhook"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: controllerLabels,
			Ports: []corev1.ServicePort{{Name: "webhook", Port: 80, TargetPort: intstr.FromString("webhook")}}},
	}
	for _, o := range []client.Object{&policy, pod, svc} {
		if err := env.Client.Create(w.ctx(), o); err != nil {
			t.Fatal(err)
		}
	}
	return &policy, svc
}

// Without --repository: a public repository's job reached the pool (its webhook), so
// the repository is among the pool's recent ones, and the pool's Default group refuses
// public repositories. Doctor names it unasked.
func TestRunnerGroupRefusesARecentPublicRepository(t *testing.T) {
	w := newWorld(t, stack.Options{})
	if _, err := w.st.Sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "site", Public: true}); err != nil {
		t.Fatal(err)
	}
	w.app(w.st.HookURL, webhookSecret)
	w.apply(w.pool("linux").Credentials("github-app").Obj())
	rep := w.doctor(nil, nil)
	if slices.Contains(rep.Findings(), doctor.FindingRunnerGroupNoPublic) {
		t.Fatalf("before any job of acme/site: %s", doctor.FindingRunnerGroupNoPublic)
	}
	w.queue("acme/site", "self-hosted", "linux")
	eventually(t, "acme/site among the pool's recent repositories", func() bool {
		var p v1alpha1.RunnerPool
		if err := env.Client.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: "linux"}, &p); err != nil {
			return false
		}
		return slices.ContainsFunc(p.Status.RecentRepositories, func(r v1alpha1.RepositoryActivity) bool { return r.Name == "acme/site" })
	})
	c := check(t, w.doctor(nil, nil), "linux", doctor.CheckRunnerGroup)
	if c.Result != doctor.FindingRunnerGroupNoPublic || !strings.Contains(c.Message, "acme/site") {
		t.Errorf("runner-group check = %+v, want %s naming acme/site", c, doctor.FindingRunnerGroupNoPublic)
	}
}

// A pool that re-runs jobs killed by the infrastructure needs credentials that may
// re-run them: a classic token without the repo scope is named (RerunNotPermitted), one
// with it passes; a pool that does not re-run is not asked about it.
func TestRerunNotPermitted(t *testing.T) {
	w := newWorld(t, stack.Options{})
	const orgOnly = "ghp_simulatedtokenwithoutrepo0000000000"
	if err := w.st.Sim.AddPAT(simgithub.PAT{Token: orgOnly, Login: "ci-bot", Scopes: []string{"admin:org", "manage_runners:org"}}); err != nil {
		t.Fatal(err)
	}
	w.secret("org-only", map[string]string{"github_token": orgOnly})
	w.apply(w.pool("reruns").Credentials("org-only").Rerun(v1alpha1.RerunInfrastructureFailures).Obj())
	w.apply(w.pool("plain").Labels("plain").Credentials("org-only").Obj())
	w.apply(w.pool("permitted").Labels("permitted").Rerun(v1alpha1.RerunInfrastructureFailures).Obj())

	rep := w.doctor(nil, nil)
	c := check(t, rep, "reruns", doctor.CheckRerun)
	if c.Result != doctor.FindingRerunNotPermitted || !strings.Contains(c.Message, "admin:org, manage_runners:org") || !strings.Contains(c.Fix, "repo scope") {
		t.Errorf("rerun check of a token without repo = %+v, want %s naming its scopes and the fix", c, doctor.FindingRerunNotPermitted)
	}
	if c := check(t, rep, "permitted", doctor.CheckRerun); c.Status != doctor.OK {
		t.Errorf("rerun check of a token with repo = %+v, want ok", c)
	}
	for _, pr := range rep.Pools {
		if !strings.HasSuffix(pr.Pool, "/plain") {
			continue
		}
		for _, c := range pr.Checks {
			if c.Name == doctor.CheckRerun {
				t.Errorf("a pool that does not re-run was checked for it: %+v", c)
			}
		}
	}
}
