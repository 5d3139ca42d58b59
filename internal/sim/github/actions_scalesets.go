// Actions service handlers: runner groups, runner scale sets, their JIT
// configurations and runners (agents).

package github

import (
	"net/http"
	"sort"
	"strings"
)

// groupsOf lists the runner groups a scale set of scope sc may join.
func groupsOf(sc scopeRef) []*runnerGroup {
	if sc.kind == scopeRepo {
		return []*runnerGroup{repoDefaultGroup}
	}
	out := make([]*runnerGroup, 0, len(sc.groups()))
	for _, g := range sc.groups() {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func groupOf(sc scopeRef, id int64) *runnerGroup {
	for _, g := range groupsOf(sc) {
		if g.id == id || (id == 0 && g.isDefault) {
			return g
		}
	}
	return nil
}

func list(items []any) map[string]any { return map[string]any{"count": len(items), "value": items} }

// hRunnerGroups is GET _apis/runtime/runnergroups/?groupName=: the groups of the
// scope, or the one named (case-insensitively).
func (s *Sim) hRunnerGroups(c *call, sc scopeRef) *apiError {
	name := c.r.URL.Query().Get("groupName")
	out := []any{}
	for _, g := range groupsOf(sc) {
		if name == "" || strings.EqualFold(g.name, name) {
			out = append(out, map[string]any{"id": g.id, "name": g.name, "size": len(g.runners), "isDefaultGroup": g.isDefault})
		}
	}
	writeJSON(c.w, http.StatusOK, list(out))
	return nil
}

func (s *Sim) scaleSetJSON(ss *scaleSet) map[string]any {
	labels := make([]map[string]string, 0, len(ss.labels))
	for _, l := range ss.labels {
		labels = append(labels, map[string]string{"type": "System", "name": l})
	}
	st := ss.stats()
	return map[string]any{
		"id":                 ss.id,
		"name":               ss.name,
		"runnerGroupId":      ss.group.id,
		"runnerGroupName":    ss.group.name,
		"labels":             labels,
		"RunnerSetting":      map[string]any{"disableUpdate": ss.disableUpdate},
		"createdOn":          ss.created.UTC(),
		"runnerJitConfigUrl": s.serviceURL() + "_apis/runtime/runnerscalesets/" + itoa(ss.id) + "/generatejitconfig",
		"statistics":         st,
	}
}

// hListScaleSets is GET _apis/runtime/runnerscalesets?runnerGroupId=&name=.
func (s *Sim) hListScaleSets(c *call, sc scopeRef) *apiError {
	q := c.r.URL.Query()
	out := []any{}
	for _, ss := range s.st.actions.byScope[sc.key()] {
		if (q.Get("name") == "" || strings.EqualFold(ss.name, q.Get("name"))) &&
			(q.Get("runnerGroupId") == "" || itoa(ss.group.id) == q.Get("runnerGroupId")) {
			out = append(out, s.scaleSetJSON(ss))
		}
	}
	writeJSON(c.w, http.StatusOK, list(out))
	return nil
}

// scaleSetBody is the body of POST and PATCH runnerscalesets.
type scaleSetBody struct {
	Name          string `json:"name"`
	RunnerGroupID int64  `json:"runnerGroupId"`
	Labels        []struct {
		Name string `json:"name"`
	} `json:"labels"`
	RunnerSetting struct {
		DisableUpdate bool `json:"disableUpdate"`
	} `json:"RunnerSetting"`
}

func (b *scaleSetBody) labelNames() []string {
	out := make([]string, 0, len(b.Labels))
	for _, l := range b.Labels {
		out = append(out, l.Name)
	}
	return out
}

// nameTaken reports whether another scale set of group g has name.
func (s *Sim) nameTaken(sc scopeRef, g *runnerGroup, name string, self *scaleSet) bool {
	for _, o := range s.st.actions.byScope[sc.key()] {
		if o != self && o.group == g && strings.EqualFold(o.name, name) {
			return true
		}
	}
	return false
}

func validScaleSetName(name string) *apiError {
	if strings.TrimSpace(name) == "" || len(name) > 100 {
		return actionsError(http.StatusBadRequest, "ArgumentException", "A runner scale set needs a name of 1 to 100 characters.")
	}
	return nil
}

// hCreateScaleSet is POST _apis/runtime/runnerscalesets: the name (also a label) is
// unique within its runner group.
func (s *Sim) hCreateScaleSet(c *call, sc scopeRef) *apiError {
	var b scaleSetBody
	if e := decodeBody(c.r.Body, &b); e != nil {
		return e
	}
	if e := validScaleSetName(b.Name); e != nil {
		return e
	}
	g := groupOf(sc, b.RunnerGroupID)
	if g == nil {
		return actionsError(http.StatusBadRequest, "RunnerGroupNotFoundException", "Runner group "+itoa(b.RunnerGroupID)+" not found.")
	}
	if s.nameTaken(sc, g, b.Name, nil) {
		return actionsError(http.StatusConflict, "RunnerScaleSetExistsException",
			"A runner scale set named "+b.Name+" already exists in runner group "+g.name+".")
	}
	ss := s.newScaleSetLocked(sc, g, b.Name, b.labelNames(), b.RunnerSetting.DisableUpdate)
	writeJSON(c.w, http.StatusOK, s.scaleSetJSON(ss))
	return nil
}

func (s *Sim) hGetScaleSet(c *call, ss *scaleSet) *apiError {
	writeJSON(c.w, http.StatusOK, s.scaleSetJSON(ss))
	return nil
}

// hUpdateScaleSet is PATCH _apis/runtime/runnerscalesets/{id}: name, group, labels
// and settings; fields left out keep their value.
func (s *Sim) hUpdateScaleSet(c *call, ss *scaleSet) *apiError {
	var b scaleSetBody
	if e := decodeBody(c.r.Body, &b); e != nil {
		return e
	}
	name, g := ss.name, ss.group
	if b.Name != "" {
		if e := validScaleSetName(b.Name); e != nil {
			return e
		}
		name = b.Name
	}
	if b.RunnerGroupID != 0 {
		if g = groupOf(ss.scope, b.RunnerGroupID); g == nil {
			return actionsError(http.StatusBadRequest, "RunnerGroupNotFoundException", "Runner group "+itoa(b.RunnerGroupID)+" not found.")
		}
	}
	if s.nameTaken(ss.scope, g, name, ss) {
		return actionsError(http.StatusConflict, "RunnerScaleSetExistsException",
			"A runner scale set named "+name+" already exists in runner group "+g.name+".")
	}
	labels := ss.labels[1:]
	if b.Labels != nil {
		labels = b.labelNames()
	}
	ss.group = g
	ss.setLabels(name, labels)
	ss.disableUpdate = b.RunnerSetting.DisableUpdate
	s.offerWaitingLocked(ss)
	writeJSON(c.w, http.StatusOK, s.scaleSetJSON(ss))
	return nil
}

func (s *Sim) hDeleteScaleSet(c *call, ss *scaleSet) *apiError {
	s.deleteScaleSetLocked(ss)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// jitBody is the body of generatejitconfig.
type jitBody struct {
	Name       string `json:"name"`
	WorkFolder string `json:"workFolder"`
}

// hScaleSetJIT is POST _apis/runtime/runnerscalesets/{id}/generatejitconfig: an
// ephemeral runner of the scale set; a name taken in the scope is
// AgentExistsException.
func (s *Sim) hScaleSetJIT(c *call, ss *scaleSet) *apiError {
	var b jitBody
	if e := decodeBody(c.r.Body, &b); e != nil {
		return e
	}
	if strings.TrimSpace(b.Name) == "" || len(b.Name) > 255 {
		return actionsError(http.StatusBadRequest, "ArgumentException", "A runner needs a name of 1 to 255 characters.")
	}
	if s.st.runnerNames[runnerNameKey{ss.scope.key(), strings.ToLower(b.Name)}] != nil {
		return actionsError(http.StatusConflict, "AgentExistsException", "An agent named "+b.Name+" already exists in the pool.")
	}
	r, e := s.registerRunnerLocked(ss.scope, registration{name: b.Name, labels: ss.labels, group: ss.group, ephemeral: true, scaleSet: ss})
	if e != nil {
		return e
	}
	cfg := s.runnerConfig(c.u.html, r)
	cfg.WorkFolder = b.WorkFolder
	writeJSON(c.w, http.StatusOK, map[string]any{"runner": agentJSON(r), "encodedJITConfig": cfg.Encode()})
	return nil
}

func agentJSON(r *runner) map[string]any {
	m := map[string]any{"id": r.id, "name": r.name, "runnerScaleSetId": 0, "status": "offline", "busy": r.busy(),
		"enabled": true, "ephemeral": r.ephemeral}
	if r.scaleSet != nil {
		m["runnerScaleSetId"] = r.scaleSet.id
	}
	if r.online {
		m["status"] = "online"
	}
	return m
}

// hListAgents is GET _apis/distributedtask/pools/0/agents?agentName=.
func (s *Sim) hListAgents(c *call, sc scopeRef) *apiError {
	name := c.r.URL.Query().Get("agentName")
	var rs []*runner
	for _, r := range sc.runners() {
		if name == "" || strings.EqualFold(r.name, name) {
			rs = append(rs, r)
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
	out := make([]any, 0, len(rs))
	for _, r := range rs {
		out = append(out, agentJSON(r))
	}
	writeJSON(c.w, http.StatusOK, list(out))
	return nil
}

func (s *Sim) hGetAgent(c *call, r *runner) *apiError {
	writeJSON(c.w, http.StatusOK, agentJSON(r))
	return nil
}

// hDeleteAgent removes a runner; one running a job is JobStillRunningException. An
// ephemeral runner that ran its job and left on its own answers 204, as GitHub's
// service does (actions-runner-controller removes every runner that exited 0 this way
// and accepts only 204); a runner the scope never had, or one removed by a DELETE,
// answers 404 AgentNotFoundException.
func (s *Sim) hDeleteAgent(c *call, sc scopeRef) *apiError {
	id := parseID(c.param("id"))
	r := sc.runners()[id]
	if r == nil {
		if k, ok := s.st.actions.finished[id]; ok && k == sc.key() {
			c.w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return actionsError(http.StatusNotFound, "AgentNotFoundException", "No agent exists with ID "+c.param("id")+".")
	}
	if r.busy() {
		return actionsError(http.StatusBadRequest, "JobStillRunningException", "Agent "+r.name+" is running a job and cannot be removed.")
	}
	s.removeRunnerLocked(r)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
