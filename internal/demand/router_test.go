package demand

import (
	"testing"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

func key(name string) PoolKey { return PoolKey{Namespace: "ci", Name: name} }

// registered is what a pool's runners register: the labels the router matches.
func registered(labels ...string) []string {
	pool := v1alpha1.RunnerPool{Spec: v1alpha1.RunnerPoolSpec{Labels: labels}}
	return pool.RunnerLabels()
}

func TestRouterRule(t *testing.T) {
	arm := v1alpha1.RunnerPool{Spec: v1alpha1.RunnerPoolSpec{Labels: []string{"big"}}}
	arm.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelArch: "arm64"}
	bare := v1alpha1.RunnerPool{Spec: v1alpha1.RunnerPoolSpec{Labels: []string{"secure"}, NoDefaultLabels: true}}
	pools := []Pool{
		{Key: key("org-linux"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: registered()},
		{Key: key("org-gpu"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: registered("gpu")},
		{Key: key("org-arm"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: arm.RunnerLabels()},
		{Key: key("org-bare"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: bare.RunnerLabels()},
		{Key: key("repo-web"), Kind: ScopeRepository, Host: "github.com", Owner: "acme", Repo: "web", Labels: registered("linux", "x64")},
		{Key: key("ent"), Kind: ScopeEnterprise, Host: "github.com", Enterprise: "bigco", Labels: registered()},
		{Key: key("ghes"), Kind: ScopeOrganization, Host: "ghe.example.com", Owner: "acme", Labels: registered()},
		{Key: PoolKey{Namespace: "a", Name: "twin"}, Kind: ScopeOrganization, Host: "github.com", Owner: "twins", Labels: registered()},
		{Key: PoolKey{Namespace: "b", Name: "twin"}, Kind: ScopeOrganization, Host: "github.com", Owner: "twins", Labels: registered()},
	}
	r := NewRouter()
	for _, p := range pools {
		r.SetPool(p)
	}
	tests := []struct {
		name   string
		job    Job
		want   PoolKey
		wantOK bool
	}{
		{"org job with exact labels", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "linux", "x64"}}, key("org-linux"), true},
		{"labels compare case-insensitively", Job{Host: "github.com", Owner: "ACME", Repo: "api", Labels: []string{"Self-Hosted", "Linux", "X64"}}, key("org-linux"), true},
		{"fewest labels wins over a GPU pool", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"linux"}}, key("org-linux"), true},
		{"only the GPU pool has gpu", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "gpu"}}, key("org-gpu"), true},
		{"arm64 goes to the pool pinned to arm64", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "arm64"}}, key("org-arm"), true},
		{"x64 never goes to the arm64 pool", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "x64", "big"}}, PoolKey{}, false},
		{"windows matches no linux pool", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "windows"}}, PoolKey{}, false},
		{"a pool without default labels takes its own label", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"secure"}}, key("org-bare"), true},
		{"a pool without default labels does not take self-hosted", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "secure"}}, PoolKey{}, false},
		{"repository pool beats organization pool", Job{Host: "github.com", Owner: "acme", Repo: "web", Labels: []string{"linux"}}, key("repo-web"), true},
		{"repository pool needs the labels too", Job{Host: "github.com", Owner: "acme", Repo: "web", Labels: []string{"gpu"}}, key("org-gpu"), true},
		{"enterprise pool when the payload names the enterprise", Job{Host: "github.com", Enterprise: "bigco", Owner: "other", Repo: "x", Labels: []string{"linux"}}, key("ent"), true},
		{"organization pool beats enterprise pool", Job{Host: "github.com", Enterprise: "bigco", Owner: "acme", Repo: "x", Labels: []string{"linux"}}, key("org-linux"), true},
		{"GHES host routes to the GHES pool only", Job{Host: "ghe.example.com", Owner: "acme", Repo: "api", Labels: []string{"linux"}}, key("ghes"), true},
		{"ties break by namespace/name", Job{Host: "github.com", Owner: "twins", Repo: "x", Labels: []string{"linux"}}, PoolKey{Namespace: "a", Name: "twin"}, true},
		{"unknown label matches nothing", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "fpga"}}, PoolKey{}, false},
		{"other organization matches nothing", Job{Host: "github.com", Owner: "other", Repo: "api", Labels: []string{"linux"}}, PoolKey{}, false},
		{"self-hosted alone matches the closest fit", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted"}}, key("org-linux"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := r.Route(tt.job)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("Route = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}

	r.RemovePool(key("repo-web"))
	if got, _ := r.Route(Job{Host: "github.com", Owner: "acme", Repo: "web", Labels: []string{"linux"}}); got != key("org-linux") {
		t.Errorf("after removing the repository pool, Route = %v, want org-linux", got)
	}
}
