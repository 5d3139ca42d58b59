package install

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/manager"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// grant is one permission: a verb on a resource (resource/subresource) of an API group.
type grant struct{ Group, Resource, Verb string }

func (g grant) String() string { return fmt.Sprintf("%s %s.%s", g.Verb, g.Resource, g.Group) }

func grantsOf(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[grant{g, res, v}] = true
				}
			}
		}
	}
	return out
}

func sortedGrants(m map[grant]bool) []string {
	var s []string
	for g := range m {
		s = append(s, g.String())
	}
	sort.Strings(s)
	return s
}

func isLease(g grant) bool { return g.Group == "coordination.k8s.io" }

// generatedRules reads config/rbac/role.yaml, which controller-gen generates from the
// markers in internal/controller/rbac.go: every right the controller uses.
func generatedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, o := range parseManifests(t, b) {
		if o.GetKind() == "ClusterRole" {
			rules = append(rules, typed[rbacv1.ClusterRole](t, o).Rules...)
		}
	}
	if len(rules) == 0 {
		t.Fatal("config/rbac/role.yaml has no ClusterRole rules")
	}
	return rules
}

// rbacScope says where an install puts the controller and what it watches.
type rbacScope struct {
	releaseNS string
	sa        string
	watched   []string // empty: every namespace
	webhook   string   // the webhook Secret's name, when only it may be read at home
	// leasesOnlyAtHome: Lease rights are granted in the release namespace only (the
	// chart), not wherever the other rules go (kustomize, which binds role.yaml whole).
	leasesOnlyAtHome bool
}

// boundRules collects the rules bound to the controller's ServiceAccount, by the
// namespace they apply in ("" for cluster-wide).
func boundRules(t *testing.T, objs []*unstructured.Unstructured, s rbacScope) map[string][]rbacv1.PolicyRule {
	t.Helper()
	isSA := func(subjects []rbacv1.Subject) bool {
		for _, sub := range subjects {
			if sub.Kind == "ServiceAccount" && sub.Name == s.sa && sub.Namespace == s.releaseNS {
				return true
			}
		}
		return false
	}
	rulesOf := func(kind, ns, name string) []rbacv1.PolicyRule {
		o := find(t, objs, kind, ns, name)
		if kind == "ClusterRole" {
			return typed[rbacv1.ClusterRole](t, o).Rules
		}
		return typed[rbacv1.Role](t, o).Rules
	}
	out := map[string][]rbacv1.PolicyRule{}
	for _, o := range ofKind(objs, "ClusterRoleBinding") {
		b := typed[rbacv1.ClusterRoleBinding](t, o)
		if isSA(b.Subjects) {
			out[""] = append(out[""], rulesOf("ClusterRole", "", b.RoleRef.Name)...)
		}
	}
	for _, o := range ofKind(objs, "RoleBinding") {
		b := typed[rbacv1.RoleBinding](t, o)
		if !isSA(b.Subjects) {
			continue
		}
		if b.RoleRef.Kind == "ClusterRole" {
			out[b.Namespace] = append(out[b.Namespace], rulesOf("ClusterRole", "", b.RoleRef.Name)...)
		} else {
			out[b.Namespace] = append(out[b.Namespace], rulesOf("Role", b.Namespace, b.RoleRef.Name)...)
		}
	}
	return out
}

