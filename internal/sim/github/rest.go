package github

import (
	"context"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CallCount is how often one REST route was called, by answer status.
type CallCount struct {
	Total    int64         `json:"total"`
	ByStatus map[int]int64 `json:"by_status"`
}

// routeUnmatched keys the calls that matched no route.
const routeUnmatched = "unmatched"

type callCounter struct {
	mu sync.Mutex
	m  map[string]*CallCount
}

func (cc *callCounter) init() { cc.m = map[string]*CallCount{} }

func (cc *callCounter) add(id string, status int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	c := cc.m[id]
	if c == nil {
		c = &CallCount{ByStatus: map[int]int64{}}
		cc.m[id] = c
	}
	c.Total++
	c.ByStatus[status]++
}

func (cc *callCounter) snapshot() map[string]CallCount {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := make(map[string]CallCount, len(cc.m))
	for k, v := range cc.m {
		by := make(map[int]int64, len(v.ByStatus))
		for s, n := range v.ByStatus {
			by[s] = n
		}
		out[k] = CallCount{Total: v.Total, ByStatus: by}
	}
	return out
}

func (cc *callCounter) reset() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.m = map[string]*CallCount{}
}

// statusWriter records the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (s *Sim) serveREST(w http.ResponseWriter, r *http.Request, path, root string, ghes bool) {
	sw := &statusWriter{ResponseWriter: w}
	h := w.Header()
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	h.Set("X-GitHub-Request-Id", randomToken("", 16, true))
	c := &call{s: s, w: sw, r: r, ghes: ghes, u: urls{api: root, html: strings.TrimSuffix(root, "/api/v3")}}
	rt, n := s.routes.match(r.Method, path, &c.params)
	if rt == nil {
		writeError(sw, http.StatusNotFound, msgNotFound)
		s.calls.add(routeUnmatched, sw.status)
		return
	}
	c.route, c.nparam = rt, n
	s.serveRoute(c)
	s.calls.add(rt.id, sw.status)
}

func (s *Sim) serveRoute(c *call) {
	if latency, status := s.faults.endpoint(c.route.id); latency > 0 || status != 0 {
		if latency > 0 && !sleepCtx(c.r.Context(), latency) {
			writeError(c.w, http.StatusServiceUnavailable, msgServerError)
			return
		}
		if status != 0 {
			writeError(c.w, status, msgServerError)
			return
		}
	}
	cred, aerr := s.authenticate(c.r, c.route.auth)
	sub := rateSubject{key: "ip:" + clientIP(c.r), kind: credNone}
	if cred != nil {
		sub = rateSubject{key: cred.rateKey, kind: cred.kind, limit: cred.rateLimit}
		if cred.kind == credPAT {
			c.w.Header().Set("X-OAuth-Scopes", strings.Join(cred.pat.Scopes, ", "))
			c.w.Header().Set("X-Accepted-OAuth-Scopes", strings.Join(c.route.scopes, ", "))
		}
	}
	release, rerr := s.rl.admit(c.w.Header(), sub, c.route, s.now(), c.route.pattern != "/rate_limit")
	if aerr != nil {
		if release != nil {
			release()
		}
		aerr.write(c.w)
		return
	}
	if rerr != nil {
		rerr.write(c.w)
		return
	}
	defer release()
	c.cred = cred
	if e := c.route.handler(c); e != nil {
		e.write(c.w)
	}
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// sleepCtx waits d of real time (fault latency is network time), or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type restScope struct {
	prefix string
	kind   scopeKind
	scopes []string
}

var restScopes = []restScope{
	{"/repos/{owner}/{repo}", scopeRepo, []string{"repo"}},
	{"/orgs/{org}", scopeOrg, []string{"admin:org", "manage_runners:org"}},
	{"/enterprises/{enterprise}", scopeEnterprise, []string{"manage_runners:enterprise", "admin:enterprise"}},
}

