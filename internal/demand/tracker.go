package demand

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// Bounds on what the Tracker remembers.
const (
	// QueuedJobTTL: GitHub cancels a job that waits 24 hours for a runner.
	QueuedJobTTL = 24 * time.Hour
	// tombstoneTTL: how long a started or finished job is remembered, so that a late
	// or replayed "queued" delivery for it is not counted as new demand.
	tombstoneTTL = 2 * time.Hour
)

type jobState int

const (
	stateQueued jobState = iota
	stateInProgress
	stateDone
)

type trackedJob struct {
	job      Job
	state    jobState
	pool     PoolKey
	routed   bool
	queuedAt time.Time // when Gantry first saw it queued
	seenAt   time.Time // when Gantry last heard of it
	heardAt  time.Time // when Gantry first heard of it
	repo     Repo      // repoOf(job), lower-cased once
	counted  bool      // counted in the repos of its pool (heardOf)
	until    time.Time // forget after
	// startedAt and doneAt are when Gantry first heard a runner took the job and that
	// it completed: the usage record's picked-up time (usage.go).
	startedAt, doneAt time.Time
}

// Demand is one pool's demand.
type Demand struct {
	// Queued is the number of jobs routed to the pool and not yet picked up.
	Queued int
	// OldestQueuedAt is when the oldest of them was first seen queued.
	OldestQueuedAt time.Time
}

// Tracker holds, per pool, the jobs that are queued and not yet picked up. It is safe
// for concurrent use. Observe is idempotent: a replayed or duplicated event changes
// nothing, and events may arrive out of order (a late "queued" after "in_progress" is
// ignored).
type Tracker struct {
	router *Router
	clock  clock.PassiveClock

	mu     sync.Mutex
	jobs   map[int64]*trackedJob
	queued map[PoolKey]map[int64]struct{}
	notify func(pool PoolKey, rose bool)
	// running maps a runner's name to the job it runs, from in_progress events.
	running      map[string]Job
	notifyRunner func(runnerName string)
	// pickup receives how long each picked-up job waited, from queued to in_progress.
	pickup func(pool PoolKey, waited time.Duration)
	// arrival receives each job first seen queued for a pool, and when.
	arrival func(pool PoolKey, at time.Time)
	// repos holds, per pool, the repositories of the jobs routed to it that the Tracker
	// still remembers: PoolSnapshot's Repos, kept as jobs come and go rather than found
	// by walking every job (two hours of them) on each pool reconcile.
	repos map[PoolKey]map[Repo]*repoSeen
	// rebuilt is set once demand was rebuilt from GitHub after a start (MarkRebuilt).
	rebuilt bool
	// log receives a line for each queued self-hosted job that matches no pool.
	log logr.Logger
}

// NewTracker returns a Tracker routing with router.
func NewTracker(router *Router, clk clock.PassiveClock) *Tracker {
	return &Tracker{
		router:  router,
		clock:   clk,
		jobs:    map[int64]*trackedJob{},
		queued:  map[PoolKey]map[int64]struct{}{},
		running: map[string]Job{},
		repos:   map[PoolKey]map[Repo]*repoSeen{},
	}
}

// SetRunnerNotify sets the function called, outside the Tracker's lock, with the name
// of each runner that started or finished a job. The Runner controller wires it to its
// work queue.
func (t *Tracker) SetRunnerNotify(f func(runnerName string)) {
	t.mu.Lock()
	t.notifyRunner = f
	t.mu.Unlock()
}

// RunnerJob returns the job a runner is running, as GitHub's in_progress event said.
func (t *Tracker) RunnerJob(runnerName string) (Job, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.running[runnerName]
	return j, ok
}

// ForgetRunner drops what the Tracker knows of a runner that is gone.
func (t *Tracker) ForgetRunner(runnerName string) {
	t.mu.Lock()
	delete(t.running, runnerName)
	t.mu.Unlock()
}

// SetNotify sets the function called, outside the Tracker's lock, with each pool whose
// demand changed, and whether it rose (a job was queued for the pool) or only fell.
// The RunnerPool controller wires it to its work queue.
func (t *Tracker) SetNotify(f func(pool PoolKey, rose bool)) {
	t.mu.Lock()
	t.notify = f
	t.mu.Unlock()
}

// SetPickupObserver sets the function told how long each picked-up job waited.
func (t *Tracker) SetPickupObserver(f func(pool PoolKey, waited time.Duration)) {
	t.mu.Lock()
	t.pickup = f
	t.mu.Unlock()
}

// SetArrivalObserver sets the function told of each job first seen queued for a pool:
// the arrivals spec.warm.predictive sizes the idle floor from.
func (t *Tracker) SetArrivalObserver(f func(pool PoolKey, at time.Time)) {
	t.mu.Lock()
	t.arrival = f
	t.mu.Unlock()
}

// Router returns the Tracker's Router.
func (t *Tracker) Router() *Router { return t.router }