// checkRBAC compares the rights an install binds to the controller with the generated
// config/rbac/role.yaml: together they must be exactly the generated rights, and each
// must be granted only where it is needed.
func checkRBAC(t *testing.T, objs []*unstructured.Unstructured, s rbacScope) {
	t.Helper()
	gen := grantsOf(generatedRules(t))
	bound := boundRules(t, objs, s)
	union := map[grant]bool{}
	for _, rules := range bound {
		for g := range grantsOf(rules) {
			union[g] = true
		}
	}
	if diff := cmp.Diff(sortedGrants(gen), sortedGrants(union)); diff != "" {
		t.Errorf("the controller's rights differ from config/rbac/role.yaml, generated from internal/controller/rbac.go "+
			"(run `make generate`, which also refreshes charts/gantry/files/role.yaml) (-generated +installed):\n%s", diff)
	}
	// What goes where the RunnerPools are: everything but (for the chart) the Leases.
	want := map[grant]bool{}
	for g := range gen {
		if !s.leasesOnlyAtHome || !isLease(g) {
			want[g] = true
		}
	}
	scopes := s.watched
	if len(scopes) == 0 {
		scopes = []string{""}
	} else if rules, ok := bound[""]; ok {
		t.Errorf("watching namespaces %v, yet cluster-wide rights are bound: %v", s.watched, sortedGrants(grantsOf(rules)))
	}
	for _, ns := range scopes {
		got := grantsOf(bound[ns])
		if ns == s.releaseNS {
			// Home may hold more (Leases): only what is missing counts.
			for g := range got {
				if !want[g] {
					delete(got, g)
				}
			}
		}
		if diff := cmp.Diff(sortedGrants(want), sortedGrants(got)); diff != "" {
			t.Errorf("rights in %q (the watch scope) (-want +got):\n%s", ns, diff)
		}
	}
	for ns, rules := range bound {
		if ns == s.releaseNS || slices.Contains(scopes, ns) {
			continue
		}
		t.Errorf("rights bound in namespace %q, which is neither watched nor the release namespace: %v", ns, sortedGrants(grantsOf(rules)))
	}
	if s.leasesOnlyAtHome {
		for ns, rules := range bound {
			for g := range grantsOf(rules) {
				if isLease(g) && ns != s.releaseNS {
					t.Errorf("%s granted in %q: Leases are needed in the release namespace %s only", g, ns, s.releaseNS)
				}
			}
		}
	}
	// At home, unless it is watched, Secrets are readable by name only: the webhook's.
	if s.webhook != "" && len(s.watched) > 0 && !slices.Contains(s.watched, s.releaseNS) {
		for _, r := range bound[s.releaseNS] {
			if slices.Contains(r.Resources, "secrets") && !slices.Equal(r.ResourceNames, []string{s.webhook}) {
				t.Errorf("the release namespace's rule %+v reaches Secrets other than the webhook's %s", r, s.webhook)
			}
		}
	}
}