func newRouter(s *Sim) *router {
	rt := &router{bySegs: map[int][]*route{}}
	for _, sc := range restScopes {
		p, k, scopes := sc.prefix+"/actions/runners", sc.kind, sc.scopes
		rt.add(http.MethodPost, p+"/registration-token", authToken, scopes, s.hToken(k, false))
		rt.add(http.MethodPost, p+"/remove-token", authToken, scopes, s.hToken(k, true))
		rt.add(http.MethodPost, p+"/generate-jitconfig", authToken, scopes, s.hGenerateJIT(k))
		rt.add(http.MethodGet, p, authToken, scopes, s.hListRunners(k))
		rt.add(http.MethodGet, p+"/{runner_id}", authToken, scopes, s.hGetRunner(k))
		rt.add(http.MethodDelete, p+"/{runner_id}", authToken, scopes, s.hDeleteRunner(k))
		if k != scopeRepo {
			rt.add(http.MethodGet, sc.prefix+"/actions/runner-groups", authToken, scopes, s.hListGroups(k))
			rt.add(http.MethodGet, sc.prefix+"/actions/runner-groups/{runner_group_id}", authToken, scopes, s.hGetGroup(k))
		}
	}
	repoScopes := []string{"repo"}
	rt.add(http.MethodGet, "/orgs/{org}/repos", authToken, nil, s.hListOrgRepos)
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/actions/runs", authToken, repoScopes, s.hListRuns)
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/actions/runs/{run_id}", authToken, repoScopes, s.hGetRun)
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs", authToken, repoScopes, s.hListRunJobs)
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/actions/jobs/{job_id}", authToken, repoScopes, s.hGetJob)

	orgHook := []string{"admin:org_hook"}
	repoHook := []string{"admin:repo_hook", "repo"}
	rt.add(http.MethodGet, "/orgs/{org}/hooks/{hook_id}/deliveries", authToken, orgHook, s.hListDeliveries(scopeOrg))
	rt.add(http.MethodGet, "/orgs/{org}/hooks/{hook_id}/deliveries/{delivery_id}", authToken, orgHook, s.hGetDelivery(scopeOrg))
	rt.add(http.MethodPost, "/orgs/{org}/hooks/{hook_id}/deliveries/{delivery_id}/attempts", authToken, orgHook, s.hRedeliver(scopeOrg))
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries", authToken, repoHook, s.hListDeliveries(scopeRepo))
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries/{delivery_id}", authToken, repoHook, s.hGetDelivery(scopeRepo))
	rt.add(http.MethodPost, "/repos/{owner}/{repo}/hooks/{hook_id}/deliveries/{delivery_id}/attempts", authToken, repoHook, s.hRedeliver(scopeRepo))
	rt.add(http.MethodGet, "/app/hook/deliveries", authApp, nil, s.hListDeliveries(0))
	rt.add(http.MethodGet, "/app/hook/deliveries/{delivery_id}", authApp, nil, s.hGetDelivery(0))
	rt.add(http.MethodPost, "/app/hook/deliveries/{delivery_id}/attempts", authApp, nil, s.hRedeliver(0))

	rt.add(http.MethodGet, "/app", authApp, nil, s.hGetApp)
	rt.add(http.MethodGet, "/app/installations", authApp, nil, s.hListInstallations)
	rt.add(http.MethodGet, "/app/installations/{installation_id}", authApp, nil, s.hGetInstallation)
	rt.add(http.MethodPost, "/app/installations/{installation_id}/access_tokens", authApp, nil, s.hAccessToken)
	rt.add(http.MethodGet, "/orgs/{org}/installation", authApp, nil, s.hFindInstallation(scopeOrg))
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/installation", authApp, nil, s.hFindInstallation(scopeRepo))
	rt.add(http.MethodGet, "/rate_limit", authOptional, nil, s.hRateLimit)
	return rt
}

// Routes lists the REST routes the simulator serves, as "METHOD /pattern".
func (s *Sim) Routes() []string {
	out := make([]string, 0, len(s.routes.all))
	for _, r := range s.routes.all {
		out = append(out, r.id)
	}
	sort.Strings(out)
	return out
}

