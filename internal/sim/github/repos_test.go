package github

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestListOrgRepos(t *testing.T) {
	w := newWorld(t, worldOpts{})
	must(w.sim.CreateRepo(RepoSpec{Owner: "acme", Name: "site", Public: true}))
	names := func(auth string) []string {
		t.Helper()
		resp := w.do(t, http.MethodGet, "/orgs/acme/repos?per_page=100", auth, "")
		if resp.code != http.StatusOK {
			t.Fatalf("GET /orgs/acme/repos: %d %s", resp.code, resp.body)
		}
		var repos []struct{ Name string }
		if err := json.Unmarshal(resp.body, &repos); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range repos {
			out = append(out, r.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"app", "lib", "site"}, names("token "+testPAT)); diff != "" {
		t.Errorf("repos seen by a PAT with repo scope (-want +got):\n%s", diff)
	}
	const viewer = "ghp_testtokenwithoutreposcope00000000000"
	if err := w.sim.AddPAT(PAT{Token: viewer, Login: "viewer", Scopes: []string{"read:org"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"site"}, names("token "+viewer)); diff != "" {
		t.Errorf("repos seen by a PAT without repo scope (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"app", "lib", "site"}, names("token "+w.installationToken(t))); diff != "" {
		t.Errorf("repos seen by an installation on all repositories (-want +got):\n%s", diff)
	}
}

func TestCreatedFilter(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	day := "2026-03-10"
	tests := []struct {
		filter string
		in     []string
		out    []string
	}{
		{">=" + day, []string{"2026-03-10T00:00:00Z"}, []string{"2026-03-09T23:59:59Z"}},
		{">" + day, []string{"2026-03-11T00:00:00Z"}, []string{"2026-03-10T23:00:00Z"}},
		{"<" + day, []string{"2026-03-09T23:59:59Z"}, []string{"2026-03-10T00:00:00Z"}},
		{"<=" + day, []string{"2026-03-10T23:59:59Z"}, []string{"2026-03-11T00:00:00Z"}},
		{day, []string{"2026-03-10T12:00:00Z"}, []string{"2026-03-11T00:00:00Z", "2026-03-09T12:00:00Z"}},
		{"2026-03-09..2026-03-10", []string{"2026-03-09T00:00:00Z", "2026-03-10T23:59:59Z"}, []string{"2026-03-11T00:00:00Z"}},
		{">=2026-03-10T12:00:00Z", []string{"2026-03-10T12:00:00Z"}, []string{"2026-03-10T11:59:59Z"}},
	}
	for _, tc := range tests {
		match, ok := createdFilter(tc.filter)
		if !ok {
			t.Errorf("createdFilter(%q) refused", tc.filter)
			continue
		}
		for _, s := range tc.in {
			if !match(at(s)) {
				t.Errorf("created=%s excludes %s", tc.filter, s)
			}
		}
		for _, s := range tc.out {
			if match(at(s)) {
				t.Errorf("created=%s includes %s", tc.filter, s)
			}
		}
	}
	for _, bad := range []string{"", "yesterday", ">=2026-13-01", "2026-03-01.."} {
		if _, ok := createdFilter(bad); ok {
			t.Errorf("createdFilter(%q) accepted", bad)
		}
	}
}
