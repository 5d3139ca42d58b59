// Actions service: the routes of the service that runner scale sets speak (the one
// github.com/actions/scaleset's client calls), its bootstrap, its credentials and its
// error shape. Every request goes through the same faults, rate limits and call
// counts as a REST request. actions_scalesets.go and actions_sessions.go hold the
// handlers; actions_state.go the model.

package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
)

// actionsPrefix is where the simulator serves the Actions service; the bootstrap
// answers actionsPrefix + "/" as the service URL.
const actionsPrefix = "/_actions"

// pathRunnerRegistration is the bootstrap, under the REST API's root.
const pathRunnerRegistration = "/actions/runner-registration"

// Credentials of the Actions service.
const (
	// authRemote: "RemoteAuth <registration token>" (the bootstrap).
	authRemote authKind = iota + 100
	// authService: "Bearer <admin token>" from the bootstrap.
	authService
	// authQueue: "Bearer <message queue token>" of a session.
	authQueue
	// authQueueOrService: either (acquirejobs).
	authQueueOrService
)

// credActions is the rate-limit kind of Actions-service callers.
const credActions = credApp + 1

// serviceCred is what an Actions-service credential resolved to.
type serviceCred struct {
	scope   scopeRef
	session *session // for a queue token
}

func (o *Options) actionsDefaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.ActionsPollHold, defaultPollHold)
	def(&o.ActionsSessionTimeout, defaultSessionTimeout)
	def(&o.ActionsAdminTokenTTL, defaultServiceTokenTTL)
	def(&o.MessageQueueTokenTTL, defaultServiceTokenTTL)
	def(&o.ScaleSetAssignTimeout, defaultScaleSetAssignTTL)
}

// serviceURL is the Actions service's URL where no request is at hand.
func (s *Sim) serviceURL() string { return s.publicURL() + actionsPrefix + "/" }

func newActionsRouter(s *Sim) *router {
	rt := &router{bySegs: map[int][]*route{}}
	add := func(method, pattern string, auth authKind, h func(*call) *apiError) {
		rt.add(method, pattern, auth, nil, h)
	}
	const sets = "/_apis/runtime/runnerscalesets"
	const agents = "/_apis/distributedtask/pools/0/agents"
	add(http.MethodPost, pathRunnerRegistration, authRemote, s.hRunnerRegistration)
	add(http.MethodGet, "/_apis/runtime/runnergroups", authService, s.inService(s.hRunnerGroups))
	add(http.MethodGet, sets, authService, s.inService(s.hListScaleSets))
	add(http.MethodPost, sets, authService, s.inService(s.hCreateScaleSet))
	add(http.MethodGet, sets+"/{id}", authService, s.withScaleSet(s.hGetScaleSet))
	add(http.MethodPatch, sets+"/{id}", authService, s.withScaleSet(s.hUpdateScaleSet))
	add(http.MethodDelete, sets+"/{id}", authService, s.withScaleSet(s.hDeleteScaleSet))
	add(http.MethodPost, sets+"/{id}/generatejitconfig", authService, s.withScaleSet(s.hScaleSetJIT))
	add(http.MethodPost, sets+"/{id}/sessions", authService, s.withScaleSet(s.hCreateSession))
	add(http.MethodPatch, sets+"/{id}/sessions/{session_id}", authService, s.withScaleSet(s.hRefreshSession))
	add(http.MethodDelete, sets+"/{id}/sessions/{session_id}", authService, s.withScaleSet(s.hDeleteSession))
	add(http.MethodGet, sets+"/{id}/messages", authQueue, s.hGetMessage)
	add(http.MethodDelete, sets+"/{id}/messages/{message_id}", authQueue, s.withScaleSet(s.hAckMessage))
	add(http.MethodPost, sets+"/{id}/acquirejobs", authQueueOrService, s.withScaleSet(s.hAcquireJobs))
	add(http.MethodGet, agents, authService, s.inService(s.hListAgents))
	add(http.MethodGet, agents+"/{id}", authService, s.withAgent(s.hGetAgent))
	add(http.MethodDelete, agents+"/{id}", authService, s.inService(s.hDeleteAgent))
	return rt
}