// scope resolves the scope of kind named by the path and checks that the caller may
// act on it: 404 when it does not exist, 403 when the caller has no access. The
// caller holds s.mu.
func (c *call) scope(kind scopeKind) (scopeRef, *apiError) {
	sc, ok := c.s.st.resolve(kind, c.param("enterprise"), c.param("org"), c.param("owner"), c.param("repo"))
	if !ok {
		return scopeRef{}, errNotFound()
	}
	if c.cred != nil && c.cred.kind != credApp {
		if e := c.s.authorize(c.cred, c.route, sc); e != nil {
			return scopeRef{}, e
		}
	}
	return sc, nil
}

func (st *state) resolve(kind scopeKind, ent, orgName, owner, repoName string) (scopeRef, bool) {
	switch kind {
	case scopeEnterprise:
		e := st.enterprises[strings.ToLower(ent)]
		return scopeRef{kind: kind, ent: e}, e != nil
	case scopeOrg:
		o := st.orgs[strings.ToLower(orgName)]
		if o == nil {
			return scopeRef{}, false
		}
		return scopeRef{kind: kind, org: o, ent: o.ent}, true
	case scopeRepo:
		o := st.orgs[strings.ToLower(owner)]
		if o == nil {
			return scopeRef{}, false
		}
		r := o.repos[strings.ToLower(repoName)]
		if r == nil {
			return scopeRef{}, false
		}
		return scopeRef{kind: kind, repo: r, org: o, ent: o.ent}, true
	}
	return scopeRef{}, false
}

// scopePath is the path of a scope's owner ("orgs/acme"), as in runner-group URLs.
func (sc scopeRef) path() string {
	switch sc.kind {
	case scopeRepo:
		return "repos/" + sc.repo.fullName()
	case scopeOrg:
		return "orgs/" + sc.org.login
	}
	return "enterprises/" + sc.ent.slug
}

func (s *Sim) hToken(kind scopeKind, remove bool) func(*call) *apiError {
	return func(c *call) *apiError {
		s.lock()
		defer s.unlock()
		sc, e := c.scope(kind)
		if e != nil {
			return e
		}
		tok := randomToken("A", 28, true)
		exp := s.now().Add(s.opts.RegistrationTokenTTL)
		s.st.regTokens[tok] = &regToken{scope: sc, remove: remove, expires: exp}
		s.st.sweepRegTokens(s.now())
		writeJSON(c.w, http.StatusCreated, map[string]string{"token": tok, "expires_at": exp.Format("2006-01-02T15:04:05.000-07:00")})
		return nil
	}
}

// sweepRegTokens drops expired tokens once the map has grown.
func (st *state) sweepRegTokens(now time.Time) {
	if len(st.regTokens) < 1024 || len(st.regTokens)&1023 != 0 {
		return
	}
	for k, t := range st.regTokens {
		if !now.Before(t.expires) {
			delete(st.regTokens, k)
		}
	}
}

type jitRequest struct {
	Name          string   `json:"name"`
	RunnerGroupID *int64   `json:"runner_group_id"`
	Labels        []string `json:"labels"`
	WorkFolder    string   `json:"work_folder"`
}

// validate checks the body as GitHub's schema does.
func (jr *jitRequest) validate() *apiError {
	switch {
	case strings.TrimSpace(jr.Name) == "":
		return errInvalid(`"name" wasn't supplied.`)
	case jr.RunnerGroupID == nil:
		return errInvalid(`"runner_group_id" wasn't supplied.`)
	case jr.Labels == nil:
		return errInvalid(`"labels" wasn't supplied.`)
	case len(jr.Labels) < 1 || len(jr.Labels) > 100:
		return errInvalid("For 'properties/labels', the number of items must be between 1 and 100.")
	case len(jr.Name) > 255:
		return errInvalid("For 'properties/name', the length must be at most 255.")
	}
	for _, l := range jr.Labels {
		if strings.TrimSpace(l) == "" || len(l) > 255 {
			return errInvalid("For 'items', labels must be non-empty strings of at most 255 characters.")
		}
	}
	return nil
}

