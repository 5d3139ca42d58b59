package github

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// This file is the simulator's Go API. The admin HTTP API (admin.go) is a thin JSON
// layer over the same functions.

// Error is an error of the Go and admin APIs; Code is the HTTP status the admin API
// answers with.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(code int, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func fromAPI(e *apiError) error {
	if e == nil {
		return nil
	}
	msg := e.Message
	for _, fe := range e.Errors {
		msg += ": " + fe
	}
	return &Error{Code: e.code, Message: msg}
}

// EnterpriseSpec describes an enterprise to create.
type EnterpriseSpec struct {
	Slug string `json:"slug"`
	Name string `json:"name,omitempty"`
}

// Enterprise is a created enterprise. DefaultGroupID is its "Default" runner group.
type Enterprise struct {
	ID             int64  `json:"id"`
	Slug           string `json:"slug"`
	Name           string `json:"name"`
	DefaultGroupID int64  `json:"default_group_id"`
}

// OrgSpec describes an organization to create, optionally inside an enterprise.
type OrgSpec struct {
	Login      string `json:"login"`
	Enterprise string `json:"enterprise,omitempty"`
}

// Org is a created organization. Its "Default" runner group has ID 1, as on GitHub.
type Org struct {
	ID         int64  `json:"id"`
	Login      string `json:"login"`
	Enterprise string `json:"enterprise,omitempty"`
}

// RepoSpec describes a repository to create. Repositories are private unless Public:
// runner groups serve public repositories only when they allow it, as on GitHub.
type RepoSpec struct {
	Owner  string `json:"owner"`
	Name   string `json:"name"`
	Public bool   `json:"public,omitempty"`
}

// Repo is a created repository.
type Repo struct {
	ID       int64  `json:"id"`
	Owner    string `json:"owner"`
	Name     string `json:"name"`
	FullName string `json:"full_name"`
}

