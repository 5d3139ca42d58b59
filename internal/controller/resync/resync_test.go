package resync

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
)

func TestReposOf(t *testing.T) {
	org, err := github.ParseURL("https://github.com/acme")
	if err != nil {
		t.Fatal(err)
	}
	repoScope, err := github.ParseURL("https://github.com/acme/api")
	if err != nil {
		t.Fatal(err)
	}
	r := func(owner, name string) demand.Repo { return demand.Repo{Host: "github.com", Owner: owner, Name: name} }
	tests := []struct {
		name   string
		scope  github.Scope
		active []demand.Repo
		recent []v1alpha1.RepositoryActivity
		want   []demand.Repo
	}{
		{"repository pool: its repository", repoScope, nil, nil, []demand.Repo{r("acme", "api")}},
		{"organization pool, just started: what its status remembers", org, nil,
			[]v1alpha1.RepositoryActivity{{Name: "acme/web"}, {Name: "Acme/Docs"}, {Name: "other/x"}},
			[]demand.Repo{r("acme", "web"), r("acme", "docs")}},
		{"organization pool: the Tracker's and the status's, once each", org,
			[]demand.Repo{r("acme", "web"), r("other", "y")},
			[]v1alpha1.RepositoryActivity{{Name: "acme/web"}, {Name: "acme/api"}},
			[]demand.Repo{r("acme", "web"), r("acme", "api")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, reposOf(tt.scope, tt.active, tt.recent)); diff != "" {
				t.Errorf("reposOf (-want +got):\n%s", diff)
			}
		})
	}
}