// serveActions serves one request of the Actions service; path is relative to the
// service URL (or is the bootstrap's), root the simulator's root URL.
func (s *Sim) serveActions(w http.ResponseWriter, r *http.Request, path, root string) {
	sw := &statusWriter{ResponseWriter: w}
	sw.Header().Set("ActivityId", uuid.NewString())
	sw.Header().Set("X-GitHub-Request-Id", randomToken("", 16, true))
	c := &call{s: s, w: sw, r: r, u: urls{api: root, html: root}}
	rt, n := s.svcRoutes.match(r.Method, path, &c.params)
	if rt == nil {
		writeError(sw, http.StatusNotFound, msgNotFound)
		s.calls.add(routeUnmatched, sw.status)
		return
	}
	c.route, c.nparam = rt, n
	s.serveActionsRoute(c)
	s.calls.add(rt.id, sw.status)
}

// serveActionsRoute is serveRoute for the Actions service: faults, its credentials,
// its rate limit (Options.RateLimits.ActionsService), then the handler.
func (s *Sim) serveActionsRoute(c *call) {
	if s.injectFault(c) {
		return
	}
	svc, key, e := s.authenticateService(c.r, c.route.auth)
	if e != nil {
		e.write(c.w)
		return
	}
	release, e := s.rl.admit(c.w.Header(), rateSubject{key: key, kind: credActions}, c.route, s.now(), true)
	if e != nil {
		e.write(c.w)
		return
	}
	defer release()
	c.svc = svc
	if e := c.route.handler(c); e != nil {
		e.write(c.w)
	}
}

// authenticateService resolves an Actions-service credential and the key of its
// rate-limit budget.
func (s *Sim) authenticateService(r *http.Request, kind authKind) (*serviceCred, string, *apiError) {
	scheme, secret, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	secret = strings.TrimSpace(secret)
	if !ok || secret == "" {
		return nil, "", newError(http.StatusUnauthorized, msgRequiresAuth)
	}
	s.lock()
	defer s.unlock()
	now := s.now()
	switch {
	case kind == authRemote && strings.EqualFold(scheme, "RemoteAuth"):
		t := s.st.regTokens[secret]
		if t == nil || t.remove || !now.Before(t.expires) {
			return nil, "", newError(http.StatusUnauthorized, msgBadCredentials)
		}
		return &serviceCred{scope: t.scope}, "actions:" + t.scope.path(), nil
	case !strings.EqualFold(scheme, "Bearer"):
		return nil, "", newError(http.StatusUnauthorized, msgBadCredentials)
	}
	if kind == authQueue || kind == authQueueOrService {
		if se := s.st.actions.queueTokens[secret]; se != nil {
			if !now.Before(se.expires) {
				return nil, "", actionsError(http.StatusUnauthorized, "UnauthorizedRequestException", "The message queue token has expired.")
			}
			se.seen = now
			return &serviceCred{scope: se.set.scope, session: se}, "actions:" + se.set.scope.path(), nil
		}
		if kind == authQueue {
			return nil, "", actionsError(http.StatusUnauthorized, "UnauthorizedRequestException", "The message queue token is not valid.")
		}
	}
	t := s.st.actions.adminTokens[secret]
	if t == nil || !now.Before(t.expires) {
		return nil, "", actionsError(http.StatusUnauthorized, "UnauthorizedRequestException", "The admin token is not valid or has expired.")
	}
	return &serviceCred{scope: t.scope}, "actions:" + t.scope.path(), nil
}

// actionsError is an answer in the Actions service's exception shape; the client
// recognizes typeName (AgentExistsException, JobStillRunningException, …).
func actionsError(code int, typeKey, msg string) *apiError {
	e := newError(code, msg)
	e.body = map[string]any{
		"$id":            "1",
		"innerException": nil,
		"message":        msg,
		"typeName":       "GitHub.DistributedTask.WebApi." + typeKey + ", GitHub.DistributedTask.WebApi",
		"typeKey":        typeKey,
		"errorCode":      0,
		"eventId":        3000,
	}
	return e
}

// The preamble of the service's routes, written once like the REST one.