// AppSpec describes a GitHub App. Without PublicKeyPEM the simulator generates a key
// pair and returns the private key in App.PrivateKeyPEM. WebhookURL (with
// WebhookSecret) receives the events of the App's installations.
type AppSpec struct {
	Slug          string `json:"slug"`
	Name          string `json:"name,omitempty"`
	Owner         string `json:"owner"`
	PublicKeyPEM  string `json:"public_key_pem,omitempty"`
	WebhookURL    string `json:"webhook_url,omitempty"`
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// App is a created GitHub App.
type App struct {
	ID            int64  `json:"id"`
	Slug          string `json:"slug"`
	ClientID      string `json:"client_id"`
	PrivateKeyPEM string `json:"private_key_pem,omitempty"`
	HookID        int64  `json:"hook_id,omitempty"`
}

// String describes the App without its private key, so it is safe to log.
func (a App) String() string { return fmt.Sprintf("app %d (%s)", a.ID, a.Slug) }

// InstallationSpec installs an App on an organization: on all its repositories, or
// on the named ones.
type InstallationSpec struct {
	AppID        int64    `json:"app_id"`
	Org          string   `json:"org"`
	Repositories []string `json:"repositories,omitempty"`
	// RateLimit overrides the primary limit per hour of its tokens (0: default).
	RateLimit int `json:"rate_limit,omitempty"`
}

// Installation is a created installation.
type Installation struct {
	ID    int64  `json:"id"`
	AppID int64  `json:"app_id"`
	Org   string `json:"org"`
}

// HookSpec creates an organization hook (Org) or a repository hook (Repo, "owner/name").
type HookSpec struct {
	Org    string   `json:"org,omitempty"`
	Repo   string   `json:"repo,omitempty"`
	URL    string   `json:"url"`
	Secret string   `json:"secret,omitempty"`
	Events []string `json:"events,omitempty"`
}

// Hook is a created webhook.
type Hook struct {
	ID  int64  `json:"id"`
	URL string `json:"url"`
}

// RunnerGroupSpec creates a runner group of an organization (Org) or an enterprise
// (Enterprise). Visibility is all (default), selected (Repositories of the org, or
// Organizations of the enterprise) or private (private repositories only).
type RunnerGroupSpec struct {
	Org                      string   `json:"org,omitempty"`
	Enterprise               string   `json:"enterprise,omitempty"`
	Name                     string   `json:"name"`
	Visibility               string   `json:"visibility,omitempty"`
	Repositories             []string `json:"repositories,omitempty"`
	Organizations            []string `json:"organizations,omitempty"`
	AllowsPublicRepositories bool     `json:"allows_public_repositories,omitempty"`
}

// RunnerGroup is a created runner group.
type RunnerGroup struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// JobSpec queues one job. Without RunID it gets a workflow run of its own.
type JobSpec struct {
	// Repo is "owner/name".
	Repo string `json:"repo"`
	// Labels is the runs-on list (default ["self-hosted"]).
	Labels []string `json:"labels,omitempty"`
	// Duration is how long the runner runs the job.
	Duration Duration `json:"duration,omitempty"`
	Name     string   `json:"name,omitempty"`
	// RunID adds the job to an existing run of the same repository.
	RunID    int64  `json:"run_id,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Actor    string `json:"actor,omitempty"`
	// Conclusion is what the runner reports (default success).
	Conclusion string `json:"conclusion,omitempty"`
}

// RunSpec queues a workflow run: its Jobs, plus Matrix copies of Template named
// "<name> (i)" (a matrix build).
type RunSpec struct {
	Repo     string    `json:"repo"`
	Workflow string    `json:"workflow,omitempty"`
	Branch   string    `json:"branch,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	Jobs     []JobSpec `json:"jobs,omitempty"`
	Matrix   int       `json:"matrix,omitempty"`
	Template JobSpec   `json:"template"`
}

// Job is a job and its timeline.
type Job struct {
	ID         int64           `json:"id"`
	RunID      int64           `json:"run_id"`
	Repo       string          `json:"repo"`
	Name       string          `json:"name"`
	Labels     []string        `json:"labels"`
	Status     string          `json:"status"`
	Conclusion string          `json:"conclusion,omitempty"`
	RunnerID   int64           `json:"runner_id,omitempty"`
	RunnerName string          `json:"runner_name,omitempty"`
	Duration   Duration        `json:"duration"`
	QueuedAt   time.Time       `json:"queued_at"`
	AssignedAt *time.Time      `json:"assigned_at,omitempty"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	DoneAt     *time.Time      `json:"completed_at,omitempty"`
	Timeline   []TimelineEvent `json:"timeline"`
}

// Run is a queued workflow run.
type Run struct {
	ID   int64 `json:"id"`
	Jobs []Job `json:"jobs"`
}

// Runner is a registered runner as the simulator sees it.
type Runner struct {
	ID        int64    `json:"id"`
	Name      string   `json:"name"`
	Scope     string   `json:"scope"`
	GroupID   int64    `json:"group_id"`
	Labels    []string `json:"labels"`
	Online    bool     `json:"online"`
	Busy      bool     `json:"busy"`
	Ephemeral bool     `json:"ephemeral"`
	JobID     int64    `json:"job_id,omitempty"`
}

// Delivery is one webhook delivery attempt.
type Delivery struct {
	ID         int64  `json:"id"`
	GUID       string `json:"guid"`
	HookID     int64  `json:"hook_id"`
	Event      string `json:"event"`
	Action     string `json:"action"`
	JobID      int64  `json:"job_id,omitempty"`
	Redelivery bool   `json:"redelivery"`
	Done       bool   `json:"done"`
	StatusCode int    `json:"status_code"`
	Status     string `json:"status"`
}

// Summary counts the simulator's objects.
type Summary struct {
	Enterprises   int            `json:"enterprises"`
	Orgs          int            `json:"orgs"`
	Repos         int            `json:"repos"`
	Apps          int            `json:"apps"`
	Installations int            `json:"installations"`
	Runners       int            `json:"runners"`
	RunnersOnline int            `json:"runners_online"`
	RunnersBusy   int            `json:"runners_busy"`
	Jobs          map[string]int `json:"jobs"`
	Deliveries    int            `json:"deliveries"`
}

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
	in := &installation{id: s.st.newID(), app: a, org: o, selection: "all", repos: map[int64]bool{}, created: s.now(), rateLimit: spec.RateLimit}
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

// QueueJob queues one job.
func (s *Sim) QueueJob(spec JobSpec) (Job, error) {
	s.lock()
	defer s.unlock()
	var wr *workflowRun
	if spec.RunID != 0 {
		wr = s.st.runs[spec.RunID]
		if wr == nil || !strings.EqualFold(wr.repo.fullName(), spec.Repo) {
			return Job{}, errorf(http.StatusNotFound, "run %d of %s not found", spec.RunID, spec.Repo)
		}
	} else {
		r := s.st.repoByName(spec.Repo)
		if r == nil {
			return Job{}, errorf(http.StatusNotFound, "repository %q not found", spec.Repo)
		}
		wr = s.newRunLocked(r, spec.Workflow, spec.Branch, spec.Actor)
	}
	j, err := s.newJobLocked(wr, spec)
	if err != nil {
		return Job{}, err
	}
	s.enqueueLocked(j)
	return jobView(j), nil
}

// QueueRun queues a workflow run with its jobs (and matrix).
func (s *Sim) QueueRun(spec RunSpec) (Run, error) {
	if spec.Matrix < 0 || spec.Matrix > 256 {
		return Run{}, errorf(http.StatusUnprocessableEntity, "a matrix has at most 256 jobs")
	}
	specs := slices.Clone(spec.Jobs)
	for i := range spec.Matrix {
		js := spec.Template
		name := js.Name
		if name == "" {
			name = "build"
		}
		js.Name = fmt.Sprintf("%s (%d)", name, i+1)
		specs = append(specs, js)
	}
	if len(specs) == 0 {
		return Run{}, errorf(http.StatusUnprocessableEntity, "a run needs at least one job")
	}
	s.lock()
	defer s.unlock()
	r := s.st.repoByName(spec.Repo)
	if r == nil {
		return Run{}, errorf(http.StatusNotFound, "repository %q not found", spec.Repo)
	}
	wr := s.newRunLocked(r, spec.Workflow, spec.Branch, spec.Actor)
	jobs := make([]*job, 0, len(specs))
	for _, js := range specs {
		j, err := s.newJobLocked(wr, js)
		if err != nil {
			return Run{}, err
		}
		jobs = append(jobs, j)
	}
	out := Run{ID: wr.id}
	for _, j := range jobs {
		s.enqueueLocked(j)
	}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, jobView(j))
	}
	return out, nil
}

func (s *Sim) newRunLocked(r *repo, workflow, branch, actor string) *workflowRun {
	if workflow == "" {
		workflow = "CI"
	}
	if branch == "" {
		branch = "main"
	}
	if actor == "" {
		actor = "sim-user"
	}
	r.runNum++
	now := s.now()
	wr := &workflowRun{id: s.st.newID(), number: r.runNum, repo: r, name: workflow,
		path:       ".github/workflows/" + strings.ToLower(strings.ReplaceAll(workflow, " ", "-")) + ".yml",
		workflowID: int64(len(workflow)) + 100, headBranch: branch, event: "push", actor: actor, created: now, updated: now}
	wr.headSHA = fmt.Sprintf("%040x", wr.id)
	r.runs = append(r.runs, wr)
	s.st.runs[wr.id] = wr
	return wr
}

func (s *Sim) newJobLocked(wr *workflowRun, spec JobSpec) (*job, error) {
	labels := spec.Labels
	if len(labels) == 0 {
		labels = []string{LabelSelfHosted}
	}
	lower, key := normalizeLabels(labels)
	if len(lower) == 0 {
		return nil, errorf(http.StatusUnprocessableEntity, "a job needs at least one non-empty label")
	}
	concl := spec.Conclusion
	if e := validConclusion(&concl); e != nil {
		return nil, fromAPI(e)
	}
	if spec.Duration < 0 {
		return nil, errorf(http.StatusUnprocessableEntity, "duration must not be negative")
	}
	name := spec.Name
	if name == "" {
		name = "build"
	}
	j := &job{id: s.st.newID(), run: wr, name: name, labels: slices.Clone(labels), lower: lower, labelKey: key,
		duration: time.Duration(spec.Duration), conclude: concl, status: StatusQueued, created: s.now()}
	wr.jobs = append(wr.jobs, j)
	s.st.jobs[j.id] = j
	s.st.jobOrder = append(s.st.jobOrder, j)
	return j, nil
}

func jobView(j *job) Job {
	v := Job{ID: j.id, RunID: j.run.id, Repo: j.repo().fullName(), Name: j.name, Labels: slices.Clone(j.labels),
		Status: j.status, Conclusion: j.conclusion, RunnerID: j.runnerID, RunnerName: j.runnerName,
		Duration: Duration(j.duration), QueuedAt: j.created, Timeline: slices.Clone(j.events)}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	v.AssignedAt, v.StartedAt, v.DoneAt = at(j.assigned), at(j.started), at(j.completed)
	return v
}

// Job returns a job and its timeline.
func (s *Sim) Job(id int64) (Job, bool) {
	s.lock()
	defer s.unlock()
	j := s.st.jobs[id]
	if j == nil {
		return Job{}, false
	}
	return jobView(j), true
}

// Jobs returns every job in the order they were queued.
func (s *Sim) Jobs() []Job {
	s.lock()
	defer s.unlock()
	out := make([]Job, 0, len(s.st.jobOrder))
	for _, j := range s.st.jobOrder {
		out = append(out, jobView(j))
	}
	return out
}

// Runners returns every registered runner, by ID.
func (s *Sim) Runners() []Runner {
	s.lock()
	defer s.unlock()
	out := make([]Runner, 0, len(s.st.runners))
	for _, r := range s.st.runners {
		v := Runner{ID: r.id, Name: r.name, Scope: r.scope.path(), GroupID: r.group.id, Labels: slices.Clone(r.labels),
			Online: r.online, Busy: r.busy(), Ephemeral: r.ephemeral}
		if r.job != nil {
			v.JobID = r.job.id
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// JITSpec asks for a JIT runner through the Go API, as generate-jitconfig does. Scope
// is "owner/repo", "org" or "enterprises/slug".
type JITSpec struct {
	Scope   string   `json:"scope"`
	Name    string   `json:"name"`
	Labels  []string `json:"labels"`
	GroupID int64    `json:"runner_group_id"`
}

// GenerateJITConfig registers an ephemeral runner and returns its config, as the
// REST endpoint does; the runner's URL is Options.URL or the last request's root.
func (s *Sim) GenerateJITConfig(spec JITSpec) (runnerapi.Config, error) {
	req := jitRequest{Name: spec.Name, Labels: spec.Labels, RunnerGroupID: &spec.GroupID}
	if spec.GroupID == 0 {
		one := int64(1)
		req.RunnerGroupID = &one
	}
	if e := req.validate(); e != nil {
		return runnerapi.Config{}, fromAPI(e)
	}
	s.lock()
	defer s.unlock()
	sc, ok := s.st.resolveSpec(spec.Scope)
	if !ok {
		return runnerapi.Config{}, errorf(http.StatusNotFound, "scope %q not found", spec.Scope)
	}
	g, e := s.st.groupByID(sc, *req.RunnerGroupID)
	if e != nil {
		return runnerapi.Config{}, fromAPI(e)
	}
	r, e := s.registerRunnerLocked(sc, registration{name: req.Name, labels: req.Labels, group: g, ephemeral: true, defaults: true})
	if e != nil {
		return runnerapi.Config{}, fromAPI(e)
	}
	return s.runnerConfig(s.publicURL(), r), nil
}

// resolveSpec resolves "owner/repo", "org" or "enterprises/slug".
func (st *state) resolveSpec(spec string) (scopeRef, bool) {
	if slug, ok := strings.CutPrefix(spec, "enterprises/"); ok {
		return st.resolve(scopeEnterprise, slug, "", "", "")
	}
	if owner, name, ok := strings.Cut(spec, "/"); ok {
		return st.resolve(scopeRepo, "", "", owner, name)
	}
	return st.resolve(scopeOrg, "", spec, "", "")
}

// Deliveries returns every webhook delivery attempt, oldest first.
func (s *Sim) Deliveries() []Delivery {
	s.lock()
	defer s.unlock()
	out := make([]Delivery, 0, len(s.st.deliveries))
	for _, d := range s.st.deliveries {
		out = append(out, Delivery{ID: d.id, GUID: d.guid, HookID: d.hook.id, Event: d.event, Action: d.action,
			Redelivery: d.redelivery, Done: d.done, StatusCode: d.statusCode, Status: d.status})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Summary counts the simulator's objects.
func (s *Sim) Summary() Summary {
	s.lock()
	defer s.unlock()
	sum := Summary{Enterprises: len(s.st.enterprises), Orgs: len(s.st.orgs), Repos: len(s.st.reposByID),
		Apps: len(s.st.apps), Installations: len(s.st.installs), Runners: len(s.st.runners),
		Deliveries: len(s.st.deliveries), Jobs: map[string]int{}}
	for _, r := range s.st.runners {
		if r.online {
			sum.RunnersOnline++
		}
		if r.busy() {
			sum.RunnersBusy++
		}
	}
	for _, j := range s.st.jobOrder {
		sum.Jobs[j.status]++
	}
	return sum
}

// CallCounts returns how often each REST route was called ("METHOD /pattern"; calls
// that matched no route count under "unmatched").
func (s *Sim) CallCounts() map[string]CallCount { return s.calls.snapshot() }

// ResetCallCounts zeroes the call counts.
func (s *Sim) ResetCallCounts() { s.calls.reset() }

// SetFaults replaces the fault-injection settings and reseeds their random source.
func (s *Sim) SetFaults(f Faults) { s.faults.set(f) }

// Faults returns the fault-injection settings.
func (s *Sim) Faults() Faults { return s.faults.get() }

// SetRateLimits replaces the rate-limit settings and starts every window afresh.
func (s *Sim) SetRateLimits(rl RateLimits) { s.rl.set(rl) }

// RateLimits returns the rate-limit settings, defaults filled in.
func (s *Sim) RateLimits() RateLimits { return s.rl.config() }

// SetFailJobsWithoutRunner sets the switch that fails a newly queued job at once when
// no registered runner in scope could ever take it.
func (s *Sim) SetFailJobsWithoutRunner(on bool) {
	s.lock()
	defer s.unlock()
	s.st.failWithoutRunner = on
}
