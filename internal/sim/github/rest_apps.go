// REST handlers of GitHub Apps and installations, and GET /rate_limit.

package github

import (
	"net/http"
	"sort"
	"strconv"
	"time"
)

func (s *Sim) hGetApp(c *call) *apiError {
	writeJSON(c.w, http.StatusOK, appJSON(c.u, c.cred.app))
	return nil
}

func (s *Sim) hListInstallations(c *call) *apiError {
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
	return s.locked(func(c *call) *apiError {
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
	})
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