// inService returns the handler that runs f under the lock in the caller's scope.
func (s *Sim) inService(f func(c *call, sc scopeRef) *apiError) func(*call) *apiError {
	return func(c *call) *apiError {
		s.lock()
		defer s.unlock()
		return f(c, c.svc.scope)
	}
}

// withScaleSet returns the handler that runs f on the scale set of path parameter
// {id} in the caller's scope (404 when there is none).
func (s *Sim) withScaleSet(f func(c *call, ss *scaleSet) *apiError) func(*call) *apiError {
	return s.inService(func(c *call, sc scopeRef) *apiError {
		ss := s.st.actions.scaleSets[parseID(c.param("id"))]
		if ss == nil || ss.scope.key() != sc.key() {
			return actionsError(http.StatusNotFound, "RunnerScaleSetNotFoundException", "Runner scale set "+c.param("id")+" not found.")
		}
		return f(c, ss)
	})
}

// withAgent returns the handler that runs f on the runner of path parameter {id} in
// the caller's scope (404 AgentNotFoundException when there is none).
func (s *Sim) withAgent(f func(c *call, r *runner) *apiError) func(*call) *apiError {
	return s.inService(func(c *call, sc scopeRef) *apiError {
		r := sc.runners()[parseID(c.param("id"))]
		if r == nil {
			return actionsError(http.StatusNotFound, "AgentNotFoundException", "No agent exists with ID "+c.param("id")+".")
		}
		return f(c, r)
	})
}

func parseID(v string) int64 {
	var n int64
	if v == "" || len(v) > 18 {
		return 0
	}
	for _, ch := range v {
		if ch < '0' || ch > '9' {
			return 0
		}
		n = n*10 + int64(ch-'0')
	}
	return n
}

// registrationRequest is the bootstrap's body.
type registrationRequest struct {
	URL         string `json:"url"`
	RunnerEvent string `json:"runner_event"`
}

// hRunnerRegistration is POST /actions/runner-registration: a registration token of
// the scope the body's URL names buys the service URL and an admin token.
func (s *Sim) hRunnerRegistration(c *call) *apiError {
	var req registrationRequest
	if e := decodeBody(c.r.Body, &req); e != nil {
		return e
	}
	s.lock()
	defer s.unlock()
	sc, ok := s.st.resolveConfigURL(req.URL)
	if !ok || sc.key() != c.svc.scope.key() {
		return errNotFound()
	}
	now := s.now()
	exp := now.Add(s.opts.ActionsAdminTokenTTL)
	tok := s.adminJWT(sc, now, exp)
	s.st.actions.adminTokens[tok] = &adminToken{scope: sc, expires: exp}
	s.sweepAdminTokensLocked(now)
	writeJSON(c.w, http.StatusOK, map[string]string{
		"url":          c.u.api + actionsPrefix + "/",
		"token":        tok,
		"token_schema": "OAuthAccessToken",
	})
	return nil
}

// resolveConfigURL resolves a scope URL (https://HOST/ORG, …/ORG/REPO,
// …/enterprises/SLUG), as the runner's config URL names it.
func (st *state) resolveConfigURL(raw string) (scopeRef, bool) {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return scopeRef{}, false
	}
	_, path, _ := strings.Cut(rest, "/")
	return st.resolveSpec(strings.Trim(path, "/"))
}

// adminJWT signs the admin token. The client reads only its exp; the simulator keeps
// the token in a map, so the key is a constant of no value.
func (s *Sim) adminJWT(sc scopeRef, now, exp time.Time) string {
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"sub": sc.path(), "iat": now.Unix(), "nbf": now.Unix(),
		"exp": exp.Unix(), "iss": "simulator", "jti": uuid.NewString()})
	unsigned := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, []byte("gantry-simulator"))
	mac.Write([]byte(unsigned))
	return unsigned + "." + enc.EncodeToString(mac.Sum(nil))
}

// sweepAdminTokensLocked drops expired admin tokens once the map has grown.
func (s *Sim) sweepAdminTokensLocked(now time.Time) {
	m := s.st.actions.adminTokens
	if len(m) < 1024 || len(m)&1023 != 0 {
		return
	}
	for k, t := range m {
		if !now.Before(t.expires) {
			delete(m, k)
		}
	}
}
