package doctor

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/internal/doctor"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// documentedRole is the ClusterRole docs/doctor.md gives whoever runs doctor (its block
// marked `<!-- test: doctor-role -->`).
func documentedRole(t *testing.T) rbacv1.ClusterRole {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "doctor.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- test: doctor-role -->\\s*\\n(\\s*)```yaml\\n(.*?)\\n\\s*```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/doctor.md has no yaml block marked <!-- test: doctor-role -->")
	}
	body := regexp.MustCompile("(?m)^"+string(m[1])).ReplaceAll(m[2], nil)
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(body, &role); err != nil {
		t.Fatalf("doctor.md's ClusterRole: %v\n%s", err, body)
	}
	return role
}

// userWith binds rules to a user of its own and returns a client that acts as that user.
func (w *world) userWith(name string, rules []rbacv1.PolicyRule) client.Client {
	t := w.t
	t.Helper()
	user := w.ns + "-" + name
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(w.ctx(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(w.ctx(), o) })
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withoutResource drops a resource from rules (the rules are copies).
func withoutResource(rules []rbacv1.PolicyRule, resource string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == resource })
		if len(r.Resources) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// With exactly the rights docs/doctor.md lists, doctor finds what it finds with every
// right — the webhook-exposure check included, which reads Services, NetworkPolicies
// and pods. Without one of them, the check says so on a line of its own instead of
// leaving it out.
func TestDocumentedRightsAreEnough(t *testing.T) {
	w := newWorld(t, stack.Options{})
	w.app(w.st.HookURL, webhookSecret)
	w.apply(w.pool("linux").Credentials("github-app").Obj())
	w.loadBalancerBehindControllerPolicy()
	role := documentedRole(t)

	admin := w.doctor(nil, nil).Findings()
	if !slices.Contains(admin, doctor.FindingWebhookBlockedByNetworkPolicy) {
		t.Fatalf("with every right, doctor finds %v; want %s (the setup is wrong)", admin, doctor.FindingWebhookBlockedByNetworkPolicy)
	}
	documented := w.doctorAs(w.userWith("documented", role.Rules), nil, nil)
	if got := documented.Findings(); !slices.Equal(admin, got) {
		t.Errorf("with doctor.md's ClusterRole, doctor finds %v; with every right %v", got, admin)
	}
	for _, c := range documented.Install {
		t.Errorf("with doctor.md's ClusterRole, an install check did not conclude: %s %s: %s", c.Name, c.Status, c.Message)
	}

	for _, missing := range []struct{ resource, says string }{
		{"services", "cannot list the webhook Services"},
		{"networkpolicies", "may not list NetworkPolicies"},
	} {
		rep := w.doctorAs(w.userWith("no-"+missing.resource, withoutResource(role.Rules, missing.resource)), nil, nil)
		var said bool
		for _, c := range rep.Install {
			said = said || (c.Name == doctor.CheckWebhookExposure && c.Status == doctor.Skipped && strings.Contains(c.Message, missing.says))
		}
		if !said {
			t.Errorf("without %s, doctor's install checks are %+v: want webhook-exposure skipped, saying %q", missing.resource, rep.Install, missing.says)
		}
		var text strings.Builder
		if err := rep.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), missing.says) {
			t.Errorf("without %s, doctor's text does not say %q:\n%s", missing.resource, missing.says, text.String())
		}
	}
}
