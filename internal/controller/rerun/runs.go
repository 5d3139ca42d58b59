package rerun

import (
	"context"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/internal/github"
)

// runKey names a workflow run: its repository scope (host and OWNER/REPO) and id.
type runKey struct {
	repo github.Scope
	id   int64
}

// runEntry is what this process last read of one run, shared by every killed job of
// the run: one reading serves them all. Its lock is held while a job of the run is
// decided and re-run, so two jobs of one run are never re-run at once.
type runEntry struct {
	mu sync.Mutex
	// read is when run (and, once it completed, jobs) was read; zero: never.
	read time.Time
	run  github.WorkflowRun
	jobs []github.WorkflowJob
	// called is when this process last asked GitHub to re-run a job of the run: until
	// settleAfterCall has passed, nothing else of the run is re-run (the new attempt may
	// take a moment to show in GitHub's answers).
	called time.Time
	used   time.Time
}

// settleAfterCall is how long a run is left alone after a re-run of one of its jobs.
const settleAfterCall = 30 * time.Second

// runs holds a runEntry per run with a killed job waiting. Its zero value is ready.
type runs struct {
	mu sync.Mutex
	m  map[runKey]*runEntry
}

// entryIdle is how long an entry no reconcile used is kept.
const entryIdle = 30 * time.Minute

// lock returns the run's entry, locked: the caller unlocks it.
func (r *runs) lock(key runKey, now time.Time) *runEntry {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[runKey]*runEntry{}
	}
	e := r.m[key]
	if e == nil {
		e = &runEntry{}
		r.m[key] = e
	}
	for k, old := range r.m {
		if old != e && old.mu.TryLock() {
			if now.Sub(old.used) > entryIdle {
				delete(r.m, k)
			}
			old.mu.Unlock()
		}
	}
	r.mu.Unlock()
	e.mu.Lock()
	e.used = now
	return e
}

// refresh reads the run again, and its jobs once it completed, unless what the entry
// holds was read less than maxAge ago. calls counts the requests made.
func (e *runEntry) refresh(ctx context.Context, gh github.Runs, key runKey, now time.Time, maxAge time.Duration) error {
	if !e.read.IsZero() && now.Sub(e.read) < maxAge {
		return nil
	}
	githubCalls.WithLabelValues("get_run").Inc()
	run, err := gh.GetWorkflowRun(ctx, key.repo, key.id)
	if err != nil {
		return err
	}
	var jobs []github.WorkflowJob
	if run.Completed() {
		githubCalls.WithLabelValues("list_jobs").Inc()
		if jobs, err = gh.ListWorkflowRunJobs(ctx, key.repo, key.id); err != nil {
			return err
		}
	}
	e.read, e.run, e.jobs = now, run, jobs
	return nil
}

// invalidate forgets what was read: the next decision reads the run again.
func (e *runEntry) invalidate() { e.read = time.Time{} }
