package github

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// Job assignment. Every repository, organization and enterprise has a scopeIndex:
// its idle runners and all its runners by (lower-case) label, and its queued jobs by
// label set. A queued job looks for a runner through the smallest idle set among its
// labels, so the work is O(runners that carry that label), not O(all runners). A runner
// that becomes idle looks at the heads of the queues whose label set it covers, so the
// work is O(distinct label sets queued in its scope).

type scopeIndex struct {
	idle   map[string]map[int64]*runner
	all    map[string]map[int64]*runner
	queues map[string]*jobQueue
}

type jobQueue struct {
	labels []string
	jobs   []*job
	head   int
}

func (st *state) index(k scopeKey) *scopeIndex {
	idx := st.indexes[k]
	if idx == nil {
		idx = &scopeIndex{idle: map[string]map[int64]*runner{}, all: map[string]map[int64]*runner{}, queues: map[string]*jobQueue{}}
		st.indexes[k] = idx
	}
	return idx
}

func addTo(m map[string]map[int64]*runner, r *runner) {
	for l := range r.labelSet {
		set := m[l]
		if set == nil {
			set = map[int64]*runner{}
			m[l] = set
		}
		set[r.id] = r
	}
}

func removeFrom(m map[string]map[int64]*runner, r *runner) {
	for l := range r.labelSet {
		if set := m[l]; set != nil {
			delete(set, r.id)
			if len(set) == 0 {
				delete(m, l)
			}
		}
	}
}

// jobScopes are the scopes whose runners may take a job of repository r.
func jobScopes(r *repo) []scopeKey {
	ks := make([]scopeKey, 0, 3)
	ks = append(ks, scopeKey{scopeRepo, r.id}, scopeKey{scopeOrg, r.org.id})
	if r.org.ent != nil {
		ks = append(ks, scopeKey{scopeEnterprise, r.org.ent.id})
	}
	return ks
}

func (r *runner) covers(labels []string) bool {
	for _, l := range labels {
		if !r.labelSet[l] {
			return false
		}
	}
	return true
}

// findRunner picks the idle runner with the lowest ID that may take j, or nil.
func (st *state) findRunner(j *job, idleOnly bool) *runner {
	rp := j.repo()
	for _, k := range jobScopes(rp) {
		idx := st.indexes[k]
		if idx == nil {
			continue
		}
		m := idx.all
		if idleOnly {
			m = idx.idle
		}
		var smallest map[int64]*runner
		for _, l := range j.lower {
			set := m[l]
			if len(set) == 0 {
				smallest = nil
				break
			}
			if smallest == nil || len(set) < len(smallest) {
				smallest = set
			}
		}
		var pick *runner
		for _, r := range smallest {
			if (pick == nil || r.id < pick.id) && r.covers(j.lower) && r.group.visibleTo(rp) {
				pick = r
			}
		}
		if pick != nil {
			return pick
		}
	}
	return nil
}

func (j *job) waiting() bool { return j.status == StatusQueued && j.runner == nil }

// first returns the oldest waiting job of q that ok accepts, dropping finished ones.
func (q *jobQueue) first(ok func(*job) bool) *job {
	for q.head < len(q.jobs) && !q.jobs[q.head].waiting() {
		q.jobs[q.head] = nil
		q.head++
	}
	if q.head > 64 && q.head > len(q.jobs)/2 {
		q.jobs = slices.Clone(q.jobs[q.head:])
		q.head = 0
	}
	for _, j := range q.jobs[q.head:] {
		if j.waiting() && ok(j) {
			return j
		}
	}
	return nil
}

// findJob picks the oldest waiting job runner r may take, or nil.
func (st *state) findJob(r *runner) *job {
	idx := st.indexes[r.scope.key()]
	if idx == nil {
		return nil
	}
	var best *job
	for key, q := range idx.queues {
		if !r.covers(q.labels) {
			continue
		}
		j := q.first(func(j *job) bool { return r.group.visibleTo(j.repo()) })
		if q.head == len(q.jobs) {
			delete(idx.queues, key)
		}
		if j != nil && (best == nil || j.id < best.id) {
			best = j
		}
	}
	return best
}

