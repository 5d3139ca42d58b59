// REST handlers of the re-run protocol: re-running a job, a run's failed jobs and a run,
// and reading a run's attempts. Their state and rules are in rerun_state.go.
//
// The endpoints are GitHub's (docs.github.com, REST API endpoints for workflow runs and
// for workflow jobs; @octokit/openapi): 201 with an empty object once the new attempt is
// made, 403 for what GitHub refuses. Every one is under /repos/{owner}/{repo}/actions/, so
// an installation token needs the Actions permission (write for a re-run, read to read,
// permissions.go) and a classic PAT the repo scope, as GitHub documents them.

package github

import (
	"net/http"
	"slices"
	"strconv"
)

// Refusals of the re-run endpoints, as GitHub words them.
const (
	// msgJobRunRunning answers a job's re-run while its run has not completed
	// (cli/cli#9221; the answer as NVIDIA-NeMo/RL#1193 quotes it).
	msgJobRunRunning = "The workflow run containing this job is already running"
	// msgRunRunning answers a run's re-run while it has not completed, and
	// msgRunNotRetriable one GitHub refuses for the run itself (both quoted in
	// metabase/metabase#70916). GitHub publishes no wording for a run past its 50
	// re-runs, for a run without a failed job asked to re-run its failed jobs, or for a
	// job of an earlier attempt: the simulator refuses them with msgRunNotRetriable.
	msgRunRunning      = "This workflow is already running"
	msgRunNotRetriable = "This workflow run cannot be retried"

	docsRerunJob    = "https://docs.github.com/rest/actions/workflow-runs#re-run-a-job-from-a-workflow-run"
	docsRerunFailed = "https://docs.github.com/rest/actions/workflow-runs#re-run-failed-jobs-from-a-workflow-run"
	docsRerunRun    = "https://docs.github.com/rest/actions/workflow-runs#re-run-a-workflow"
)

// addRoutes adds the re-run protocol's routes to rt.
func (w *Workflows) addRoutes(rt *router) {
	s, repo := w.s, []string{"repo"}
	const runs = "/repos/{owner}/{repo}/actions/runs/{run_id}"
	rt.add(http.MethodPost, "/repos/{owner}/{repo}/actions/jobs/{job_id}/rerun", authToken, repo,
		withRerunBody(lookup(s, scopeRepo, "job_id", jobIn, w.hRerunJob)))
	rt.add(http.MethodPost, runs+"/rerun-failed-jobs", authToken, repo,
		withRerunBody(lookup(s, scopeRepo, "run_id", runIn, w.hRerunFailedJobs)))
	rt.add(http.MethodPost, runs+"/rerun", authToken, repo,
		withRerunBody(lookup(s, scopeRepo, "run_id", runIn, w.hRerunRun)))
	rt.add(http.MethodGet, runs+"/attempts/{attempt_number}", authToken, repo, lookup(s, scopeRepo, "run_id", runIn, w.hGetAttempt))
	rt.add(http.MethodGet, runs+"/attempts/{attempt_number}/jobs", authToken, repo, lookup(s, scopeRepo, "run_id", runIn, w.hListAttemptJobs))
}

// rerunBody is the re-run endpoints' optional body. enable_debugger is the job
// endpoint's alone; the simulator has no logs to make verbose.
type rerunBody struct {
	EnableDebugLogging *bool `json:"enable_debug_logging"`
	EnableDebugger     *bool `json:"enable_debugger"`
}

// withRerunBody checks the body (400 malformed, 422 of the wrong shape) before h runs.
func withRerunBody(h func(*call) *apiError) func(*call) *apiError {
	return func(c *call) *apiError {
		var b rerunBody
		if e := decodeBody(c.r.Body, &b); e != nil {
			return e
		}
		return h(c)
	}
}

// created answers a re-run GitHub accepted: 201 and an empty object.
func created(c *call) *apiError {
	writeJSON(c.w, http.StatusCreated, struct{}{})
	return nil
}

