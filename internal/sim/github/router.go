package github

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// authKind is what a route accepts as credentials.
type authKind int

const (
	// authToken: a PAT or an installation token.
	authToken authKind = iota
	// authApp: a GitHub App JWT.
	authApp
	// authOptional: anything, or nothing (GET /rate_limit).
	authOptional
)

// route is one REST endpoint. Its id ("POST /orgs/{org}/actions/runners/registration-token")
// keys call counts, secondary rate limits and fault injection.
type route struct {
	method  string
	pattern string
	id      string
	segs    []string
	auth    authKind
	// scopes are the classic PAT scopes of which one is required (none: any PAT).
	scopes  []string
	handler func(*call) *apiError
}

type router struct {
	bySegs map[int][]*route
	all    []*route
}

func (rt *router) add(method, pattern string, auth authKind, scopes []string, h func(*call) *apiError) {
	r := &route{method: method, pattern: pattern, id: method + " " + pattern, auth: auth, scopes: scopes, handler: h}
	r.segs = strings.Split(strings.Trim(pattern, "/"), "/")
	rt.bySegs[len(r.segs)] = append(rt.bySegs[len(r.segs)], r)
	rt.all = append(rt.all, r)
}

// match finds the route of method and path and fills params; n is their number. A
// path served under another method is no match: GitHub answers it 404 as well.
func (rt *router) match(method, path string, params *[4]param) (r *route, n int) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	cnt := len(segs)
next:
	for _, cand := range rt.bySegs[cnt] {
		if cand.method != method && (method != http.MethodHead || cand.method != http.MethodGet) {
			continue
		}
		n = 0
		for i, s := range cand.segs {
			if len(s) > 2 && s[0] == '{' {
				if segs[i] == "" || n == len(params) {
					continue next
				}
				params[n] = param{name: s[1 : len(s)-1], value: segs[i]}
				n++
				continue
			}
			if s != segs[i] {
				continue next
			}
		}
		return cand, n
	}
	return nil, 0
}

type param struct{ name, value string }

// call is one REST request being served.
type call struct {
	s      *Sim
	w      http.ResponseWriter
	r      *http.Request
	route  *route
	params [4]param
	nparam int
	cred   *credential
	u      urls
	ghes   bool
	// svc is the caller of an Actions-service route.
	svc *serviceCred
}

func (c *call) param(name string) string {
	for i := 0; i < c.nparam; i++ {
		if c.params[i].name == name {
			return c.params[i].value
		}
	}
	return ""
}

// idParam parses a numeric path parameter; GitHub answers a non-number with 404.
func (c *call) idParam(name string) (int64, *apiError) {
	id, err := strconv.ParseInt(c.param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, errNotFound()
	}
	return id, nil
}

// maxBody bounds request bodies.
const maxBody = 1 << 20

// decodeBody parses a JSON request body into v, answering like GitHub: 400 "Problems
// parsing JSON" for malformed JSON, 422 for JSON of the wrong shape. An empty body
// decodes as {}.
func decodeBody(r io.Reader, v any) *apiError {
	data, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return newError(http.StatusBadRequest, msgParseJSON)
	}
	if len(data) > maxBody {
		return newError(http.StatusRequestEntityTooLarge, "Payload too big")
	}
	return parseJSONBody(data, v)
}

func parseJSONBody(data []byte, v any) *apiError {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	if !json.Valid(data) {
		return newError(http.StatusBadRequest, msgParseJSON)
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return errInvalid("Body must be a JSON object.")
			}
			return errInvalid("For 'properties/" + te.Field + "', " + jsonKind(te.Value) + " is not " + article(te.Type.Kind().String()) + ".")
		}
		// Valid JSON that a field rejects (a bad duration, say).
		return errInvalid(err.Error())
	}
	return nil
}

func jsonKind(v string) string {
	if v == "" {
		return "value"
	}
	return "a " + v
}

func article(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int", "int64", "int32", "float64":
		return "an integer"
	case "slice":
		return "an array"
	case "bool":
		return "a boolean"
	case "struct", "map", "ptr":
		return "an object"
	}
	return "a " + kind
}

// pageParams parses per_page (default 30, at most 100) and page (default 1) as GitHub
// does: values that are not positive numbers fall back to the defaults.
func pageParams(perPage, page string) (pp, pg int) {
	pp, pg = 30, 1
	if n, err := strconv.Atoi(perPage); err == nil && n > 0 {
		pp = min(n, 100)
	}
	if n, err := strconv.Atoi(page); err == nil && n > 0 {
		pg = min(n, 1<<20)
	}
	return pp, pg
}

