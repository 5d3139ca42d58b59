package github

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestInstallationPermissions: an installation's token may call what its permissions
// allow and is refused, with GitHub's 403 and X-Accepted-GitHub-Permissions, what they
// do not; an installation created without permissions may call everything.
func TestInstallationPermissions(t *testing.T) {
	w := newWorld(t, worldOpts{})
	must(w.sim.CreateRepo(RepoSpec{Owner: "other", Name: "lib"}))
	limited := must(w.sim.CreateInstallation(InstallationSpec{AppID: w.app.ID, Org: "other", Permissions: map[string]string{
		PermOrgSelfHostedRunners: "read", PermActions: "read", PermMetadata: "read",
	}}))
	jwt := "Bearer " + w.appJWT(t, w.now().Add(-time.Minute), w.now().Add(5*time.Minute))
	resp := w.do(t, http.MethodPost, "/app/installations/"+itoa(limited.ID)+"/access_tokens", jwt, "")
	if resp.code != http.StatusCreated {
		t.Fatalf("access token: %d %s", resp.code, resp.body)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal(resp.body, &tok); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path, body string
		wantCode           int
		wantNeeds          string
	}{
		{http.MethodGet, "/orgs/other/actions/runner-groups", "", http.StatusOK, ""},
		{http.MethodGet, "/orgs/other/actions/runners", "", http.StatusOK, ""},
		{http.MethodPost, "/orgs/other/actions/runners/registration-token", "", http.StatusForbidden, "organization_self_hosted_runners=write"},
		{http.MethodPost, "/orgs/other/actions/runners/generate-jitconfig", `{"name":"r1","runner_group_id":1,"labels":["self-hosted"]}`, http.StatusForbidden, "organization_self_hosted_runners=write"},
		{http.MethodGet, "/repos/other/site/actions/runs?status=queued", "", http.StatusOK, ""},
		{http.MethodGet, "/repos/other/site/actions/runners", "", http.StatusForbidden, "administration=read"},
		{http.MethodPost, "/repos/other/site/actions/runners/registration-token", "", http.StatusForbidden, "administration=write"},
		{http.MethodGet, "/orgs/other/repos", "", http.StatusOK, ""},
	}
	for _, tt := range tests {
		r := w.do(t, tt.method, tt.path, "token "+tok.Token, tt.body)
		got := struct {
			Code  int
			Needs string
		}{r.code, r.header.Get("X-Accepted-GitHub-Permissions")}
		want := struct {
			Code  int
			Needs string
		}{tt.wantCode, tt.wantNeeds}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s %s with a token of an installation granted runners:read, actions:read, metadata:read (-want +got):\n%s\nbody %s", tt.method, tt.path, diff, r.body)
		}
	}
	// The world's installation was created without permissions: it may register.
	full := w.installationToken(t)
	if r := w.do(t, http.MethodPost, "/orgs/acme/actions/runners/registration-token", "token "+full, ""); r.code != http.StatusCreated {
		t.Errorf("registration token with an unrestricted installation: %d %s", r.code, r.body)
	}
	if _, err := w.sim.CreateInstallation(InstallationSpec{AppID: w.app.ID, Org: "acme", Permissions: map[string]string{"actions": "admin"}}); err == nil {
		t.Error("an installation with permission level \"admin\" was created")
	}
}
