package github

import (
	"crypto/rsa"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// scopeKind is the level a runner, a token or a runner group belongs to.
type scopeKind int

const (
	scopeRepo scopeKind = iota + 1
	scopeOrg
	scopeEnterprise
)

func (k scopeKind) String() string {
	switch k {
	case scopeRepo:
		return "repository"
	case scopeOrg:
		return "organization"
	case scopeEnterprise:
		return "enterprise"
	}
	return "unknown"
}

// runnerNameKey indexes runners by scope and lower-case name (names are unique in a scope).
type runnerNameKey struct {
	scope scopeKey
	name  string
}

// scopeKey identifies one repository, organization or enterprise.
type scopeKey struct {
	kind scopeKind
	id   int64
}

// state is the simulator's whole model. Everything in it is guarded by Sim.mu.
type state struct {
	nextID int64

	enterprises map[string]*enterprise // by lower-case slug
	orgs        map[string]*org        // by lower-case login
	orgsByID    map[int64]*org
	reposByID   map[int64]*repo
	apps        map[int64]*app
	installs    map[int64]*installation
	pats        map[string]*pat
	instTokens  map[string]*instToken
	regTokens   map[string]*regToken
	runners     map[int64]*runner
	runnerCreds map[string]*runner
	runnerNames map[runnerNameKey]*runner
	runs        map[int64]*workflowRun
	jobs        map[int64]*job
	jobOrder    []*job
	hooks       map[int64]*hook
	deliveries  map[int64]*delivery
	labelIDs    map[string]int64
	indexes     map[scopeKey]*scopeIndex
	actions     actionsState

	failWithoutRunner bool
}

func newState() *state {
	return &state{
		nextID:      1000,
		enterprises: map[string]*enterprise{},
		orgs:        map[string]*org{},
		orgsByID:    map[int64]*org{},
		reposByID:   map[int64]*repo{},
		apps:        map[int64]*app{},
		installs:    map[int64]*installation{},
		pats:        map[string]*pat{},
		instTokens:  map[string]*instToken{},
		regTokens:   map[string]*regToken{},
		runners:     map[int64]*runner{},
		runnerCreds: map[string]*runner{},
		runnerNames: map[runnerNameKey]*runner{},
		runs:        map[int64]*workflowRun{},
		jobs:        map[int64]*job{},
		hooks:       map[int64]*hook{},
		deliveries:  map[int64]*delivery{},
		labelIDs:    map[string]int64{},
		indexes:     map[scopeKey]*scopeIndex{},
		actions:     newActionsState(),
	}
}

func (st *state) newID() int64 {
	st.nextID++
	return st.nextID
}

type enterprise struct {
	id      int64
	slug    string
	name    string
	created time.Time
	orgs    []*org
	groups  map[int64]*runnerGroup
	runners map[int64]*runner
}

type org struct {
	id      int64
	login   string
	ent     *enterprise
	created time.Time
	repos   map[string]*repo // by lower-case name
	groups  map[int64]*runnerGroup
	runners map[int64]*runner
	hooks   []*hook
}

type repo struct {
	id      int64
	name    string
	org     *org
	private bool
	created time.Time
	runners map[int64]*runner
	hooks   []*hook
	runs    []*workflowRun
	runNum  int64
}

func (r *repo) fullName() string { return r.org.login + "/" + r.name }

type app struct {
	id       int64
	slug     string
	name     string
	clientID string
	key      *rsa.PublicKey
	owner    *org
	created  time.Time
	hook     *hook
}

type installation struct {
	id        int64
	app       *app
	org       *org
	selection string // all or selected
	repos     map[int64]bool
	created   time.Time
	rateLimit int
	// permissions granted (permissions.go); nil: all.
	permissions map[string]string
}

func (in *installation) covers(r *repo) bool {
	if r.org != in.org {
		return false
	}
	return in.selection == "all" || in.repos[r.id]
}

// PAT is a classic personal access token the simulator accepts.
type PAT struct {
	// Token is the secret, e.g. "ghp_…".
	Token string `json:"token"`
	// Login is the user the token belongs to (the sender of its actions).
	Login string `json:"login"`
	// Scopes are classic OAuth scopes: repo, admin:org, manage_runners:org,
	// manage_runners:enterprise, admin:enterprise, admin:org_hook, admin:repo_hook.
	Scopes []string `json:"scopes"`
	// RateLimit overrides the primary limit per hour for this token (0: default).
	RateLimit int `json:"rate_limit,omitempty"`
}

type pat struct {
	PAT
	id     int64
	scopes map[string]bool
}

func (st *state) addPAT(p PAT) *pat {
	if p.Login == "" {
		p.Login = "sim-user"
	}
	np := &pat{PAT: p, id: st.newID(), scopes: map[string]bool{}}
	for _, sc := range p.Scopes {
		np.scopes[strings.ToLower(sc)] = true
	}
	st.pats[p.Token] = np
	return np
}

type instToken struct {
	inst    *installation
	expires time.Time
}

type regToken struct {
	scope   scopeRef
	remove  bool
	expires time.Time
}

// scopeRef is a resolved scope; exactly the fields of its kind and above are set.
type scopeRef struct {
	kind scopeKind
	ent  *enterprise
	org  *org
	repo *repo
}

func (sc scopeRef) key() scopeKey {
	switch sc.kind {
	case scopeRepo:
		return scopeKey{scopeRepo, sc.repo.id}
	case scopeOrg:
		return scopeKey{scopeOrg, sc.org.id}
	default:
		return scopeKey{scopeEnterprise, sc.ent.id}
	}
}

func (sc scopeRef) runners() map[int64]*runner {
	switch sc.kind {
	case scopeRepo:
		return sc.repo.runners
	case scopeOrg:
		return sc.org.runners
	default:
		return sc.ent.runners
	}
}

func (sc scopeRef) groups() map[int64]*runnerGroup {
	switch sc.kind {
	case scopeOrg:
		return sc.org.groups
	case scopeEnterprise:
		return sc.ent.groups
	}
	return nil
}

// runnerGroup is an organization or enterprise runner group.
type runnerGroup struct {
	id           int64
	name         string
	scope        scopeKey
	visibility   string // all, selected or private
	repos        map[int64]bool
	orgs         map[int64]bool
	isDefault    bool
	allowsPublic bool
	runners      map[int64]*runner
}

// repoDefaultGroup is the pseudo group of repository runners.
var repoDefaultGroup = &runnerGroup{id: 1, name: "Default", visibility: "all", isDefault: true, allowsPublic: true}

// visibleTo reports whether a runner of the group may run a job of repository r.
func (g *runnerGroup) visibleTo(r *repo) bool {
	if g == repoDefaultGroup {
		return true
	}
	if !r.private && !g.allowsPublic {
		return false
	}
	switch g.scope.kind {
	case scopeEnterprise:
		return g.visibility == "all" || g.orgs[r.org.id]
	default:
		switch g.visibility {
		case "all":
			return true
		case "private":
			return r.private
		default:
			return g.repos[r.id]
		}
	}
}

// runner is a registered self-hosted runner.
type runner struct {
	id         int64
	name       string
	os         string
	labels     []string        // as registered, defaults first
	labelSet   map[string]bool // lower-case
	labelTypes map[string]string
	scope      scopeRef
	group      *runnerGroup
	ephemeral  bool
	credential string
	created    time.Time
	online     bool
	job        *job // assigned or running job
	removed    bool
	notify     chan struct{}
	// seen is the last time the runner called the runner API; polls counts its long
	// polls in flight. Both feed Options.RunnerLostTimeout.
	seen  time.Time
	polls int
	// scaleSet is the scale set of a runner made by its generatejitconfig: it takes
	// only that scale set's jobs.
	scaleSet *scaleSet
}

func (r *runner) busy() bool { return r.job != nil }

func (r *runner) idle() bool { return r.online && r.job == nil && !r.removed }

func (r *runner) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// workflowRun groups the jobs of one run (a matrix is one run with many jobs).
type workflowRun struct {
	id         int64
	number     int64
	repo       *repo
	name       string
	path       string
	workflowID int64
	headBranch string
	headSHA    string
	event      string
	actor      string
	created    time.Time
	updated    time.Time
	// jobs are every execution of its jobs, of every attempt, in the order they were
	// made; graph is its jobs' needs and its attempts (rerun_state.go).
	jobs  []*job
	graph *runGraph
}

// Job statuses and conclusions as GitHub spells them.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"

	ConclusionSuccess   = "success"
	ConclusionFailure   = "failure"
	ConclusionCancelled = "cancelled" //nolint:misspell // GitHub's spelling
	// ConclusionSkipped is a job's that never ran: a job it needs failed or was
	// skipped (rerun_state.go).
	ConclusionSkipped = "skipped"
)