// hRerunJob re-runs job j and the jobs that need it, in a new attempt of its run.
func (w *Workflows) hRerunJob(c *call, _ scopeRef, j *job) *apiError {
	if e := w.hRerunJobLocked(j); e != nil {
		return e
	}
	return created(c)
}

func (w *Workflows) hRerunJobLocked(j *job) *apiError {
	g := j.run.graph
	if st, _ := g.statusAt(g.attempt()); st != StatusCompleted {
		return rerunError(msgJobRunRunning, docsRerunJob)
	}
	if j.node.latest() != j {
		return rerunError(msgRunNotRetriable, docsRerunJob)
	}
	return w.rerunLocked(g, HowRerunJob, []*graphNode{j.node}, []*job{j}, msgJobRunRunning, docsRerunJob)
}

// failedConclusions are the conclusions "re-run failed jobs" re-runs.
var failedConclusions = []string{ConclusionFailure, ConclusionCancelled, "timed_out"}

// hRerunFailedJobs re-runs the run's failed jobs (failedConclusions) and those that
// need them.
func (w *Workflows) hRerunFailedJobs(c *call, _ scopeRef, wr *workflowRun) *apiError {
	if e := w.rerunFailedLocked(wr); e != nil {
		return e
	}
	return created(c)
}

func (w *Workflows) rerunFailedLocked(wr *workflowRun) *apiError {
	g := wr.graph
	if st, _ := g.statusAt(g.attempt()); st != StatusCompleted {
		return rerunError(msgRunRunning, docsRerunFailed)
	}
	var targets []*graphNode
	var failed []*job
	for _, n := range g.nodes {
		if j := n.latest(); j != nil && slices.Contains(failedConclusions, j.conclusion) {
			targets, failed = append(targets, n), append(failed, j)
		}
	}
	if len(targets) == 0 {
		return rerunError(msgRunNotRetriable, docsRerunFailed)
	}
	return w.rerunLocked(g, HowRerunFailedJobs, targets, failed, msgRunRunning, docsRerunFailed)
}

// hRerunRun re-runs every job of the run.
func (w *Workflows) hRerunRun(c *call, _ scopeRef, wr *workflowRun) *apiError {
	g := wr.graph
	all := make([]*job, 0, len(g.nodes))
	for _, n := range g.nodes {
		if j := n.latest(); j != nil {
			all = append(all, j)
		}
	}
	if e := w.rerunLocked(g, HowRerunRun, g.nodes, all, msgRunRunning, docsRerunRun); e != nil {
		return e
	}
	return created(c)
}

// attemptParam is the run's attempt the path names; 404 for one it never had.
func attemptParam(c *call, g *runGraph) (int, *apiError) {
	n, err := strconv.Atoi(c.param("attempt_number"))
	if err != nil || n < 1 || n > g.attempt() {
		return 0, errNotFound()
	}
	return n, nil
}

// hGetAttempt is the run as of one of its attempts.
func (w *Workflows) hGetAttempt(c *call, _ scopeRef, wr *workflowRun) *apiError {
	n, e := attemptParam(c, wr.graph)
	if e != nil {
		return e
	}
	writeJSON(c.w, http.StatusOK, w.s.st.runAttemptJSON(c.u, wr, n))
	return nil
}

// hListAttemptJobs lists the jobs one attempt ran: a re-run attempt holds only the jobs it
// re-ran.
func (w *Workflows) hListAttemptJobs(c *call, _ scopeRef, wr *workflowRun) *apiError {
	n, e := attemptParam(c, wr.graph)
	if e != nil {
		return e
	}
	writeJobs(c, wr.graph.attempts[n-1].jobs)
	return nil
}

// writeJobs answers a page of jobs.
func writeJobs(c *call, jobs []*job) {
	from, to := c.paginate(len(jobs))
	out := make([]map[string]any, 0, to-from)
	for _, j := range jobs[from:to] {
		out = append(out, c.s.st.jobJSON(c.u, j))
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"total_count": len(jobs), "jobs": out})
}

func sortJobsByID(jobs []*job) {
	slices.SortFunc(jobs, func(a, b *job) int { return int(a.id - b.id) })
}
