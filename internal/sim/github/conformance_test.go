package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// The conformance test validates every answer of every implemented REST route
// against GitHub's published OpenAPI description (@octokit/openapi, the GHEC variant,
// which adds the enterprise routes to api.github.com's), and every webhook payload
// against @octokit/webhooks-schemas. hack/octokit-schemas.sh fetches both.

const (
	openapiFile  = "node_modules/@octokit/openapi/generated/ghec.json"
	webhooksFile = "node_modules/@octokit/webhooks-schemas/schema.json"
)

// octokitDir finds the cached packages: $GANTRY_OCTOKIT_DIR, or what
// `hack/octokit-schemas.sh --print` names. It fails, never skips, when they are missing.
func octokitDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GANTRY_OCTOKIT_DIR")
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatalf("locating the repository root: %v", err)
		}
		cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(root, "hack", "octokit-schemas.sh"), "--print")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("running hack/octokit-schemas.sh --print: %v", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, f := range []string{openapiFile, webhooksFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("GitHub's API descriptions are missing (%v): run `make octokit-schemas` "+
				"(hack/octokit-schemas.sh) to fetch them, or point GANTRY_OCTOKIT_DIR at a copy", err)
		}
	}
	return dir
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// loadSpec loads the OpenAPI description reduced to the simulator's routes and the
// components they reference, which keeps loading fast.
func loadSpec(t *testing.T, dir string, routes []string) *openapi3.T {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, openapiFile))
	if err != nil {
		t.Fatal(err)
	}
	var full map[string]any
	if err := json.Unmarshal(raw, &full); err != nil {
		t.Fatal(err)
	}
	paths := full["paths"].(map[string]any)
	keep := map[string]any{}
	for _, id := range routes {
		method, pattern, _ := strings.Cut(id, " ")
		item, ok := paths[pattern].(map[string]any)
		if !ok {
			t.Errorf("route %s is not in GitHub's OpenAPI description", id)
			continue
		}
		kept, _ := keep[pattern].(map[string]any)
		if kept == nil {
			kept = map[string]any{}
			if p, ok := item["parameters"]; ok {
				kept["parameters"] = p
			}
			keep[pattern] = kept
		}
		op, ok := item[strings.ToLower(method)]
		if !ok {
			t.Errorf("route %s: method not in GitHub's OpenAPI description", id)
			continue
		}
		kept[strings.ToLower(method)] = op
	}
	comps := full["components"].(map[string]any)
	used := map[string]map[string]any{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && strings.HasPrefix(ref, "#/components/") {
				parts := strings.SplitN(strings.TrimPrefix(ref, "#/components/"), "/", 2)
				if used[parts[0]] == nil {
					used[parts[0]] = map[string]any{}
				}
				if _, seen := used[parts[0]][parts[1]]; !seen {
					def := comps[parts[0]].(map[string]any)[parts[1]]
					used[parts[0]][parts[1]] = def
					walk(def)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(keep)
	reduced := map[string]any{"openapi": full["openapi"], "info": full["info"], "paths": keep, "components": used}
	data, err := json.Marshal(reduced)
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		t.Fatalf("loading the OpenAPI description: %v", err)
	}
	return doc
}

// exchange is one recorded request and answer.
type exchange struct {
	req    *http.Request
	status int
	header http.Header
	body   []byte
}

type recorder struct {
	mu  sync.Mutex
	got []exchange
	rt  http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.got = append(r.got, exchange{req: req, status: resp.StatusCode, header: resp.Header.Clone(), body: body})
	r.mu.Unlock()
	return resp, nil
}

func TestConformance(t *testing.T) {
	dir := octokitDir(t)
	w := newWorld(t, worldOpts{})
	hooks := newHookRecorder(t)
	must(w.sim.CreateHook(HookSpec{Org: "acme", URL: hooks.srv.URL, Secret: "s"}))
	repoHook := must(w.sim.CreateHook(HookSpec{Repo: "acme/app", URL: hooks.srv.URL, Secret: "s"}))
	_, _, pub := appKey(t)
	hookApp := must(w.sim.CreateApp(AppSpec{Slug: "hooked", Owner: "acme", PublicKeyPEM: pub, WebhookURL: hooks.srv.URL, WebhookSecret: "s"}))
	must(w.sim.CreateInstallation(InstallationSpec{AppID: hookApp.ID, Org: "acme", Repositories: []string{"app"}}))
	grp := must(w.sim.CreateRunnerGroup(RunnerGroupSpec{Org: "acme", Name: "gpu", Visibility: "selected", Repositories: []string{"app"}}))
	must(w.sim.CreateRunnerGroup(RunnerGroupSpec{Enterprise: "ent", Name: "shared"}))

	rec := &recorder{rt: http.DefaultTransport}
	hc := &http.Client{Transport: rec}
	inst := "token " + w.installationToken(t)
	pat := "token " + testPAT
	ent := "token " + testPATEnt
	jwt := func() string {
		return "Bearer " + w.appJWT(t, w.now().Add(-30*time.Second), w.now().Add(5*time.Minute))
	}
	hookJWT := func() string {
		tok, err := signJWT(w.key, hookApp.ID, w.now())
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	send := func(method, path, auth, body string) []byte {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, w.srv.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	jitBody := func(name string, group int64) string {
		return fmt.Sprintf(`{"name":%q,"runner_group_id":%d,"labels":["self-hosted","linux","x64"],"work_folder":"_work"}`, name, group)
	}

	// Every route at every scope, with the answers GitHub documents.
	scopes := []struct{ prefix, auth string }{
		{"/repos/acme/app", inst}, {"/orgs/acme", inst}, {"/enterprises/ent", ent},
	}
	var jitConfigs []string
	for _, sc := range scopes {
		p := sc.prefix + "/actions/runners"
		send("POST", p+"/registration-token", sc.auth, "")
		send("POST", p+"/remove-token", sc.auth, "")
		group := int64(1)
		if strings.HasPrefix(sc.prefix, "/enterprises") {
			group = must(w.sim.CreateRunnerGroup(RunnerGroupSpec{Enterprise: "ent", Name: "jit"})).ID
		}
		var jit struct {
			Runner           struct{ ID int64 }
			EncodedJITConfig string `json:"encoded_jit_config"`
		}
		if err := json.Unmarshal(send("POST", p+"/generate-jitconfig", sc.auth, jitBody("r1", group)), &jit); err != nil {
			t.Fatal(err)
		}
		jitConfigs = append(jitConfigs, jit.EncodedJITConfig)
		send("POST", p+"/generate-jitconfig", sc.auth, jitBody("r2", group))
		send("POST", p+"/generate-jitconfig", sc.auth, jitBody("r1", group)) // 422 duplicate
		send("GET", p+"?per_page=1&page=2", sc.auth, "")
		send("GET", p+"?name=r1", sc.auth, "")
		send("GET", p+"/"+itoa(jit.Runner.ID), sc.auth, "")
		send("GET", p+"/999999999", sc.auth, "") // 404
		r2 := must(runnerByName(w.sim, sc.prefix, "r2"))
		send("DELETE", p+"/"+itoa(r2), sc.auth, "")
		send("DELETE", p+"/"+itoa(r2), sc.auth, "") // 404
		if !strings.HasPrefix(sc.prefix, "/repos") {
			send("GET", sc.prefix+"/actions/runner-groups", sc.auth, "")
			send("GET", sc.prefix+"/actions/runner-groups/"+itoa(1), sc.auth, "")
		}
	}
	send("GET", "/orgs/acme/actions/runner-groups?visible_to_repository=app", pat, "")
	send("GET", "/orgs/acme/actions/runner-groups/"+itoa(grp.ID), pat, "")
	send("GET", "/enterprises/ent/actions/runner-groups?visible_to_organization=acme", ent, "")

	// Jobs through their whole life, so runs and jobs show every status.
	run := must(w.sim.QueueRun(RunSpec{Repo: "acme/app", Matrix: 2, Template: JobSpec{Labels: []string{"self-hosted", "linux"}}}))
	must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"no-such-label"}}))
	for i, enc := range jitConfigs[:2] {
		c, err := runnerapi.NewClientFromJITConfig(enc, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Connect(t.Context()); err != nil {
			t.Fatal(err)
		}
		j, err := c.NextJob(t.Context(), 0)
		if err != nil || j == nil {
			t.Fatalf("runner %d got no job: %v", i, err)
		}
		if err := c.StartJob(t.Context(), j.ID); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := c.CompleteJob(t.Context(), j.ID, ConclusionSuccess); err != nil {
				t.Fatal(err)
			}
		}
	}
	runID := itoa(run.ID)
	for _, st := range []string{"", "queued", "in_progress", "completed", "success"} {
		send("GET", "/repos/acme/app/actions/runs?status="+st, inst, "")
	}
	send("GET", "/repos/acme/app/actions/runs/"+runID, inst, "")
	send("GET", "/repos/acme/app/actions/runs?created=>=2000-01-01", pat, "")
	send("GET", "/orgs/acme/repos?per_page=1", pat, "")
	send("GET", "/orgs/acme/repos", inst, "")
	send("GET", "/orgs/nope/repos", pat, "")
	send("GET", "/repos/acme/app/actions/runs/"+runID+"/jobs", inst, "")
	send("GET", "/repos/acme/app/actions/runs/999999999", inst, "")
	send("GET", "/repos/acme/app/actions/jobs/"+itoa(run.Jobs[0].ID), inst, "")

	// Re-runs: refused while the run runs, then a new attempt; its jobs and attempts.
	pipe := w.pipeline(t)
	pipePath := "/repos/acme/app/actions/runs/" + itoa(pipe.ID)
	lint := w.playJob(t, "lint", ConclusionSuccess)
	send("POST", "/repos/acme/app/actions/jobs/"+itoa(lint)+"/rerun", inst, "") // 403 running
	send("POST", pipePath+"/rerun-failed-jobs", inst, "")                       // 403 running
	send("POST", pipePath+"/rerun", inst, "")                                   // 403 running
	w.playJob(t, "unit", ConclusionSuccess)
	failed := w.playJob(t, "unit", ConclusionFailure) // build and deploy are skipped
	send("POST", "/repos/acme/app/actions/jobs/"+itoa(failed)+"/rerun", inst, `{"enable_debug_logging":false}`)
	send("POST", "/repos/acme/app/actions/jobs/999999999/rerun", inst, "") // 404
	w.playJob(t, "unit", ConclusionSuccess)
	w.playJob(t, "build", ConclusionFailure)
	send("POST", pipePath+"/rerun-failed-jobs", inst, "")
	w.playJob(t, "build", ConclusionSuccess)
	w.playJob(t, "deploy", ConclusionSuccess)
	send("POST", pipePath+"/rerun", inst, "")
	send("GET", pipePath, inst, "")
	send("GET", pipePath+"/jobs?filter=all&per_page=3", inst, "")
	send("GET", pipePath+"/jobs?filter=latest", inst, "")
	send("GET", pipePath+"/attempts/2", inst, "")
	send("GET", pipePath+"/attempts/4", inst, "")
	send("GET", pipePath+"/attempts/9", inst, "") // 404
	send("GET", pipePath+"/attempts/3/jobs", inst, "")
	send("GET", pipePath+"/attempts/0/jobs", pat, "") // 404

	// The delivery log and redelivery, for org, repo and App hooks.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.sim.FlushWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	ds := w.sim.Deliveries()
	byHook := map[int64]int64{}
	for _, d := range ds {
		byHook[d.HookID] = d.ID
	}
	orgHookID := ds[0].HookID
	for hookID, dID := range byHook {
		switch hookID {
		case hookApp.HookID:
			send("GET", "/app/hook/deliveries?per_page=2", hookJWT(), "")
			send("GET", "/app/hook/deliveries/"+itoa(dID), hookJWT(), "")
			send("POST", "/app/hook/deliveries/"+itoa(dID)+"/attempts", hookJWT(), "")
		case repoHook.ID:
			base := "/repos/acme/app/hooks/" + itoa(hookID) + "/deliveries"
			send("GET", base, pat, "")
			send("GET", base+"/"+itoa(dID), pat, "")
			send("POST", base+"/"+itoa(dID)+"/attempts", pat, "")
		default:
			base := "/orgs/acme/hooks/" + itoa(hookID) + "/deliveries"
			send("GET", base+"?per_page=1", pat, "")
			send("GET", base+"/"+itoa(dID), pat, "")
			send("POST", base+"/"+itoa(dID)+"/attempts", pat, "")
		}
	}
	send("GET", "/orgs/acme/hooks/"+itoa(orgHookID)+"/deliveries/999999999", pat, "")

	// App endpoints and the rate limit.
	send("GET", "/app", jwt(), "")
	send("GET", "/app/installations", jwt(), "")
	send("GET", "/app/installations/"+itoa(w.inst.ID), jwt(), "")
	send("POST", "/app/installations/"+itoa(w.inst.ID)+"/access_tokens", jwt(), "")
	send("POST", "/app/installations/999999999/access_tokens", jwt(), "")
	send("GET", "/orgs/acme/installation", jwt(), "")
	send("GET", "/repos/acme/app/installation", jwt(), "")
	send("GET", "/rate_limit", inst, "")

	// Answers: every implemented route was exercised, every answer valid.
	doc := loadSpec(t, dir, w.sim.Routes())
	seen := map[string]bool{}
	for _, ex := range rec.got {
		var params [4]param
		rt, n := w.sim.routes.match(ex.req.Method, ex.req.URL.Path, &params)
		if rt == nil {
			t.Errorf("%s %s matched no route", ex.req.Method, ex.req.URL.Path)
			continue
		}
		seen[rt.id] = true
		if err := validateExchange(doc, rt, params[:n], ex); err != nil {
			t.Errorf("%s %s → %d does not conform: %v\nbody: %.600s", ex.req.Method, ex.req.URL.Path, ex.status, err, ex.body)
		}
	}
	var missed []string
	for _, id := range w.sim.Routes() {
		if !seen[id] {
			missed = append(missed, id)
		}
	}
	if len(missed) > 0 {
		t.Errorf("routes not exercised by the conformance test: %v", missed)
	}

	// Webhook payloads.
	schemas := compileWebhookSchemas(t, dir)
	got := hooks.received()
	if len(got) < 6 {
		t.Fatalf("got %d webhooks, want at least 6", len(got))
	}
	actions := map[string]int{}
	for _, h := range got {
		if h.header.Get("X-GitHub-Event") != "workflow_job" {
			t.Errorf("X-GitHub-Event = %q", h.header.Get("X-GitHub-Event"))
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(h.body))
		if err != nil {
			t.Fatal(err)
		}
		m := v.(map[string]any)
		// GitHub sends "enterprise" for enterprise-owned organizations, but the
		// published schema (which forbids unknown properties) does not list it.
		delete(m, "enterprise")
		action, _ := m["action"].(string)
		actions[action]++
		sch := schemas[action]
		if sch == nil {
			t.Errorf("no schema for action %q", action)
			continue
		}
		if err := sch.Validate(m); err != nil {
			t.Errorf("workflow_job %s payload does not conform: %#v", action, err)
		}
	}
	for _, a := range []string{"queued", "in_progress", "completed"} {
		if actions[a] == 0 {
			t.Errorf("no %s webhook validated", a)
		}
	}
}

