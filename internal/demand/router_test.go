package demand

import (
	"testing"
)

func key(name string) PoolKey { return PoolKey{Namespace: "ci", Name: name} }

func TestRouterRule(t *testing.T) {
	pools := []Pool{
		{Key: key("org-linux"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: []string{"linux", "x64"}},
		{Key: key("org-gpu"), Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: []string{"linux", "x64", "gpu"}},
		{Key: key("repo-web"), Kind: ScopeRepository, Host: "github.com", Owner: "acme", Repo: "web", Labels: []string{"linux", "x64"}},
		{Key: key("ent"), Kind: ScopeEnterprise, Host: "github.com", Enterprise: "bigco", Labels: []string{"linux"}},
		{Key: key("ghes"), Kind: ScopeOrganization, Host: "ghe.example.com", Owner: "acme", Labels: []string{"linux", "x64"}},
		{Key: PoolKey{Namespace: "a", Name: "twin"}, Kind: ScopeOrganization, Host: "github.com", Owner: "twins", Labels: []string{"linux"}},
		{Key: PoolKey{Namespace: "b", Name: "twin"}, Kind: ScopeOrganization, Host: "github.com", Owner: "twins", Labels: []string{"linux"}},
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
		{"repository pool beats organization pool", Job{Host: "github.com", Owner: "acme", Repo: "web", Labels: []string{"linux"}}, key("repo-web"), true},
		{"repository pool needs the labels too", Job{Host: "github.com", Owner: "acme", Repo: "web", Labels: []string{"gpu"}}, key("org-gpu"), true},
		{"enterprise pool when the payload names the enterprise", Job{Host: "github.com", Enterprise: "bigco", Owner: "other", Repo: "x", Labels: []string{"linux"}}, key("ent"), true},
		{"organization pool beats enterprise pool", Job{Host: "github.com", Enterprise: "bigco", Owner: "acme", Repo: "x", Labels: []string{"linux"}}, key("org-linux"), true},
		{"GHES host routes to the GHES pool only", Job{Host: "ghe.example.com", Owner: "acme", Repo: "api", Labels: []string{"linux"}}, key("ghes"), true},
		{"ties break by namespace/name", Job{Host: "github.com", Owner: "twins", Repo: "x", Labels: []string{"linux"}}, PoolKey{Namespace: "a", Name: "twin"}, true},
		{"unknown label matches nothing", Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"windows"}}, PoolKey{}, false},
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
