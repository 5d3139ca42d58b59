package github

import (
	"context"
	"encoding/json"
	"fmt"

	gh "github.com/google/go-github/v88/github"
)

func (c *client) ListQueuedJobs(ctx context.Context, repo Scope, skip func(runID int64) bool) (QueuedJobs, error) {
	what := fmt.Sprintf("listing queued jobs in %s", repo)
	if repo.Kind != ScopeRepository {
		return QueuedJobs{}, fmt.Errorf("%s: only a repository scope lists jobs; use Scope.Repository for each repository", what)
	}
	h, err := c.host(repo)
	if err != nil {
		return QueuedJobs{}, fmt.Errorf("%s: %w", what, err)
	}
	c.mu.Lock()
	oldRuns, oldJobs := c.runLists[repo], c.jobLists[repo]
	c.mu.Unlock()
	runs, jobs := map[string]condPage{}, map[int64][]condPage{}
	var out QueuedJobs
	get := func(path string, prev condPage) (condPage, error) {
		p, notModified, err := c.getPage(ctx, h.api, path, what, prev)
		out.Requests++
		if notModified {
			out.NotModified++
		}
		return p, err
	}
	listed := map[int64]bool{}
	// A run with a started job is in_progress while its other jobs still queue (a big
	// matrix on few runners), so both kinds of runs are searched.
	for _, status := range []string{"queued", "in_progress"} {
		for page := 1; page > 0; {
			key := fmt.Sprintf("%s/%d", status, page)
			p, err := get(fmt.Sprintf("repos/%s/%s/actions/runs?status=%s&per_page=%d&page=%d", repo.Owner, repo.Repo, status, perPage, page), oldRuns[key])
			if err != nil {
				return QueuedJobs{}, err
			}
			runs[key] = p
			var body gh.WorkflowRuns
			if err := json.Unmarshal(p.body, &body); err != nil {
				return QueuedJobs{}, fmt.Errorf("%s: reading GitHub's answer: %w", what, err)
			}
			for _, run := range body.WorkflowRuns {
				id := run.GetID()
				if listed[id] {
					continue // it started between the two listings
				}
				listed[id] = true
				if skip != nil && skip(id) {
					out.Skipped = append(out.Skipped, id)
					if old, ok := oldJobs[id]; ok {
						jobs[id] = old
					}
					continue
				}
				pages, queued, err := runJobs(repo, id, oldJobs[id], get, what)
				if err != nil {
					return QueuedJobs{}, err
				}
				jobs[id] = pages
				out.Jobs = append(out.Jobs, queued...)
			}
			page = p.next
		}
	}
	// Runs no longer queued or in progress are forgotten with their pages.
	c.mu.Lock()
	c.runLists[repo], c.jobLists[repo] = runs, jobs
	c.mu.Unlock()
	return out, nil
}

// runJobs lists the jobs of one run, every page, and returns the pages to keep and the
// jobs still queued.
func runJobs(repo Scope, runID int64, old []condPage, get func(string, condPage) (condPage, error), what string) ([]condPage, []Job, error) {
	var pages []condPage
	var queued []Job
	for page := 1; page > 0; page = pages[len(pages)-1].next {
		var prev condPage
		if i := len(pages); i < len(old) {
			prev = old[i]
		}
		p, err := get(fmt.Sprintf("repos/%s/%s/actions/runs/%d/jobs?per_page=%d&page=%d", repo.Owner, repo.Repo, runID, perPage, page), prev)
		if err != nil {
			return nil, nil, err
		}
		pages = append(pages, p)
		var body gh.Jobs
		if err := json.Unmarshal(p.body, &body); err != nil {
			return nil, nil, fmt.Errorf("%s: reading GitHub's answer: %w", what, err)
		}
		for _, j := range body.Jobs {
			if j.GetStatus() != "queued" {
				continue
			}
			queued = append(queued, Job{
				ID:           j.GetID(),
				RunID:        j.GetRunID(),
				RunAttempt:   j.GetRunAttempt(),
				Name:         j.GetName(),
				WorkflowName: j.GetWorkflowName(),
				Owner:        repo.Owner,
				Repo:         repo.Repo,
				Labels:       j.Labels,
				Status:       j.GetStatus(),
				CreatedAt:    j.GetCreatedAt().Time,
			})
		}
	}
	return pages, queued, nil
}