// Observe records one job event and wakes the pool whose demand it changes.
func (t *Tracker) Observe(ev JobEvent) {
	now := t.clock.Now()
	var changed []PoolKey // demand fell
	var runnerChanged string
	var unmatched bool
	var arrived *PoolKey
	var picked *struct {
		pool   PoolKey
		waited time.Duration
	}

	t.mu.Lock()
	tj := t.jobs[ev.Job.ID]
	switch ev.Action {
	case ActionQueued:
		if tj != nil {
			break // already queued, started or done: a duplicate or a late delivery
		}
		tj = &trackedJob{job: ev.Job, repo: repoOf(ev.Job), state: stateQueued, queuedAt: now, seenAt: now, heardAt: now, until: now.Add(QueuedJobTTL)}
		t.jobs[ev.Job.ID] = tj
		if p := t.router.route(ev.Job); p != nil {
			if !p.External {
				t.addQueued(tj, p.Key)
				arrived = &p.Key
			}
		} else if selfHosted(ev.Job) {
			unmatched = true
		}
	case ActionInProgress, ActionCompleted:
		if r := ev.Job.RunnerName; r != "" {
			if ev.Action == ActionInProgress {
				t.running[r] = ev.Job
			} else if j, ok := t.running[r]; ok && j.ID == ev.Job.ID {
				j.learn(ev.Job) // how it ended, for its usage record
				t.running[r] = j
			}
			runnerChanged = r
		}
		state := stateInProgress
		if ev.Action == ActionCompleted {
			state = stateDone
		}
		if tj == nil {
			tj = &trackedJob{job: ev.Job, repo: repoOf(ev.Job), state: state, seenAt: now, heardAt: now, until: now.Add(tombstoneTTL)}
			t.jobs[ev.Job.ID] = tj
			tj.heard(ev.Action, now)
			break
		}
		tj.seenAt = now
		tj.job.learn(ev.Job)
		tj.heard(ev.Action, now)
		t.heardOf(tj)
		if tj.state == stateQueued {
			if tj.routed {
				t.removeQueued(tj)
				changed = append(changed, tj.pool)
				if t.pickup != nil && ev.Action == ActionInProgress {
					picked = &struct {
						pool   PoolKey
						waited time.Duration
					}{tj.pool, now.Sub(tj.queuedAt)}
				}
			}
		}
		if state > tj.state {
			tj.state = state
		}
		tj.until = now.Add(tombstoneTTL)
	case ActionWaiting:
		// Waiting for an environment's protection rules: no runner is needed until
		// GitHub queues it.
	}
	notify, pickup, notifyRunner, logger, arrival := t.notify, t.pickup, t.notifyRunner, t.log, t.arrival
	t.mu.Unlock()

	if arrived != nil && arrival != nil {
		arrival(*arrived, now)
	}
	if unmatched {
		reportUnmatched(logger, ev.Job, t.router.Explain(ev.Job))
	}
	if runnerChanged != "" && notifyRunner != nil {
		notifyRunner(runnerChanged)
	}
	if picked != nil && pickup != nil {
		pickup(picked.pool, picked.waited)
	}
	if notify != nil {
		if arrived != nil {
			notify(*arrived, true)
		}
		for _, k := range changed {
			notify(k, false)
		}
	}
}

// Reroute routes every queued job again, after pools were added, changed or removed,
// and wakes each pool whose demand changed.
func (t *Tracker) Reroute() {
	changed := map[PoolKey]bool{} // pool → whether its demand rose
	t.mu.Lock()
	for _, tj := range t.jobs {
		if tj.state != stateQueued {
			continue
		}
		p := t.router.route(tj.job)
		ok := p != nil && !p.External
		var key PoolKey
		if ok {
			key = p.Key
		}
		if tj.routed && ok && key == tj.pool {
			continue
		}
		if tj.routed {
			t.removeQueued(tj)
			if _, seen := changed[tj.pool]; !seen {
				changed[tj.pool] = false
			}
		}
		if ok {
			t.addQueued(tj, key)
			changed[key] = true
		}
	}
	notify := t.notify
	t.mu.Unlock()
	if notify != nil {
		for k, rose := range changed {
			notify(k, rose)
		}
	}
}

// Demand returns a pool's demand.
func (t *Tracker) Demand(pool PoolKey) Demand {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.demandLocked(pool)
}

func (t *Tracker) demandLocked(pool PoolKey) Demand {
	ids := t.queued[pool]
	d := Demand{Queued: len(ids)}
	for id := range ids {
		if q := t.jobs[id].queuedAt; d.OldestQueuedAt.IsZero() || q.Before(d.OldestQueuedAt) {
			d.OldestQueuedAt = q
		}
	}
	return d
}

// QueuedCount returns how many jobs routed to the pool wait for a runner.
func (t *Tracker) QueuedCount(pool PoolKey) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queued[pool])
}

// QueuedJobs returns the jobs queued for a pool, oldest first is not promised.
func (t *Tracker) QueuedJobs(pool PoolKey) []Job {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Job, 0, len(t.queued[pool]))
	for id := range t.queued[pool] {
		out = append(out, t.jobs[id].job)
	}
	return out
}

// Prune forgets queued jobs older than QueuedJobTTL and tombstones past their time,
// and wakes the pools whose demand fell. Call it periodically.
func (t *Tracker) Prune() {
	now := t.clock.Now()
	changed := map[PoolKey]struct{}{}
	t.mu.Lock()
	for id, tj := range t.jobs {
		if now.Before(tj.until) {
			continue
		}
		if tj.state == stateQueued && tj.routed {
			t.removeQueued(tj)
			changed[tj.pool] = struct{}{}
		}
		t.forgetRepo(tj)
		delete(t.jobs, id)
	}
	notify := t.notify
	t.mu.Unlock()
	if notify != nil {
		for k := range changed {
			notify(k, false)
		}
	}
}

func (t *Tracker) addQueued(tj *trackedJob, key PoolKey) {
	if tj.pool != key {
		t.forgetRepo(tj) // routed to another pool before
		tj.pool = key
	}
	t.heardOf(tj)
	tj.routed = true
	m := t.queued[key]
	if m == nil {
		m = map[int64]struct{}{}
		t.queued[key] = m
	}
	m[tj.job.ID] = struct{}{}
}

func (t *Tracker) removeQueued(tj *trackedJob) {
	if m := t.queued[tj.pool]; m != nil {
		delete(m, tj.job.ID)
		if len(m) == 0 {
			delete(t.queued, tj.pool)
		}
	}
	tj.routed = false
}
