package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v88/github"
)

// runKey names one run of one repository in the client's conditional-request cache.
type runKey struct {
	repo Scope
	run  int64
}

func (c *client) GetWorkflowRun(ctx context.Context, repo Scope, runID int64) (WorkflowRun, error) {
	what := fmt.Sprintf("getting workflow run %d of %s", runID, repo)
	h, err := c.repoHost(repo, what)
	if err != nil {
		return WorkflowRun{}, err
	}
	key := runKey{repo, runID}
	c.mu.Lock()
	prev := c.runPages[key]
	c.mu.Unlock()
	p, _, err := c.getPage(ctx, h.api, fmt.Sprintf("repos/%s/%s/actions/runs/%d", repo.Owner, repo.Repo, runID), what, prev)
	if err != nil {
		if IsNotFound(err) {
			c.forgetRun(key)
		}
		return WorkflowRun{}, err
	}
	var body gh.WorkflowRun
	if err := json.Unmarshal(p.body, &body); err != nil {
		return WorkflowRun{}, fmt.Errorf("%s: reading GitHub's answer: %w", what, err)
	}
	run := WorkflowRun{ID: body.GetID(), RunAttempt: int64(body.GetRunAttempt()), Status: body.GetStatus(), Conclusion: body.GetConclusion()}
	if run.Completed() {
		// A completed run is read once more at most (its jobs are read next): keep
		// nothing of it.
		c.forgetRun(key)
	} else {
		c.mu.Lock()
		c.runPages[key] = p
		c.mu.Unlock()
	}
	return run, nil
}

func (c *client) forgetRun(key runKey) {
	c.mu.Lock()
	delete(c.runPages, key)
	c.mu.Unlock()
}

func (c *client) ListWorkflowRunJobs(ctx context.Context, repo Scope, runID int64) ([]WorkflowJob, error) {
	what := fmt.Sprintf("listing the jobs of workflow run %d of %s", runID, repo)
	h, err := c.repoHost(repo, what)
	if err != nil {
		return nil, err
	}
	opts := &gh.ListWorkflowJobsOptions{Filter: "all", ListOptions: gh.ListOptions{PerPage: perPage}}
	out := []WorkflowJob{}
	for {
		jobs, resp, err := h.api.Actions.ListWorkflowJobs(ctx, repo.Owner, repo.Repo, runID, opts)
		if err != nil {
			return nil, c.classify(err, what, nil)
		}
		for _, j := range jobs.Jobs {
			out = append(out, WorkflowJob{
				ID: j.GetID(), RunID: j.GetRunID(), RunAttempt: j.GetRunAttempt(), Name: j.GetName(),
				Status: j.GetStatus(), Conclusion: j.GetConclusion(), RunnerName: j.GetRunnerName(),
				CompletedAt: j.GetCompletedAt().Time,
			})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func (c *client) RerunJob(ctx context.Context, repo Scope, jobID int64) error {
	what := fmt.Sprintf("re-running job %d of %s", jobID, repo)
	h, err := c.repoHost(repo, what)
	if err != nil {
		return err
	}
	_, err = h.api.Actions.RerunJobByID(ctx, repo.Owner, repo.Repo, jobID)
	return c.classifyRerun(err, what)
}

func (c *client) RerunFailedJobs(ctx context.Context, repo Scope, runID int64) error {
	what := fmt.Sprintf("re-running the failed jobs of workflow run %d of %s", runID, repo)
	h, err := c.repoHost(repo, what)
	if err != nil {
		return err
	}
	_, err = h.api.Actions.RerunFailedJobsByID(ctx, repo.Owner, repo.Repo, runID)
	return c.classifyRerun(err, what)
}

// classifyRerun tells GitHub's 403 answers to a re-run apart: the run is still running
// ("The workflow run containing this job is already running", "This workflow is already
// running": cli/cli#9221), GitHub will not re-run it ("This workflow run cannot be
// retried", past 50 re-runs), or — any other 403 — the credentials may not (Unauthorized,
// as classify says).
func (c *client) classifyRerun(err error, what string) error {
	if er, ok := errors.AsType[*gh.ErrorResponse](err); ok && er.Response != nil && er.Response.StatusCode == http.StatusForbidden {
		msg := strings.ToLower(er.Message)
		switch {
		case strings.Contains(msg, "already running"):
			return NewRunInProgressError(what+": the workflow run has not completed", err)
		case strings.Contains(msg, "cannot be retried"), strings.Contains(msg, "maximum"):
			return NewNotRerunnableError(what+": GitHub will not re-run it", err)
		}
	}
	return c.classify(err, what, nil)
}

// repoHost is the host client of a repository scope.
func (c *client) repoHost(repo Scope, what string) (*hostClient, error) {
	if repo.Kind != ScopeRepository {
		return nil, fmt.Errorf("%s: workflow runs belong to a repository; use Scope.Repository", what)
	}
	h, err := c.host(repo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return h, nil
}
