// REST API: the routes of api.github.com (and of GHES under /api/v3), served through
// one pipeline (faults, authentication, rate limits, call counts) in serveRoute.
// rest_runners.go, rest_runs.go, rest_apps.go and webhooks.go hold their handlers.

package github

import (
	"context"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"
)

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

// injectFault plays the fault set for the call's endpoint, if any: a latency, then an
// error status. It reports whether it answered the call.
func (s *Sim) injectFault(c *call) bool {
	latency, status := s.faults.endpoint(c.route.id)
	if latency > 0 && !sleepCtx(c.r.Context(), latency) {
		writeError(c.w, http.StatusServiceUnavailable, msgServerError)
		return true
	}
	if status != 0 {
		writeError(c.w, status, msgServerError)
		return true
	}
	return false
}

func (s *Sim) serveRoute(c *call) {
	if s.injectFault(c) {
		return
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
	counted := c.route.pattern != "/rate_limit"
	release, rerr := s.rl.admit(c.w.Header(), sub, c.route, s.now(), counted)
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
	if c.route.method != http.MethodGet {
		if e := c.route.handler(c); e != nil {
			e.write(c.w)
		}
		return
	}
	cw := &condWriter{w: c.w}
	c.w = cw
	if e := c.route.handler(c); e != nil {
		e.write(cw)
	}
	c.w = cw.w
	cw.flush(c.r, func() {
		if counted {
			s.rl.refund(c.w.Header(), sub, s.now())
		}
	})
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
	rt.add(http.MethodGet, "/orgs/{org}/repos", authToken, nil, s.scoped(scopeOrg, "", s.hListOrgRepos))
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/actions/runs", authToken, repoScopes, s.scoped(scopeRepo, "", s.hListRuns))
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/actions/runs/{run_id}", authToken, repoScopes, lookup(s, scopeRepo, "run_id", runIn, s.hGetRun))
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs", authToken, repoScopes, lookup(s, scopeRepo, "run_id", runIn, s.hListRunJobs))
	rt.add(http.MethodGet, "/repos/{owner}/{repo}/actions/jobs/{job_id}", authToken, repoScopes, lookup(s, scopeRepo, "job_id", jobIn, s.hGetJob))
	s.wf.addRoutes(rt)

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
	rt.add(http.MethodGet, "/app/installations", authApp, nil, s.locked(s.hListInstallations))
	rt.add(http.MethodGet, "/app/installations/{installation_id}", authApp, nil, s.locked(s.hGetInstallation))
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