func (s *Sim) hGenerateJIT(kind scopeKind) func(*call) *apiError {
	return func(c *call) *apiError {
		var req jitRequest
		if e := decodeBody(c.r.Body, &req); e != nil {
			return e
		}
		if e := req.validate(); e != nil {
			return e
		}
		s.lock()
		defer s.unlock()
		sc, e := c.scope(kind)
		if e != nil {
			return e
		}
		g, e := s.st.groupByID(sc, *req.RunnerGroupID)
		if e != nil {
			return e
		}
		rn, e := s.registerRunnerLocked(sc, registration{name: req.Name, labels: req.Labels, group: g, ephemeral: true, defaults: true})
		if e != nil {
			return e
		}
		cfg := s.runnerConfig(c.u.html, rn)
		cfg.WorkFolder = req.WorkFolder
		writeJSON(c.w, http.StatusCreated, struct {
			Runner           runnerJSON `json:"runner"`
			EncodedJITConfig string     `json:"encoded_jit_config"`
		}{s.st.renderRunner(rn), cfg.Encode()})
		return nil
	}
}

// groupByID finds the group a runner of scope sc may join.
func (st *state) groupByID(sc scopeRef, id int64) (*runnerGroup, *apiError) {
	if sc.kind == scopeRepo {
		if id != repoDefaultGroup.id {
			return nil, errValidation("Runner group not found")
		}
		return repoDefaultGroup, nil
	}
	g := sc.groups()[id]
	if g == nil {
		return nil, errValidation("Runner group not found")
	}
	return g, nil
}

func (s *Sim) hListRunners(kind scopeKind) func(*call) *apiError {
	return func(c *call) *apiError {
		name := c.r.URL.Query().Get("name")
		s.lock()
		defer s.unlock()
		sc, e := c.scope(kind)
		if e != nil {
			return e
		}
		list := make([]*runner, 0, len(sc.runners()))
		for _, r := range sc.runners() {
			if name == "" || strings.EqualFold(r.name, name) {
				list = append(list, r)
			}
		}
		sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
		from, to := c.paginate(len(list))
		out := make([]runnerJSON, 0, to-from)
		for _, r := range list[from:to] {
			out = append(out, s.st.renderRunner(r))
		}
		writeJSON(c.w, http.StatusOK, struct {
			TotalCount int          `json:"total_count"`
			Runners    []runnerJSON `json:"runners"`
		}{len(list), out})
		return nil
	}
}

func (s *Sim) hGetRunner(kind scopeKind) func(*call) *apiError {
	return func(c *call) *apiError {
		id, e := c.idParam("runner_id")
		if e != nil {
			return e
		}
		s.lock()
		defer s.unlock()
		sc, e := c.scope(kind)
		if e != nil {
			return e
		}
		r := sc.runners()[id]
		if r == nil {
			return errNotFound()
		}
		writeJSON(c.w, http.StatusOK, s.st.renderRunner(r))
		return nil
	}
}