func runnerByName(s *Sim, prefix, name string) (int64, error) {
	scope := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(prefix, "/repos/"), "/orgs/"), "/")
	for _, r := range s.Runners() {
		if r.Name == name && r.Scope != "" && strings.HasSuffix(r.Scope, scope) {
			return r.ID, nil
		}
	}
	return 0, fmt.Errorf("runner %s in %s not found", name, prefix)
}

func validateExchange(doc *openapi3.T, rt *route, params []param, ex exchange) error {
	item := doc.Paths.Find(rt.pattern)
	if item == nil {
		return fmt.Errorf("path %s not in the description", rt.pattern)
	}
	op := item.GetOperation(rt.method)
	if op == nil {
		return fmt.Errorf("operation %s not in the description", rt.id)
	}
	if ex.status >= 300 && op.Responses.Status(ex.status) == nil {
		// GitHub documents only some of its error answers; the others are checked
		// for GitHub's error shape.
		var e struct {
			Message          *string `json:"message"`
			DocumentationURL *string `json:"documentation_url"`
		}
		if err := json.Unmarshal(ex.body, &e); err != nil || e.Message == nil || e.DocumentationURL == nil {
			return fmt.Errorf("undocumented error %d is not in GitHub's error shape", ex.status)
		}
		return nil
	}
	pp := map[string]string{}
	for _, p := range params {
		pp[p.name] = p.value
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    ex.req,
			PathParams: pp,
			Route:      &routers.Route{Spec: doc, Path: rt.pattern, PathItem: item, Method: rt.method, Operation: op},
		},
		Status:  ex.status,
		Header:  ex.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	input.SetBodyBytes(ex.body)
	if ex.status == http.StatusNoContent || len(ex.body) == 0 {
		input.Options.ExcludeResponseBody = true
	}
	return openapi3filter.ValidateResponse(context.Background(), input)
}

func compileWebhookSchemas(t *testing.T, dir string) map[string]*jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, webhooksFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	// The library's uri-template check rejects templates GitHub itself sends
	// ("…/members{/member}"); check only that braces pair up.
	c.RegisterFormat(&jsonschema.Format{Name: "uri-template", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		depth := 0
		for _, ch := range s {
			switch ch {
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth < 0 || depth > 1 {
				return fmt.Errorf("unbalanced braces in %q", s)
			}
		}
		if depth != 0 {
			return fmt.Errorf("unbalanced braces in %q", s)
		}
		return nil
	}})
	const url = "https://octokit.github.io/webhooks/schema.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Schema{}
	actions := []string{"queued", "in_progress", "completed"}
	sort.Strings(actions)
	for _, a := range actions {
		sch, err := c.Compile(url + "#/definitions/workflow_job$" + a)
		if err != nil {
			t.Fatalf("compiling the workflow_job %s schema: %v", a, err)
		}
		out[a] = sch
	}
	return out
}