// enqueueLocked queues a new job: it is assigned at once if an idle runner matches,
// failed at once if none could ever match and the switch says so, else left waiting.
func (s *Sim) enqueueLocked(j *job) {
	j.events = append(j.events, TimelineEvent{Type: EventQueued, Time: j.created})
	s.emitJobLocked(j, "queued")
	if s.offerToScaleSetLocked(j) {
		return
	}
	if r := s.st.findRunner(j, true); r != nil {
		s.assignLocked(j, r)
		return
	}
	if s.st.failWithoutRunner && s.st.findRunner(j, false) == nil {
		now := s.now()
		j.status, j.conclusion, j.started, j.completed = StatusCompleted, ConclusionFailure, now, now
		j.events = append(j.events, TimelineEvent{Type: EventCompleted, Time: now})
		j.run.updated = now
		s.emitJobLocked(j, "completed")
		s.wf.completedLocked(j)
		return
	}
	for _, k := range jobScopes(j.repo()) {
		idx := s.st.index(k)
		q := idx.queues[j.labelKey]
		if q == nil {
			q = &jobQueue{labels: j.lower}
			idx.queues[j.labelKey] = q
		}
		q.jobs = append(q.jobs, j)
	}
}

func (s *Sim) assignLocked(j *job, r *runner) {
	now := s.now()
	j.runner, r.job = r, j
	j.runnerID, j.runnerName = r.id, r.name
	j.groupID, j.groupName = r.group.id, r.group.name
	j.assigned = now
	j.events = append(j.events, TimelineEvent{Type: EventAssigned, Time: now, RunnerID: r.id})
	removeFrom(s.st.index(r.scope.key()).idle, r)
	r.signal()
}

// runnerAvailableLocked is called when r may take work: it gets the oldest waiting
// job it matches, or joins the idle index.
func (s *Sim) runnerAvailableLocked(r *runner) {
	if !r.idle() {
		return
	}
	if r.scaleSet != nil {
		s.feedScaleSetLocked(r.scaleSet)
		return
	}
	if j := s.st.findJob(r); j != nil {
		s.assignLocked(j, r)
		return
	}
	addTo(s.st.index(r.scope.key()).idle, r)
}

// requeueLocked puts back a job whose runner left before starting it.
func (s *Sim) requeueLocked(j *job) {
	j.runner = nil
	j.runnerID, j.runnerName, j.groupID, j.groupName = 0, "", 0, ""
	if ss := j.scaleSet(); ss != nil {
		s.feedScaleSetLocked(ss)
		return
	}
	if r := s.st.findRunner(j, true); r != nil {
		s.assignLocked(j, r)
		return
	}
	for _, k := range jobScopes(j.repo()) {
		idx := s.st.index(k)
		q := idx.queues[j.labelKey]
		if q == nil {
			q = &jobQueue{labels: j.lower}
			idx.queues[j.labelKey] = q
		}
		// Keep the queue ordered by job ID so the job keeps its place.
		i, _ := slices.BinarySearchFunc(q.jobs[q.head:], j.id, func(a *job, id int64) int {
			if a == nil {
				return -1
			}
			return int(a.id - id)
		})
		q.jobs = slices.Insert(q.jobs, q.head+i, j)
	}
}

func (s *Sim) startJobLocked(r *runner, j *job) *apiError {
	if r.job != j {
		return newError(http.StatusConflict, "Job is not assigned to this runner")
	}
	if j.status != StatusQueued {
		return nil // a retried start is fine
	}
	now := s.now()
	j.status, j.started = StatusInProgress, now
	j.run.updated = now
	j.events = append(j.events, TimelineEvent{Type: EventStarted, Time: now, RunnerID: r.id})
	s.emitJobLocked(j, "in_progress")
	return nil
}

func (s *Sim) completeJobLocked(r *runner, j *job, conclusion string) *apiError {
	if r.job != j {
		return newError(http.StatusConflict, "Job is not assigned to this runner")
	}
	if j.status == StatusQueued {
		if e := s.startJobLocked(r, j); e != nil {
			return e
		}
	}
	now := s.now()
	j.status, j.conclusion, j.completed = StatusCompleted, conclusion, now
	j.run.updated = now
	j.events = append(j.events, TimelineEvent{Type: EventCompleted, Time: now, RunnerID: r.id})
	s.emitJobLocked(j, "completed")
	r.job = nil
	if r.ephemeral {
		s.removeRunnerLocked(r)
		s.st.actions.finished[r.id] = r.scope.key()
	} else {
		s.runnerAvailableLocked(r)
	}
	// The run's jobs that needed this one, queued once the runner is free to take one.
	s.wf.completedLocked(j)
	return nil
}