// paginate slices total items for page/perPage and sets the Link header.
func (c *call) paginate(total int) (from, to int) {
	q := c.r.URL.Query()
	pp, pg := pageParams(q.Get("per_page"), q.Get("page"))
	last := max(1, (total+pp-1)/pp)
	from = min((pg-1)*pp, total)
	to = min(from+pp, total)
	var links []string
	link := func(p int, rel string) {
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(pp))
		links = append(links, "<"+c.u.api+c.r.URL.Path[len(c.pathPrefix()):]+"?"+q.Encode()+`>; rel="`+rel+`"`)
	}
	if pg > 1 {
		link(min(pg-1, last), "prev")
	}
	if pg < last {
		link(pg+1, "next")
		link(last, "last")
	}
	if pg > 1 {
		link(1, "first")
	}
	if len(links) > 0 {
		c.w.Header().Set("Link", strings.Join(links, ", "))
	}
	return from, to
}

func (c *call) pathPrefix() string {
	if c.ghes {
		return "/api/v3"
	}
	return ""
}

// The preamble of the routes. Every route that acts on a scope runs the same steps
// before its own work: parse the numeric id of the path (GitHub answers a non-number
// 404), take the state lock, resolve and authorize the scope, find the object (404
// when it is missing). scoped, lookup and scopedBody write them once; the handler
// gets what they found and runs under the lock.

// scopedFunc is the part of a handler that runs under the lock, once its scope is
// resolved; id is the path parameter scoped was asked to parse (0: none).
type scopedFunc func(c *call, sc scopeRef, id int64) *apiError

// scoped returns the handler that runs f in scope kind; idParam names a numeric path
// parameter to parse first ("": none).
func (s *Sim) scoped(kind scopeKind, idParam string, f scopedFunc) func(*call) *apiError {
	return func(c *call) *apiError {
		var id int64
		if idParam != "" {
			var e *apiError
			if id, e = c.idParam(idParam); e != nil {
				return e
			}
		}
		s.lock()
		defer s.unlock()
		sc, e := c.scope(kind)
		if e != nil {
			return e
		}
		return f(c, sc, id)
	}
}

// lookup returns the handler that runs f on the object of scope kind whose id is the
// path parameter idParam, as find returns it (nil: 404).
func lookup[T any](s *Sim, kind scopeKind, idParam string, find func(st *state, sc scopeRef, id int64) *T,
	f func(c *call, sc scopeRef, obj *T) *apiError) func(*call) *apiError {
	return s.scoped(kind, idParam, func(c *call, sc scopeRef, id int64) *apiError {
		obj := find(s.st, sc, id)
		if obj == nil {
			return errNotFound()
		}
		return f(c, sc, obj)
	})
}

// validBody is a request body that checks itself as GitHub's schema does.
type validBody[B any] interface {
	*B
	validate() *apiError
}

// scopedBody returns the handler that decodes and validates the JSON body before
// anything else, as GitHub does, then runs f with it in scope kind.
func scopedBody[B any, PB validBody[B]](s *Sim, kind scopeKind, f func(c *call, sc scopeRef, body PB) *apiError) func(*call) *apiError {
	return func(c *call) *apiError {
		body := PB(new(B))
		if e := decodeBody(c.r.Body, body); e != nil {
			return e
		}
		if e := body.validate(); e != nil {
			return e
		}
		return s.scoped(kind, "", func(c *call, sc scopeRef, _ int64) *apiError { return f(c, sc, body) })(c)
	}
}

// locked returns the handler that runs f under the state lock (routes with no scope).
func (s *Sim) locked(f func(c *call) *apiError) func(*call) *apiError {
	return func(c *call) *apiError {
		s.lock()
		defer s.unlock()
		return f(c)
	}
}

// Finders of lookup.

func runnerIn(_ *state, sc scopeRef, id int64) *runner { return sc.runners()[id] }

func groupIn(_ *state, sc scopeRef, id int64) *runnerGroup { return sc.groups()[id] }

func runIn(st *state, sc scopeRef, id int64) *workflowRun {
	if wr := st.runs[id]; wr != nil && wr.repo == sc.repo {
		return wr
	}
	return nil
}

func jobIn(st *state, sc scopeRef, id int64) *job {
	if j := st.jobs[id]; j != nil && j.repo() == sc.repo {
		return j
	}
	return nil
}