// TestControllerRunsWithTheChartsRights installs the chart's ServiceAccount, RBAC and
// Secrets for real, then runs Gantry's manager as that ServiceAccount (impersonated)
// against the GitHub simulator: it must win the leader Lease, read the webhook Secret,
// put the chart's runner NetworkPolicy beside the pool, and take a RunnerPool through
// a runner's whole life (Runner, JIT Secret, pod, retirement) with exactly those rights. The API server's own authorizer answers
// whether each generated right is granted where the chart means it, and refused
// elsewhere.
func TestControllerRunsWithTheChartsRights(t *testing.T) {
	for _, mode := range []struct {
		name    string
		watched int
	}{{"namespaced", 2}, {"cluster-wide", 0}} {
		t.Run(mode.name, func(t *testing.T) {
			home := env.Namespace(t)
			watched := namespaces(t, mode.watched)
			other := env.Namespace(t) // neither watched nor home
			poolNS := other
			if len(watched) > 0 {
				poolNS = watched[len(watched)-1]
			}
			release := "rbac" + strings.TrimPrefix(home[strings.LastIndex(home, "-"):], "-")
			fullname := release + "-gantry"
			const hookSecret = "a-test-webhook-secret"
			const token = "ghp_simulatedtokenforgantryinstalltest00"
			values := map[string]any{
				"github":  map[string]any{"token": token, "secretNamespaces": []string{poolNS}},
				"webhook": map[string]any{"secret": map[string]any{"value": hookSecret}},
			}
			if len(watched) > 0 {
				values["watchNamespaces"] = watched
			}
			objs := mustHelmTemplate(t, release, home, values)
			var install []*unstructured.Unstructured
			for _, o := range objs {
				switch o.GetKind() {
				case "ServiceAccount", "Secret", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
					install = append(install, o)
				}
			}
			apply(t, install)
			t.Cleanup(func() {
				for _, o := range install {
					if o.GetNamespace() == "" {
						_ = env.Client.Delete(context.Background(), o)
					}
				}
			})
			user := "system:serviceaccount:" + home + ":" + fullname
			checkAuthorizer(t, user, home, watched, other, fullname+"-webhook")

			// The controller, as the ServiceAccount, against the simulator.
			srv := httptest.NewUnstartedServer(nil)
			simURL := "http://" + srv.Listener.Addr().String()
			sim := simgithub.New(simgithub.Options{
				URL:        simURL,
				PATs:       []simgithub.PAT{{Token: token, Login: "ci-bot", Scopes: []string{"repo", "admin:org", "manage_runners:org"}}},
				RateLimits: simgithub.RateLimits{Disabled: true},
			})
			srv.Config.Handler = sim
			srv.Start()
			t.Cleanup(func() { srv.Close(); sim.Close() })
			if _, err := sim.CreateOrg(simgithub.OrgSpec{Login: "acme"}); err != nil {
				t.Fatal(err)
			}
			cfg := rest.CopyConfig(env.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + home, "system:authenticated"}}
			g, err := manager.New(cfg, manager.Options{
				MetricsAddr: "0", ProbeAddr: "0", WebhookAddr: "127.0.0.1:0",
				WebhookSecret:  types.NamespacedName{Namespace: home, Name: fullname + "-webhook"},
				LeaderElection: true, LeaderElectionNamespace: home,
				Namespaces: watched, ResyncInterval: time.Hour, SeveralPerProcess: true, GitHubAllowHTTP: true,
				RunnerNetworkPolicy: runnerPolicy(t, objs, typed[appsv1.Deployment](t, find(t, objs, "Deployment", home, fullname))),
			})
			if err != nil {
				t.Fatal(err)
			}
			mctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- g.Manager.Start(mctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("the manager stopped with an error: %v", err)
				}
			})

			c, stop := context.WithTimeout(context.Background(), 5*time.Minute)
			defer stop()
			eventually(t, "the leader Lease in "+home, func() bool {
				var l coordinationv1.Lease
				err := env.Client.Get(c, types.NamespacedName{Namespace: home, Name: "gantry-controller.gantry.dev"}, &l)
				return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
			})
			// The webhook endpoint (served by the leader) verifies a signed ping with
			// the secret it can read only through the by-name rule.
			hookURL := "http://" + g.WebhookListener.Addr().String() + "/webhook"
			if code := postPing(t, hookURL, hookSecret); code != http.StatusOK {
				t.Errorf("a ping signed with the webhook secret got %d, want 200: the controller cannot read its webhook Secret", code)
			}

			pool := testutil.RunnerPool(poolNS, "linux").URL(simURL + "/acme").Credentials("github-app").Labels("linux").MinIdle(1).Obj()
			if err := env.Client.Create(c, pool); err != nil {
				t.Fatal(err)
			}
			var key types.NamespacedName // the Runner's, its pod's and its JIT Secret's
			eventually(t, "a Runner with its JIT Secret and pod in "+poolNS, func() bool {
				var list v1alpha1.RunnerList
				if err := env.Client.List(c, &list, client.InNamespace(poolNS)); err != nil || len(list.Items) != 1 {
					return false
				}
				key = client.ObjectKeyFromObject(&list.Items[0])
				return env.Client.Get(c, key, &corev1.Pod{}) == nil && env.Client.Get(c, key, &corev1.Secret{}) == nil
			})
			eventually(t, "the runner NetworkPolicy in "+poolNS, func() bool {
				return env.Client.Get(c, types.NamespacedName{Namespace: poolNS, Name: fullname + "-runners"}, &networkingv1.NetworkPolicy{}) == nil
			})
			eventually(t, "the pool Ready", func() bool {
				var p v1alpha1.RunnerPool
				if err := env.Client.Get(c, client.ObjectKeyFromObject(pool), &p); err != nil {
					return false
				}
				cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
				return cond != nil && cond.Status == metav1.ConditionTrue
			})
			// Retire the runner: the Runner's finalizer deletes its pod and Secret.
			patch := client.MergeFrom(pool.DeepCopy())
			pool.Spec.MinIdle = 0
			if err := env.Client.Patch(c, pool, patch); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the Runner, its pod and its Secret gone", func() bool {
				return apierrors.IsNotFound(env.Client.Get(c, key, &v1alpha1.Runner{})) &&
					apierrors.IsNotFound(env.Client.Get(c, key, &corev1.Pod{})) &&
					apierrors.IsNotFound(env.Client.Get(c, key, &corev1.Secret{}))
			})
			if err := env.Client.Delete(c, pool); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkAuthorizer asks the API server, for every generated right, whether the user has
