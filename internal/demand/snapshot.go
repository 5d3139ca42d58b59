package demand

import (
	"iter"
	"time"
)

// PoolSnapshot is what the Tracker knows of one pool at one moment, read under one
// lock: all a pool reconcile asks of it.
type PoolSnapshot struct {
	// Demand is the pool's queued jobs.
	Demand Demand
	// Rebuilt says whether demand was rebuilt from GitHub since the start (MarkRebuilt).
	Rebuilt bool
	// Repos are the repositories of the jobs routed to the pool that the Tracker still
	// remembers (queued, or started or finished within tombstoneTTL), each with the
	// last time it heard of one of them.
	Repos map[Repo]time.Time
	// running holds the runners, of those the snapshot was asked about, that GitHub
	// said started a job (in_progress) they have not been forgotten since; done those of
	// them whose job GitHub said completed.
	running map[string]struct{}
	done    map[string]struct{}
	// Elsewhere names runners a demand source says run a job although they are not
	// among those the snapshot was taken for: their Runner is gone already (its pod
	// exited), and the source has not yet heard that their job completed. A scale set
	// still counts their jobs in its assigned jobs, so the pool counts them busy.
	Elsewhere []string
	// Answer numbers the demand source's answer the snapshot's demand is as of, counting
	// up from 1 as answers come; 0 when the source has no such answers (webhooks).
	Answer uint64
	// Lag is how many of the runners that answer's job messages say run a job its own
	// count of running jobs no longer has: jobs completed before the answer was sent,
	// whose JobCompleted messages are still to come. 0 for webhooks.
	Lag int
}

// WithRunners returns the snapshot with a demand source's own word on the runners it
// names: those it says run a job (running) and those it says finished one (done,
// which also ran one); and the runners running a job elsewhere. Its word wins over the
// Tracker's for those runners: a scale-set pool's runners are also named by the
// organization's webhooks, which say a job completed before the service's count lets
// go of it, so a runner the source still says runs a job is not done yet. The Tracker's
// word stays for the runners the source does not name (it was restarted, or forgot).
func (s PoolSnapshot) WithRunners(running, done, elsewhere []string, answer uint64) PoolSnapshot {
	out := s
	out.running = addNames(s.running, running, done)
	if len(running) > 0 && len(s.done) > 0 {
		out.done = make(map[string]struct{}, len(s.done))
		for name := range s.done {
			out.done[name] = struct{}{}
		}
		for _, name := range running {
			delete(out.done, name)
		}
	}
	out.done = addNames(out.done, done)
	out.Elsewhere, out.Answer = elsewhere, answer
	return out
}

func addNames(base map[string]struct{}, lists ...[]string) map[string]struct{} {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n == 0 {
		return base
	}
	out := make(map[string]struct{}, len(base)+n)
	for k := range base {
		out[k] = struct{}{}
	}
	for _, l := range lists {
		for _, name := range l {
			out[name] = struct{}{}
		}
	}
	return out
}

// Running reports whether the runner, one of those the snapshot was taken for, runs a
// job as GitHub's in_progress event said.
func (s PoolSnapshot) Running(runnerName string) bool {
	_, ok := s.running[runnerName]
	return ok
}

// Done reports whether the runner, one of those the snapshot was taken for, finished its
// job as GitHub's completed event said: an ephemeral runner on its way out, whatever its
// pod and status say yet.
func (s PoolSnapshot) Done(runnerName string) bool {
	_, ok := s.done[runnerName]
	return ok
}

// Snapshot returns what the Tracker knows of pool, and which of runners (nil: none
// asked about) run a job.
func (t *Tracker) Snapshot(pool PoolKey, runners iter.Seq[string]) PoolSnapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := PoolSnapshot{Demand: t.demandLocked(pool), Rebuilt: t.rebuilt, Repos: make(map[Repo]time.Time, len(t.repos[pool]))}
	for r, seen := range t.repos[pool] {
		s.Repos[r] = seen.last
	}
	if runners == nil {
		return s
	}
	for name := range runners {
		if j, ok := t.running[name]; ok {
			if s.running == nil {
				s.running = map[string]struct{}{}
			}
			s.running[name] = struct{}{}
			if t.doneLocked(j) {
				if s.done == nil {
					s.done = map[string]struct{}{}
				}
				s.done[name] = struct{}{}
			}
		}
	}
	return s
}

// Finished reports whether GitHub said the runner's job completed: an ephemeral runner
// that did has left GitHub on its own.
func (t *Tracker) Finished(runnerName string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.running[runnerName]
	return ok && t.doneLocked(j)
}

func (t *Tracker) doneLocked(j Job) bool {
	tj := t.jobs[j.ID]
	return tj != nil && tj.state == stateDone
}

// repoSeen is one repository of a pool's remembered jobs: how many of them, and the
// last time the Tracker heard of one.
type repoSeen struct {
	jobs int
	last time.Time
}

// heardOf counts a job routed to a pool under its repository, or moves the
// repository's last time to the job's. Call it with the lock held, after setting
// tj.pool (on routing) or tj.seenAt.
func (t *Tracker) heardOf(tj *trackedJob) {
	if tj.pool == (PoolKey{}) {
		return
	}
	m := t.repos[tj.pool]
	if m == nil {
		m = map[Repo]*repoSeen{}
		t.repos[tj.pool] = m
	}
	seen := m[tj.repo]
	if seen == nil {
		seen = &repoSeen{}
		m[tj.repo] = seen
	}
	if !tj.counted {
		seen.jobs++
		tj.counted = true
	}
	if tj.seenAt.After(seen.last) {
		seen.last = tj.seenAt
	}
}

// forgetRepo uncounts a job from its pool's repositories: it is forgotten, or routed
// to another pool. The repository goes with its last job. Call it with the lock held.
func (t *Tracker) forgetRepo(tj *trackedJob) {
	if !tj.counted {
		return
	}
	tj.counted = false
	m := t.repos[tj.pool]
	seen := m[tj.repo]
	if seen == nil {
		return
	}
	if seen.jobs--; seen.jobs <= 0 {
		delete(m, tj.repo)
		if len(m) == 0 {
			delete(t.repos, tj.pool)
		}
	}
}
