package demand

import (
	"strings"
	"time"
)

// Repo names a repository on a GitHub host.
type Repo struct {
	Host, Owner, Name string
}

func repoOf(j Job) Repo {
	return Repo{Host: strings.ToLower(j.Host), Owner: strings.ToLower(j.Owner), Name: strings.ToLower(j.Repo)}
}

// ActiveRepos returns the repositories the Tracker has seen jobs of and still remembers
// (queued jobs, or jobs started or finished within the last two hours): the ones a
// resync should poll.
func (t *Tracker) ActiveRepos() []Repo {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[Repo]struct{}{}
	for _, tj := range t.jobs {
		seen[tj.repo] = struct{}{}
	}
	out := make([]Repo, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	return out
}

// KnownRuns returns the workflow runs of repo the Tracker holds a job of, each with
// when it first heard of one of them.
func (t *Tracker) KnownRuns(repo Repo) map[int64]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int64]time.Time{}
	for _, tj := range t.jobs {
		if tj.job.RunID == 0 || tj.repo != repo {
			continue
		}
		if at, ok := out[tj.job.RunID]; !ok || tj.heardAt.Before(at) {
			out[tj.job.RunID] = tj.heardAt
		}
	}
	return out
}

// SyncRepo makes the Tracker agree with GitHub's list of a repository's queued jobs,
// taken at listedAt: jobs GitHub lists that the Tracker missed (their webhook was lost)
// are queued, and jobs the Tracker holds as queued since before listedAt that GitHub
// no longer lists (their in_progress or completed webhook was lost) are dropped. The
// jobs of the runs in unlisted (queued or in progress, their jobs not listed) are left
// as they are. It returns how many jobs it added and dropped.
func (t *Tracker) SyncRepo(repo Repo, queued []Job, unlisted map[int64]bool, listedAt time.Time) (added, dropped int) {
	listed := make(map[int64]struct{}, len(queued))
	for _, j := range queued {
		listed[j.ID] = struct{}{}
		t.mu.Lock()
		_, known := t.jobs[j.ID]
		t.mu.Unlock()
		if !known {
			t.Observe(JobEvent{Action: ActionQueued, Job: j, ObservedAt: listedAt})
			added++
		}
	}
	var stale []Job
	t.mu.Lock()
	for id, tj := range t.jobs {
		if tj.state != stateQueued || tj.repo != repo || !tj.queuedAt.Before(listedAt) || unlisted[tj.job.RunID] {
			continue
		}
		if _, ok := listed[id]; !ok {
			stale = append(stale, tj.job)
		}
	}
	t.mu.Unlock()
	for _, j := range stale {
		t.Observe(JobEvent{Action: ActionCompleted, Job: j, ObservedAt: listedAt})
		dropped++
	}
	return added, dropped
}

// MarkRebuilt records that demand was rebuilt from GitHub after a start: resync
// completed a pass over every pool's repositories. Until then the Tracker knows only
// what webhooks told it since the start, and pools must not retire runners for lack
// of demand (a queued job the previous controller knew of may be waiting for them).
func (t *Tracker) MarkRebuilt() {
	t.mu.Lock()
	t.rebuilt = true
	t.mu.Unlock()
}

// Rebuilt reports whether MarkRebuilt was called.
func (t *Tracker) Rebuilt() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rebuilt
}
