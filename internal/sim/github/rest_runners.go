// REST handlers of self-hosted runners: registration and remove tokens, JIT
// configurations, runners and runner groups.

package github

import (
	"net/http"
	"sort"
	"strings"
	"time"
)

func (s *Sim) hToken(kind scopeKind, remove bool) func(*call) *apiError {
	return s.scoped(kind, "", func(c *call, sc scopeRef, _ int64) *apiError {
		tok := randomToken("A", 28, true)
		exp := s.now().Add(s.opts.RegistrationTokenTTL)
		s.st.regTokens[tok] = &regToken{scope: sc, remove: remove, expires: exp}
		s.st.sweepRegTokens(s.now())
		writeJSON(c.w, http.StatusCreated, map[string]string{"token": tok, "expires_at": exp.Format("2006-01-02T15:04:05.000-07:00")})
		return nil
	})
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

// hGenerateJIT registers a JIT runner with exactly the request's labels: unlike
// config.sh, GitHub adds no default labels (self-hosted, OS, architecture) to it.
func (s *Sim) hGenerateJIT(kind scopeKind) func(*call) *apiError {
	return scopedBody(s, kind, func(c *call, sc scopeRef, req *jitRequest) *apiError {
		g, e := s.st.groupByID(sc, *req.RunnerGroupID)
		if e != nil {
			return e
		}
		rn, e := s.registerRunnerLocked(sc, registration{name: req.Name, labels: req.Labels, group: g, ephemeral: true})
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
	})
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
	return s.scoped(kind, "", func(c *call, sc scopeRef, _ int64) *apiError {
		name := c.r.URL.Query().Get("name")
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
	})
}

func (s *Sim) hGetRunner(kind scopeKind) func(*call) *apiError {
	return lookup(s, kind, "runner_id", runnerIn, func(c *call, _ scopeRef, r *runner) *apiError {
		writeJSON(c.w, http.StatusOK, s.st.renderRunner(r))
		return nil
	})
}

func (s *Sim) hDeleteRunner(kind scopeKind) func(*call) *apiError {
	return lookup(s, kind, "runner_id", runnerIn, func(c *call, _ scopeRef, r *runner) *apiError {
		if r.busy() {
			return newError(http.StatusUnprocessableEntity, `Bad request - Runner "`+r.name+`" is still running a job"`)
		}
		s.removeRunnerLocked(r)
		c.w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func (s *Sim) hListGroups(kind scopeKind) func(*call) *apiError {
	return s.scoped(kind, "", func(c *call, sc scopeRef, _ int64) *apiError {
		q := c.r.URL.Query()
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
	})
}

func (s *Sim) hGetGroup(kind scopeKind) func(*call) *apiError {
	return lookup(s, kind, "runner_group_id", groupIn, func(c *call, sc scopeRef, g *runnerGroup) *apiError {
		writeJSON(c.w, http.StatusOK, groupJSON(c.u, sc.path(), g, false))
		return nil
	})
}
