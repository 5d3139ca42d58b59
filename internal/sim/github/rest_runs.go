// REST handlers of repositories, workflow runs and jobs.

package github

import (
	"net/http"
	"sort"
	"strings"
	"time"
)

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
func (s *Sim) hListOrgRepos(c *call, sc scopeRef, _ int64) *apiError {
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

func (s *Sim) hListRuns(c *call, sc scopeRef, _ int64) *apiError {
	filter := c.r.URL.Query().Get("status")
	branch := c.r.URL.Query().Get("branch")
	created := func(time.Time) bool { return true }
	if v := c.r.URL.Query().Get("created"); v != "" {
		if m, ok := createdFilter(v); ok {
			created = m
		}
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

func (s *Sim) hGetRun(c *call, _ scopeRef, wr *workflowRun) *apiError {
	writeJSON(c.w, http.StatusOK, s.st.runJSON(c.u, wr))
	return nil
}

// hListRunJobs lists a run's jobs: the latest execution of each (filter=latest, the
// default), or every execution of every attempt (filter=all).
func (s *Sim) hListRunJobs(c *call, _ scopeRef, wr *workflowRun) *apiError {
	jobs := wr.graph.latestJobs()
	if c.r.URL.Query().Get("filter") == "all" {
		jobs = wr.jobs
	}
	writeJobs(c, jobs)
	return nil
}

func (s *Sim) hGetJob(c *call, _ scopeRef, j *job) *apiError {
	writeJSON(c.w, http.StatusOK, s.st.jobJSON(c.u, j))
	return nil
}
