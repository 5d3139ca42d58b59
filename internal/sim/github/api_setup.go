// Go API: creating enterprises, organizations, repositories, Apps, installations,
// PATs, hooks and runner groups.

package github

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
)

// CreateEnterprise creates an enterprise with its Default runner group.
func (s *Sim) CreateEnterprise(spec EnterpriseSpec) (Enterprise, error) {
	if !validName(spec.Slug) {
		return Enterprise{}, errorf(http.StatusUnprocessableEntity, "invalid enterprise slug %q", spec.Slug)
	}
	s.lock()
	defer s.unlock()
	k := strings.ToLower(spec.Slug)
	if s.st.enterprises[k] != nil {
		return Enterprise{}, errorf(http.StatusConflict, "enterprise %q exists", spec.Slug)
	}
	if spec.Name == "" {
		spec.Name = spec.Slug
	}
	e := &enterprise{id: s.st.newID(), slug: spec.Slug, name: spec.Name, created: s.now(),
		groups: map[int64]*runnerGroup{}, runners: map[int64]*runner{}}
	g := &runnerGroup{id: s.st.newID(), name: "Default", scope: scopeKey{scopeEnterprise, e.id}, visibility: "all",
		isDefault: true, allowsPublic: false, orgs: map[int64]bool{}, runners: map[int64]*runner{}}
	e.groups[g.id] = g
	s.st.enterprises[k] = e
	return Enterprise{ID: e.id, Slug: e.slug, Name: e.name, DefaultGroupID: g.id}, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, c := range s {
		if c != '-' && c != '_' && c != '.' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// CreateOrg creates an organization with its Default runner group (ID 1).
func (s *Sim) CreateOrg(spec OrgSpec) (Org, error) {
	if !validName(spec.Login) {
		return Org{}, errorf(http.StatusUnprocessableEntity, "invalid organization login %q", spec.Login)
	}
	s.lock()
	defer s.unlock()
	k := strings.ToLower(spec.Login)
	if s.st.orgs[k] != nil {
		return Org{}, errorf(http.StatusConflict, "organization %q exists", spec.Login)
	}
	o := &org{id: s.st.newID(), login: spec.Login, created: s.now(), repos: map[string]*repo{},
		groups: map[int64]*runnerGroup{}, runners: map[int64]*runner{}}
	if spec.Enterprise != "" {
		e := s.st.enterprises[strings.ToLower(spec.Enterprise)]
		if e == nil {
			return Org{}, errorf(http.StatusNotFound, "enterprise %q not found", spec.Enterprise)
		}
		o.ent = e
		e.orgs = append(e.orgs, o)
	}
	o.groups[1] = &runnerGroup{id: 1, name: "Default", scope: scopeKey{scopeOrg, o.id}, visibility: "all",
		isDefault: true, allowsPublic: false, repos: map[int64]bool{}, runners: map[int64]*runner{}}
	s.st.orgs[k] = o
	s.st.orgsByID[o.id] = o
	return Org{ID: o.id, Login: o.login, Enterprise: spec.Enterprise}, nil
}

// CreateRepo creates a repository in an organization.
func (s *Sim) CreateRepo(spec RepoSpec) (Repo, error) {
	if !validName(spec.Name) {
		return Repo{}, errorf(http.StatusUnprocessableEntity, "invalid repository name %q", spec.Name)
	}
	s.lock()
	defer s.unlock()
	o := s.st.orgs[strings.ToLower(spec.Owner)]
	if o == nil {
		return Repo{}, errorf(http.StatusNotFound, "organization %q not found", spec.Owner)
	}
	k := strings.ToLower(spec.Name)
	if o.repos[k] != nil {
		return Repo{}, errorf(http.StatusConflict, "repository %s/%s exists", spec.Owner, spec.Name)
	}
	r := &repo{id: s.st.newID(), name: spec.Name, org: o, private: !spec.Public, created: s.now(), runners: map[int64]*runner{}}
	o.repos[k] = r
	s.st.reposByID[r.id] = r
	return Repo{ID: r.id, Owner: o.login, Name: r.name, FullName: r.fullName()}, nil
}

// CreateApp registers a GitHub App.
func (s *Sim) CreateApp(spec AppSpec) (App, error) {
	if !validName(spec.Slug) {
		return App{}, errorf(http.StatusUnprocessableEntity, "invalid app slug %q", spec.Slug)
	}
	var out App
	var pub *rsa.PublicKey
	if spec.PublicKeyPEM != "" {
		k, err := parsePublicKey([]byte(spec.PublicKeyPEM))
		if err != nil {
			return App{}, errorf(http.StatusUnprocessableEntity, "%v", err)
		}
		pub = k
	} else {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return App{}, fmt.Errorf("generating the App's key: %w", err)
		}
		pub = &key.PublicKey
		out.PrivateKeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	}
	s.lock()
	defer s.unlock()
	o := s.st.orgs[strings.ToLower(spec.Owner)]
	if o == nil {
		return App{}, errorf(http.StatusNotFound, "organization %q not found", spec.Owner)
	}
	for _, a := range s.st.apps {
		if strings.EqualFold(a.slug, spec.Slug) {
			return App{}, errorf(http.StatusConflict, "app %q exists", spec.Slug)
		}
	}
	if spec.Name == "" {
		spec.Name = spec.Slug
	}
	a := &app{id: s.st.newID(), slug: spec.Slug, name: spec.Name, key: pub, owner: o, created: s.now()}
	a.clientID = "Iv1." + randomToken("", 16, false)
	if spec.WebhookURL != "" {
		a.hook = &hook{id: s.st.newID(), url: spec.WebhookURL, secret: spec.WebhookSecret, app: a, created: s.now()}
		s.st.hooks[a.hook.id] = a.hook
		out.HookID = a.hook.id
	}
	s.st.apps[a.id] = a
	out.ID, out.Slug, out.ClientID = a.id, a.slug, a.clientID
	return out, nil
}

// SetAppWebhook sets a GitHub App's webhook (its URL and secret), as its owner does on
// the App's settings page: the App's installations' events go there from now on.
func (s *Sim) SetAppWebhook(appID int64, url, secret string) (hookID int64, err error) {
	if url == "" {
		return 0, errorf(http.StatusUnprocessableEntity, "url is required")
	}
	s.lock()
	defer s.unlock()
	a := s.st.apps[appID]
	if a == nil {
		return 0, errorf(http.StatusNotFound, "app %d not found", appID)
	}
	if a.hook == nil {
		a.hook = &hook{id: s.st.newID(), app: a, created: s.now()}
		s.st.hooks[a.hook.id] = a.hook
	}
	a.hook.url, a.hook.secret = url, secret
	return a.hook.id, nil
}

// CreateInstallation installs an App on an organization.
func (s *Sim) CreateInstallation(spec InstallationSpec) (Installation, error) {
	s.lock()
	defer s.unlock()
	a := s.st.apps[spec.AppID]
	if a == nil {
		return Installation{}, errorf(http.StatusNotFound, "app %d not found", spec.AppID)
	}
	o := s.st.orgs[strings.ToLower(spec.Org)]
	if o == nil {
		return Installation{}, errorf(http.StatusNotFound, "organization %q not found", spec.Org)
	}
	for _, in := range s.st.installs {
		if in.app == a && in.org == o {
			return Installation{}, errorf(http.StatusConflict, "app %d is already installed on %s", a.id, o.login)
		}
	}
	if err := validatePermissions(spec.Permissions); err != nil {
		return Installation{}, errorf(http.StatusUnprocessableEntity, "%v", err)
	}
	in := &installation{id: s.st.newID(), app: a, org: o, selection: "all", repos: map[int64]bool{}, created: s.now(), rateLimit: spec.RateLimit,
		permissions: grantedPermissions(spec.Permissions)}
	if len(spec.Repositories) > 0 {
		in.selection = "selected"
		for _, name := range spec.Repositories {
			r := o.repos[strings.ToLower(name)]
			if r == nil {
				return Installation{}, errorf(http.StatusNotFound, "repository %s/%s not found", o.login, name)
			}
			in.repos[r.id] = true
		}
	}
	s.st.installs[in.id] = in
	return Installation{ID: in.id, AppID: a.id, Org: o.login}, nil
}

// AddPAT adds a personal access token.
func (s *Sim) AddPAT(p PAT) error {
	if p.Token == "" {
		return errorf(http.StatusUnprocessableEntity, "token is required")
	}
	s.lock()
	defer s.unlock()
	s.st.addPAT(p)
	return nil
}

// CreateHook creates an organization or repository webhook.
func (s *Sim) CreateHook(spec HookSpec) (Hook, error) {
	if spec.URL == "" {
		return Hook{}, errorf(http.StatusUnprocessableEntity, "url is required")
	}
	s.lock()
	defer s.unlock()
	h := &hook{url: spec.URL, secret: spec.Secret, events: map[string]bool{}, created: s.now()}
	for _, e := range spec.Events {
		h.events[e] = true
	}
	switch {
	case spec.Repo != "":
		r := s.st.repoByName(spec.Repo)
		if r == nil {
			return Hook{}, errorf(http.StatusNotFound, "repository %q not found", spec.Repo)
		}
		h.repo = r
		r.hooks = append(r.hooks, h)
	case spec.Org != "":
		o := s.st.orgs[strings.ToLower(spec.Org)]
		if o == nil {
			return Hook{}, errorf(http.StatusNotFound, "organization %q not found", spec.Org)
		}
		h.org = o
		o.hooks = append(o.hooks, h)
	default:
		return Hook{}, errorf(http.StatusUnprocessableEntity, "org or repo is required")
	}
	h.id = s.st.newID()
	s.st.hooks[h.id] = h
	return Hook{ID: h.id, URL: h.url}, nil
}

func (st *state) repoByName(full string) *repo {
	owner, name, ok := strings.Cut(full, "/")
	if !ok {
		return nil
	}
	o := st.orgs[strings.ToLower(owner)]
	if o == nil {
		return nil
	}
	return o.repos[strings.ToLower(name)]
}

// CreateRunnerGroup creates an organization or enterprise runner group.
func (s *Sim) CreateRunnerGroup(spec RunnerGroupSpec) (RunnerGroup, error) {
	if strings.TrimSpace(spec.Name) == "" {
		return RunnerGroup{}, errorf(http.StatusUnprocessableEntity, "name is required")
	}
	if spec.Visibility == "" {
		spec.Visibility = "all"
	}
	if spec.Visibility != "all" && spec.Visibility != "selected" && spec.Visibility != "private" {
		return RunnerGroup{}, errorf(http.StatusUnprocessableEntity, "visibility must be all, selected or private")
	}
	s.lock()
	defer s.unlock()
	g := &runnerGroup{name: spec.Name, visibility: spec.Visibility, allowsPublic: spec.AllowsPublicRepositories,
		repos: map[int64]bool{}, orgs: map[int64]bool{}, runners: map[int64]*runner{}}
	var groups map[int64]*runnerGroup
	switch {
	case spec.Org != "":
		o := s.st.orgs[strings.ToLower(spec.Org)]
		if o == nil {
			return RunnerGroup{}, errorf(http.StatusNotFound, "organization %q not found", spec.Org)
		}
		g.scope, groups = scopeKey{scopeOrg, o.id}, o.groups
		for _, name := range spec.Repositories {
			r := o.repos[strings.ToLower(name)]
			if r == nil {
				return RunnerGroup{}, errorf(http.StatusNotFound, "repository %s/%s not found", o.login, name)
			}
			g.repos[r.id] = true
		}
	case spec.Enterprise != "":
		e := s.st.enterprises[strings.ToLower(spec.Enterprise)]
		if e == nil {
			return RunnerGroup{}, errorf(http.StatusNotFound, "enterprise %q not found", spec.Enterprise)
		}
		if spec.Visibility == "private" {
			return RunnerGroup{}, errorf(http.StatusUnprocessableEntity, "enterprise groups are visible to all or selected organizations")
		}
		g.scope, groups = scopeKey{scopeEnterprise, e.id}, e.groups
		for _, name := range spec.Organizations {
			o := s.st.orgs[strings.ToLower(name)]
			if o == nil || o.ent != e {
				return RunnerGroup{}, errorf(http.StatusNotFound, "organization %q not found in %s", name, e.slug)
			}
			g.orgs[o.id] = true
		}
	default:
		return RunnerGroup{}, errorf(http.StatusUnprocessableEntity, "org or enterprise is required")
	}
	for _, other := range groups {
		if strings.EqualFold(other.name, spec.Name) {
			return RunnerGroup{}, errorf(http.StatusConflict, "runner group %q exists", spec.Name)
		}
	}
	g.id = s.st.newID()
	groups[g.id] = g
	return RunnerGroup{ID: g.id, Name: g.name}, nil
}