// it where the chart means it (the watched namespaces, or everywhere) and not where it
// does not (another namespace; cluster-wide when namespaced). Leases: at home only. The
// webhook Secret: readable at home by name; another Secret there is not.
func checkAuthorizer(t *testing.T, user, home string, watched []string, other, webhook string) {
	t.Helper()
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + home, "system:authenticated"}
	allowed := func(g grant, ns, name string) bool {
		res, sub, _ := strings.Cut(g.Resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: g.Verb, Group: g.Group, Resource: res, Subresource: sub, Name: name,
			},
		}}
		if err := env.Client.Create(ctx(t), sar); err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		return sar.Status.Allowed
	}
	expect := func(g grant, ns, name string, want bool) {
		if got := allowed(g, ns, name); got != want {
			where := "cluster-wide"
			if ns != "" {
				where = "in " + ns
			}
			if name != "" {
				where += " (name " + name + ")"
			}
			t.Errorf("%s %s: allowed=%v, want %v", g, where, got, want)
		}
	}
	// A rule limited to resourceNames is asked for with a name it lists.
	named := map[grant]string{}
	for _, r := range generatedRules(t) {
		if len(r.ResourceNames) == 0 {
			continue
		}
		for g := range grantsOf([]rbacv1.PolicyRule{r}) {
			named[g] = r.ResourceNames[0]
		}
	}
	for g := range grantsOf(generatedRules(t)) {
		if name := named[g]; name != "" {
			if len(watched) == 0 {
				expect(g, other, name, true)
				expect(g, "", name, true)
			} else {
				for _, ns := range watched {
					expect(g, ns, name, true)
				}
				expect(g, other, name, false)
			}
			expect(g, home, "another-"+name, false)
			continue
		}
		if isLease(g) {
			expect(g, home, "", true)
			expect(g, other, "", false)
			continue
		}
		if len(watched) == 0 {
			expect(g, other, "", true)
			expect(g, "", "", true)
			continue
		}
		for _, ns := range watched {
			expect(g, ns, "", true)
		}
		expect(g, other, "", false)
		expect(g, "", "", false)
	}
	get := grant{"", "secrets", "get"}
	expect(get, home, webhook, true)
	if len(watched) > 0 {
		expect(get, home, "something-else", false)
	}
}

func postPing(t *testing.T, url, secret string) int {
	t.Helper()
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-GitHub-Delivery", "install-test-ping")
	req.Header.Set("X-Hub-Signature-256", demand.Sign([]byte(secret), body))
	// The controller reads the Secret lazily; a first answer may come before the read
	// settles, so ask a few times.
	code := 0
	for range 50 {
		resp, err := http.DefaultClient.Do(req.Clone(req.Context()))
		if err == nil {
			code = resp.StatusCode
			_ = resp.Body.Close()
			if code == http.StatusOK {
				return code
			}
		}
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("install-test-ping-%d", time.Now().UnixNano()))
		req.Body, _ = req.GetBody()
		time.Sleep(100 * time.Millisecond)
	}
	return code
}

// eventually polls cond every 100ms for up to 60s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestKustomizeRBACMatchesGenerated: config/default binds the generated ClusterRole as
// it is; config/namespaced binds the same rules as a Role in ci, where Gantry and its
// pools live.
func TestKustomizeRBACMatchesGenerated(t *testing.T) {
	checkRBAC(t, kustomizeBuild(t, "config/default"), rbacScope{releaseNS: "gantry-system", sa: "gantry-controller"})
	checkRBAC(t, kustomizeBuild(t, "config/namespaced"), rbacScope{releaseNS: "ci", sa: "gantry-controller", watched: []string{"ci"}})
}

// The role copy the chart reads must be the generated file, byte for byte.
func TestChartRoleCopyIsCurrent(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "charts", "gantry", "files", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("charts/gantry/files/role.yaml differs from config/rbac/role.yaml: run `make generate`")
	}
	var doc map[string]any
	if err := yaml.Unmarshal(got, &doc); err != nil {
		t.Errorf("charts/gantry/files/role.yaml: %v", err)
	}
}