func (s *Sim) hDeleteRunner(kind scopeKind) func(*call) *apiError {
	return func(c *call) *apiError {
		id, e := c.idParam("runner_id")
		if e != nil {
			return e
		}
		s.lock()
		defer s.unlock()
		sc, e := c.scope(kind)
		if e != nil {
			return e
		}
		r := sc.runners()[id]
		if r == nil {
			return errNotFound()
		}
		if r.busy() {
			return newError(http.StatusUnprocessableEntity, `Bad request - Runner "`+r.name+`" is still running a job"`)
		}
		s.removeRunnerLocked(r)
		c.w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func (s *Sim) hListGroups(kind scopeKind) func(*call) *apiError {
	return func(c *call) *apiError {
		q := c.r.URL.Query()
		s.lock()
		defer s.unlock()
		sc, e := c.scope(kind)
		if e != nil {
			return e
		}
		type entry struct {
			g         *runnerGroup
			owner     string
			inherited bool
		}
		var list []entry
		for _, g := range sc.groups() {
			list = append(list, entry{g, sc.path(), false})
		}
		if kind == scopeOrg && sc.org.ent != nil {
			for _, g := range sc.org.ent.groups {
				if g.visibility == "all" || g.orgs[sc.org.id] {
					list = append(list, entry{g, "enterprises/" + sc.org.ent.slug, true})
				}
			}
		}
		if name := q.Get("visible_to_repository"); name != "" && kind == scopeOrg {
			r := sc.org.repos[strings.ToLower(name)]
			kept := list[:0]
			for _, en := range list {
				if r != nil && en.g.visibleTo(r) {
					kept = append(kept, en)
				}
			}
			list = kept
		}
		if name := q.Get("visible_to_organization"); name != "" && kind == scopeEnterprise {
			o := s.st.orgs[strings.ToLower(name)]
			kept := list[:0]
			for _, en := range list {
				if o != nil && o.ent == sc.ent && (en.g.visibility == "all" || en.g.orgs[o.id]) {
					kept = append(kept, en)
				}
			}
			list = kept
		}
		sort.Slice(list, func(i, j int) bool { return list[i].g.id < list[j].g.id })
		from, to := c.paginate(len(list))
		out := make([]map[string]any, 0, to-from)
		for _, en := range list[from:to] {
			out = append(out, groupJSON(c.u, en.owner, en.g, en.inherited))
		}
		writeJSON(c.w, http.StatusOK, map[string]any{"total_count": len(list), "runner_groups": out})
		return nil
	}
}

func (s *Sim) hGetGroup(kind scopeKind) func(*call) *apiError {
	return func(c *call) *apiError {
		id, e := c.idParam("runner_group_id")
		if e != nil {
			return e
		}
		s.lock()
		defer s.unlock()
		sc, e := c.scope(kind)
		if e != nil {
			return e
		}
		g := sc.groups()[id]
		if g == nil {
			return errNotFound()
		}
		writeJSON(c.w, http.StatusOK, groupJSON(c.u, sc.path(), g, false))
		return nil
	}
}

// runStatusMatches implements the status filter of the runs list: a status or a
// conclusion.
func runStatusMatches(filter, status, conclusion string) bool {
	switch filter {
	case "":
		return true
	case StatusQueued, StatusInProgress, StatusCompleted, "requested", "waiting", "pending":
		return status == filter
	}
	return conclusion == filter
}

// hListOrgRepos lists an organization's repositories, oldest first: a PAT without the
// repo scope sees the public ones, an installation token the ones it covers.
func (s *Sim) hListOrgRepos(c *call) *apiError {
	s.lock()
	defer s.unlock()
	sc, e := c.scope(scopeOrg)
	if e != nil {
		return e
	}
	var list []*repo
	for _, r := range sc.org.repos {
		switch {
		case c.cred.kind == credInstallation && !c.cred.inst.covers(r):
		case c.cred.kind == credPAT && r.private && !c.cred.pat.scopes["repo"]:
		default:
			list = append(list, r)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	from, to := c.paginate(len(list))
	out := make([]map[string]any, 0, to-from)
	for _, r := range list[from:to] {
		out = append(out, repoJSON(c.u, r, false))
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// createdFilter parses GitHub's date-range syntax of the runs list's created
// parameter (">=2024-01-02", "<2024-01-02T10:00:00Z", "2024-01-01..2024-01-07", or one
// day); ok is false for anything else, which then filters nothing.
func createdFilter(v string) (match func(time.Time) bool, ok bool) {
	// span is the instants a value names: a whole day for a date, one instant else.
	span := func(s string) (from, until time.Time, ok bool) {
		if t, err := time.Parse("2006-01-02", s); err == nil {
			return t, t.Add(24 * time.Hour), true
		}
		for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t, t.Add(time.Nanosecond), true
			}
		}
		return time.Time{}, time.Time{}, false
	}
	var from, until time.Time
	switch {
	case strings.HasPrefix(v, ">="):
		from, _, ok = span(v[2:])
		return func(c time.Time) bool { return !c.Before(from) }, ok
	case strings.HasPrefix(v, "<="):
		_, until, ok = span(v[2:])
		return func(c time.Time) bool { return c.Before(until) }, ok
	case strings.HasPrefix(v, ">"):
		_, until, ok = span(v[1:])
		return func(c time.Time) bool { return !c.Before(until) }, ok
	case strings.HasPrefix(v, "<"):
		from, _, ok = span(v[1:])
		return func(c time.Time) bool { return c.Before(from) }, ok
	case strings.Contains(v, ".."):
		a, b, _ := strings.Cut(v, "..")
		var ok2 bool
		from, _, ok = span(a)
		_, until, ok2 = span(b)
		return func(c time.Time) bool { return !c.Before(from) && c.Before(until) }, ok && ok2
	}
	from, until, ok = span(v)
	return func(c time.Time) bool { return !c.Before(from) && c.Before(until) }, ok
}

func (s *Sim) hListRuns(c *call) *apiError {
	filter := c.r.URL.Query().Get("status")
	branch := c.r.URL.Query().Get("branch")
	created := func(time.Time) bool { return true }
	if v := c.r.URL.Query().Get("created"); v != "" {
		if m, ok := createdFilter(v); ok {
			created = m
		}
	}
	s.lock()
	defer s.unlock()
	sc, e := c.scope(scopeRepo)
	if e != nil {
		return e
	}
	var list []*workflowRun
	for i := len(sc.repo.runs) - 1; i >= 0; i-- { // newest first, as GitHub lists them
		wr := sc.repo.runs[i]
		st, concl := wr.status()
		if runStatusMatches(filter, st, concl) && (branch == "" || branch == wr.headBranch) && created(wr.created.Truncate(time.Second)) {
			list = append(list, wr)
		}
	}
	from, to := c.paginate(len(list))
	out := make([]map[string]any, 0, to-from)
	for _, wr := range list[from:to] {
		out = append(out, s.st.runJSON(c.u, wr))
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"total_count": len(list), "workflow_runs": out})
	return nil
}

func (s *Sim) runOf(c *call) (*workflowRun, *apiError) {
	id, e := c.idParam("run_id")
	if e != nil {
		return nil, e
	}
	sc, e := c.scope(scopeRepo)
	if e != nil {
		return nil, e
	}
	wr := s.st.runs[id]
	if wr == nil || wr.repo != sc.repo {
		return nil, errNotFound()
	}
	return wr, nil
}

func (s *Sim) hGetRun(c *call) *apiError {
	s.lock()
	defer s.unlock()
	wr, e := s.runOf(c)
	if e != nil {
		return e
	}
	writeJSON(c.w, http.StatusOK, s.st.runJSON(c.u, wr))
	return nil
}

func (s *Sim) hListRunJobs(c *call) *apiError {
	s.lock()
	defer s.unlock()
	wr, e := s.runOf(c)
	if e != nil {
		return e
	}
	from, to := c.paginate(len(wr.jobs))
	out := make([]map[string]any, 0, to-from)
	for _, j := range wr.jobs[from:to] {
		out = append(out, s.st.jobJSON(c.u, j))
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"total_count": len(wr.jobs), "jobs": out})
	return nil
}

func (s *Sim) hGetJob(c *call) *apiError {
	id, e := c.idParam("job_id")
	if e != nil {
		return e
	}
	s.lock()
	defer s.unlock()
	sc, e := c.scope(scopeRepo)
	if e != nil {
		return e
	}
	j := s.st.jobs[id]
	if j == nil || j.repo() != sc.repo {
		return errNotFound()
	}
	writeJSON(c.w, http.StatusOK, s.st.jobJSON(c.u, j))
	return nil
}

func (s *Sim) hGetApp(c *call) *apiError {
	writeJSON(c.w, http.StatusOK, appJSON(c.u, c.cred.app))
	return nil
}

func (s *Sim) hListInstallations(c *call) *apiError {
	s.lock()
	defer s.unlock()
	var list []*installation
	for _, in := range s.st.installs {
		if in.app == c.cred.app {
			list = append(list, in)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	from, to := c.paginate(len(list))
	out := make([]map[string]any, 0, to-from)
	for _, in := range list[from:to] {
		out = append(out, installationJSON(c.u, in))
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Sim) installationOf(c *call) (*installation, *apiError) {
	id, e := c.idParam("installation_id")
	if e != nil {
		return nil, e
	}
	in := s.st.installs[id]
	if in == nil || in.app != c.cred.app {
		return nil, errNotFound()
	}
	return in, nil
}

func (s *Sim) hGetInstallation(c *call) *apiError {
	s.lock()
	defer s.unlock()
	in, e := s.installationOf(c)
	if e != nil {
		return e
	}
	writeJSON(c.w, http.StatusOK, installationJSON(c.u, in))
	return nil
}

type accessTokenRequest struct {
	Repositories  []string          `json:"repositories"`
	RepositoryIDs []int64           `json:"repository_ids"`
	Permissions   map[string]string `json:"permissions"`
}

func (s *Sim) hAccessToken(c *call) *apiError {
	var req accessTokenRequest
	if e := decodeBody(c.r.Body, &req); e != nil {
		return e
	}
	s.lock()
	defer s.unlock()
	in, e := s.installationOf(c)
	if e != nil {
		return e
	}
	tok := randomToken("ghs_", 36, false)
	exp := s.now().Add(s.opts.InstallationTokenTTL)
	s.st.instTokens[tok] = &instToken{inst: in, expires: exp}
	s.st.sweepInstTokens(s.now())
	writeJSON(c.w, http.StatusCreated, map[string]any{
		"token":                tok,
		"expires_at":           ts(exp),
		"permissions":          installationPermissions(),
		"repository_selection": in.selection,
	})
	return nil
}

func (st *state) sweepInstTokens(now time.Time) {
	if len(st.instTokens) < 1024 || len(st.instTokens)&1023 != 0 {
		return
	}
	for k, t := range st.instTokens {
		if !now.Before(t.expires) {
			delete(st.instTokens, k)
		}
	}
}

func (s *Sim) hFindInstallation(kind scopeKind) func(*call) *apiError {
	return func(c *call) *apiError {
		s.lock()
		defer s.unlock()
		sc, ok := s.st.resolve(kind, "", c.param("org"), c.param("owner"), c.param("repo"))
		if !ok {
			return errNotFound()
		}
		for _, in := range s.st.installs {
			if in.app != c.cred.app {
				continue
			}
			if (kind == scopeOrg && in.org == sc.org) || (kind == scopeRepo && in.covers(sc.repo)) {
				writeJSON(c.w, http.StatusOK, installationJSON(c.u, in))
				return nil
			}
		}
		return errNotFound()
	}
}

func (s *Sim) hRateLimit(c *call) *apiError {
	sub := rateSubject{key: "ip:" + clientIP(c.r), kind: credNone}
	if c.cred != nil {
		sub = rateSubject{key: c.cred.rateKey, kind: c.cred.kind, limit: c.cred.rateLimit}
	}
	core, ok := s.rl.overview(sub, s.now())
	if !ok {
		return newError(http.StatusNotFound, "Rate limiting is not enabled.")
	}
	writeJSON(c.w, http.StatusOK, map[string]any{
		"resources": map[string]rateResource{"core": core, "search": {Limit: 30, Remaining: 30, Reset: core.Reset}},
		"rate":      core,
	})
	return nil
}

// itoa is strconv.FormatInt for IDs.
func itoa(id int64) string { return strconv.FormatInt(id, 10) }