// status is the run's status and conclusion in its latest attempt, as GitHub
// derives them from its jobs (runGraph.statusAt).
func (wr *workflowRun) status() (status, conclusion string) {
	return wr.graph.statusAt(wr.graph.attempt())
}

// job is one workflow job.
type job struct {
	id        int64
	run       *workflowRun
	name      string
	labels    []string
	lower     []string // lower-case, deduplicated, sorted
	labelKey  string
	duration  time.Duration
	conclude  string            // conclusion the runner reports
	container string            // the job container's image, "" for none
	services  map[string]string // service name → image
	// containerOptions: ports, credentials and container steps (nil: none).
	containerOptions *runnerapi.ContainerOptions
	status           string
	conclusion       string
	runner           *runner
	runnerID         int64
	runnerName       string
	groupID          int64
	groupName        string
	created          time.Time
	assigned         time.Time
	started          time.Time
	completed        time.Time
	events           []TimelineEvent
	ss               *ssJob // its life with a scale set; nil when none matched it
	// node is the job of the run's workflow it executes, attempt the run attempt it
	// belongs to (rerun_state.go).
	node    *graphNode
	attempt int
}

func (j *job) repo() *repo { return j.run.repo }

func normalizeLabels(labels []string) (lower []string, key string) {
	lower = make([]string, 0, len(labels))
	for _, l := range labels {
		l = strings.ToLower(strings.TrimSpace(l))
		if l != "" {
			lower = append(lower, l)
		}
	}
	slices.Sort(lower)
	lower = slices.Compact(lower)
	return lower, strings.Join(lower, "\x00")
}

func (st *state) labelID(name string) int64 {
	k := strings.ToLower(name)
	if id, ok := st.labelIDs[k]; ok {
		return id
	}
	id := int64(len(st.labelIDs) + 1)
	st.labelIDs[k] = id
	return id
}

// hook is a webhook of an organization, a repository or a GitHub App.
type hook struct {
	id         int64
	url        string
	secret     string
	events     map[string]bool
	org        *org
	repo       *repo
	app        *app
	deliveries []*delivery
	created    time.Time
}

func (h *hook) wants(event string) bool {
	return len(h.events) == 0 || h.events[event] || h.events["*"]
}