// registration describes a runner being registered.
type registration struct {
	name      string
	labels    []string
	group     *runnerGroup
	ephemeral bool
	defaults  bool
	replace   bool
	os, arch  string
	scaleSet  *scaleSet
}

// Default labels of a runner, as the actions runner registers them on Linux x64.
const (
	LabelSelfHosted = "self-hosted"
	defaultOS       = "Linux"
	defaultArch     = "X64"
)

// systemLabels are the labels GitHub types "read-only" even when a registration names
// them itself (a JIT request or config.sh --no-default-labels --labels self-hosted,...).
var systemLabels = map[string]bool{
	"self-hosted": true, "linux": true, "windows": true, "macos": true,
	"x64": true, "x86": true, "arm": true, "arm64": true,
}

// labelType is the type GitHub reports for a label a registration names.
func labelType(l string) string {
	if systemLabels[strings.ToLower(l)] {
		return "read-only"
	}
	return "custom"
}

func (s *Sim) registerRunnerLocked(sc scopeRef, reg registration) (*runner, *apiError) {
	nameKey := runnerNameKey{sc.key(), strings.ToLower(reg.name)}
	if other := s.st.runnerNames[nameKey]; other != nil {
		if !reg.replace || other.busy() {
			return nil, errValidation("A runner with the name " + reg.name + " already exists.")
		}
		s.removeRunnerLocked(other)
	}
	if reg.os == "" {
		reg.os = defaultOS
	}
	if reg.arch == "" {
		reg.arch = defaultArch
	}
	r := &runner{
		id: s.st.newID(), name: reg.name, os: reg.os, scope: sc, group: reg.group, ephemeral: reg.ephemeral,
		credential: randomToken("simr_", 32, false), created: s.now(),
		labelSet: map[string]bool{}, labelTypes: map[string]string{}, notify: make(chan struct{}, 1),
	}
	add := func(l, typ string) {
		k := strings.ToLower(l)
		if l == "" || r.labelSet[k] {
			return
		}
		r.labelSet[k] = true
		r.labels = append(r.labels, l)
		r.labelTypes[l] = typ
	}
	if reg.defaults {
		add(LabelSelfHosted, "read-only")
		add(reg.os, "read-only")
		add(reg.arch, "read-only")
	}
	for _, l := range reg.labels {
		l = strings.TrimSpace(l)
		add(l, labelType(l))
	}
	s.st.runners[r.id] = r
	s.st.runnerCreds[r.credential] = r
	s.st.runnerNames[nameKey] = r
	sc.runners()[r.id] = r
	if reg.group.runners != nil {
		reg.group.runners[r.id] = r
	}
	if reg.scaleSet != nil {
		r.scaleSet = reg.scaleSet
		reg.scaleSet.runners[r.id] = r
	} else {
		addTo(s.st.index(sc.key()).all, r)
	}
	return r, nil
}

func (s *Sim) removeRunnerLocked(r *runner) {
	if r.removed {
		return
	}
	idx := s.st.index(r.scope.key())
	removeFrom(idx.idle, r)
	removeFrom(idx.all, r)
	delete(s.st.runners, r.id)
	delete(s.st.runnerCreds, r.credential)
	delete(s.st.runnerNames, runnerNameKey{r.scope.key(), strings.ToLower(r.name)})
	delete(r.scope.runners(), r.id)
	if r.group.runners != nil {
		delete(r.group.runners, r.id)
	}
	if r.scaleSet != nil {
		delete(r.scaleSet.runners, r.id)
	}
	r.removed, r.online = true, false
	r.signal()
}

// runnerConfig is the JIT config of r; root is the simulator's root URL.
func (s *Sim) runnerConfig(root string, r *runner) runnerapi.Config {
	if s.opts.URL != "" {
		root = strings.TrimRight(s.opts.URL, "/")
	}
	return runnerapi.Config{URL: root, RunnerID: r.id, RunnerName: r.name, Credential: r.credential, Ephemeral: r.ephemeral, Labels: slices.Clone(r.labels)}
}

// Timeline event types of a job.
const (
	EventQueued    = "queued"
	EventAssigned  = "assigned"
	EventStarted   = "started"
	EventCompleted = "completed"
	// EventRunnerLost: the runner running the job stopped talking to GitHub
	// (Options.RunnerLostTimeout); the job fails.
	EventRunnerLost = "runner_lost"
)

// TimelineEvent is one step of a job's life.
type TimelineEvent struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	RunnerID int64     `json:"runner_id,omitempty"`
}
