// Actions service: the state of runner scale sets, their message sessions and their
// job messages, and how jobs are assigned to scale sets. It is part of the one model
// (state.go) and guarded by the same lock.

package github

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of the Actions service's timings (Options).
const (
	defaultPollHold          = 50 * time.Second
	defaultSessionTimeout    = 2 * time.Minute
	defaultServiceTokenTTL   = time.Hour
	defaultScaleSetAssignTTL = 5 * time.Minute
	// maxJobMessages is the most job messages one answer of the message queue carries.
	maxJobMessages = 50
	// maxReassignments is how often a job not picked up in time is assigned again.
	maxReassignments = 3
)

// Job message types of the message queue, as the Actions service spells them.
const (
	msgJobAvailable = "JobAvailable"
	msgJobAssigned  = "JobAssigned"
	msgJobStarted   = "JobStarted"
	msgJobCompleted = "JobCompleted"
)

// actionsState is the Actions service's part of the model.
type actionsState struct {
	scaleSets map[int64]*scaleSet
	byScope   map[scopeKey][]*scaleSet // ordered by ID
	// adminTokens and queueTokens are the bearer tokens the service issued.
	adminTokens map[string]*adminToken
	queueTokens map[string]*session
	sessions    map[string]*session // by session ID
	requests    map[int64]*job      // by runner request ID
	// finished are the ephemeral runners that ran their job and left the service on
	// their own, by id, with their scope: a DELETE of one answers 204, as GitHub's does.
	finished map[int64]scopeKey
}

func newActionsState() actionsState {
	return actionsState{
		scaleSets:   map[int64]*scaleSet{},
		byScope:     map[scopeKey][]*scaleSet{},
		adminTokens: map[string]*adminToken{},
		queueTokens: map[string]*session{},
		sessions:    map[string]*session{},
		requests:    map[int64]*job{},
		finished:    map[int64]scopeKey{},
	}
}

// adminToken is the JWT POST /actions/runner-registration hands out for a scope.
type adminToken struct {
	scope   scopeRef
	expires time.Time
}

// scaleSet is a runner scale set: a named group of JIT runners whose jobs are handed
// out through its message session.
type scaleSet struct {
	id            int64
	name          string
	scope         scopeRef
	group         *runnerGroup
	labels        []string        // as given, name first
	labelSet      map[string]bool // lower-case, name included
	disableUpdate bool
	created       time.Time
	deleted       bool

	session *session
	runners map[int64]*runner
	jobs    []*job // assigned and not completed, oldest first

	// pending are job messages not yet in a queue message; unacked are the queue
	// messages answered and not yet acknowledged.
	pending []json.RawMessage
	unacked []*queueMessage
	nextMsg int64
	notify  chan struct{}
}

type queueMessage struct {
	id   int64
	body string // JSON array of job messages
}

func (ss *scaleSet) signal() {
	select {
	case ss.notify <- struct{}{}:
	default:
	}
}

// covers reports whether the scale set's labels (its name among them) hold every
// label of a job, case-insensitively.
func (ss *scaleSet) covers(lower []string) bool {
	for _, l := range lower {
		if !ss.labelSet[l] {
			return false
		}
	}
	return true
}

// session is the one message session of a scale set.
type session struct {
	id         string
	owner      string
	set        *scaleSet
	queueToken string
	expires    time.Time // of the queue token
	// seen is the last time the session was used; polls counts long polls in flight.
	// A session unused for Options.ActionsSessionTimeout is gone.
	seen  time.Time
	polls int
	// delivered is the highest message ID this session was answered.
	delivered int64
}

// ssJob is a job's life with a scale set.
type ssJob struct {
	set       *scaleSet
	requestID int64
	acquired  bool
	assigns   int       // how often it was assigned
	at        time.Time // when it was last assigned
}

// Scale set of a job, or nil.
func (j *job) scaleSet() *scaleSet {
	if j.ss == nil {
		return nil
	}
	return j.ss.set
}

// sessionAliveLocked reports whether ss has a session that has not expired,
// dropping the one that has.
func (s *Sim) sessionAliveLocked(ss *scaleSet) bool {
	se := ss.session
	if se == nil {
		return false
	}
	if se.polls == 0 && s.now().Sub(se.seen) >= s.opts.ActionsSessionTimeout {
		s.closeSessionLocked(se)
		return false
	}
	return true
}

func (s *Sim) closeSessionLocked(se *session) {
	if se.set.session == se {
		se.set.session = nil
	}
	delete(s.st.actions.sessions, se.id)
	delete(s.st.actions.queueTokens, se.queueToken)
	se.set.signal()
}

// matchScaleSet finds the scale set, in the job's scopes and visible to its
// repository, whose labels cover the job's; the one with the lowest ID wins.
func (st *state) matchScaleSet(j *job) *scaleSet {
	rp := j.repo()
	for _, k := range jobScopes(rp) {
		for _, ss := range st.actions.byScope[k] {
			if ss.covers(j.lower) && ss.group.visibleTo(rp) {
				return ss
			}
		}
	}
	return nil
}

// offerToScaleSetLocked assigns a queued job to the scale set that matches it, if
// any, and tells its listener (JobAvailable). It reports whether one took it.
func (s *Sim) offerToScaleSetLocked(j *job) bool {
	ss := s.st.matchScaleSet(j)
	if ss == nil {
		return false
	}
	if j.ss == nil {
		j.ss = &ssJob{requestID: s.st.newID()}
		s.st.actions.requests[j.ss.requestID] = j
	}
	j.ss.set, j.ss.acquired, j.ss.at = ss, false, s.now()
	j.ss.assigns++
	ss.jobs = append(ss.jobs, j)
	s.jobMessageLocked(j, msgJobAvailable, nil)
	return true
}

// reassignLocked assigns again, up to maxReassignments times, the jobs of every scale
// set that no runner picked up within Options.ScaleSetAssignTimeout, as GitHub does.
func (s *Sim) reassignLocked() {
	now := s.now()
	for _, ss := range s.st.actions.scaleSets {
		for _, j := range slices.Clone(ss.jobs) {
			if j.runner != nil || j.status != StatusQueued || j.ss.assigns > maxReassignments ||
				now.Sub(j.ss.at) < s.opts.ScaleSetAssignTimeout {
				continue
			}
			s.dropFromScaleSetLocked(j)
			if !s.offerToScaleSetLocked(j) {
				j.ss.set = nil
				s.requeueLocked(j)
			}
		}
	}
}

func (s *Sim) dropFromScaleSetLocked(j *job) {
	ss := j.scaleSet()
	if ss == nil {
		return
	}
	if i := slices.Index(ss.jobs, j); i >= 0 {
		ss.jobs = slices.Delete(ss.jobs, i, i+1)
	}
}

// nextJob finds the oldest acquired job of scale set ss that no runner has.
func (ss *scaleSet) nextJob() *job {
	for _, j := range ss.jobs {
		if j.ss.acquired && j.runner == nil && j.status == StatusQueued {
			return j
		}
	}
	return nil
}

// scaleSetEventLocked turns a job's progress into messages for its scale set's
// listener: JobStarted and JobCompleted.
func (s *Sim) scaleSetEventLocked(j *job, action string) {
	ss := j.scaleSet()
	if ss == nil {
		return
	}
	switch action {
	case StatusInProgress:
		s.jobMessageLocked(j, msgJobStarted, nil)
	case StatusCompleted:
		result := map[string]string{ConclusionSuccess: "succeeded", ConclusionFailure: "failed", ConclusionCancelled: "canceled"}[j.conclusion]
		s.jobMessageLocked(j, msgJobCompleted, map[string]any{"result": result})
		s.dropFromScaleSetLocked(j)
		delete(s.st.actions.requests, j.ss.requestID)
	}
}

// jobMessageLocked queues one job message for ss's listener.
func (s *Sim) jobMessageLocked(j *job, typ string, extra map[string]any) {
	ss := j.scaleSet()
	rp := j.repo()
	m := map[string]any{
		"messageType":        typ,
		"runnerRequestId":    j.ss.requestID,
		"repositoryName":     rp.name,
		"ownerName":          rp.org.login,
		"jobId":              strconv.FormatInt(j.id, 10),
		"jobWorkflowRef":     rp.fullName() + "/" + j.run.path + "@refs/heads/" + j.run.headBranch,
		"jobDisplayName":     j.name,
		"workflowRunId":      j.run.id,
		"eventName":          j.run.event,
		"requestLabels":      j.labels,
		"queueTime":          j.created.UTC(),
		"scaleSetAssignTime": j.ss.at.UTC(),
		"runnerAssignTime":   zeroOr(j.assigned),
		"finishTime":         zeroOr(j.completed),
	}
	switch typ {
	case msgJobAvailable:
		m["acquireJobUrl"] = s.serviceURL() + "_apis/runtime/runnerscalesets/" + itoa(ss.id) + "/acquirejobs"
	case msgJobStarted, msgJobCompleted:
		m["runnerId"], m["runnerName"] = j.runnerID, j.runnerName
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	ss.pending = append(ss.pending, b)
	ss.signal()
}

func zeroOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// statistics are a scale set's counts as every message carries them.
type statistics struct {
	TotalAvailableJobs     int `json:"totalAvailableJobs"`
	TotalAcquiredJobs      int `json:"totalAcquiredJobs"`
	TotalAssignedJobs      int `json:"totalAssignedJobs"`
	TotalRunningJobs       int `json:"totalRunningJobs"`
	TotalRegisteredRunners int `json:"totalRegisteredRunners"`
	TotalBusyRunners       int `json:"totalBusyRunners"`
	TotalIdleRunners       int `json:"totalIdleRunners"`
}

func (ss *scaleSet) stats() statistics {
	var st statistics
	for _, j := range ss.jobs {
		st.TotalAssignedJobs++
		switch {
		case j.status == StatusInProgress:
			st.TotalRunningJobs++
		case !j.ss.acquired:
			st.TotalAvailableJobs++
		case j.runner == nil:
			st.TotalAcquiredJobs++
		}
	}
	for _, r := range ss.runners {
		st.TotalRegisteredRunners++
		switch {
		case r.busy():
			st.TotalBusyRunners++
		case r.online:
			st.TotalIdleRunners++
		}
	}
	return st
}

// newScaleSetLocked adds a scale set; the caller checked its name and group.
func (s *Sim) newScaleSetLocked(sc scopeRef, g *runnerGroup, name string, labels []string, disableUpdate bool) *scaleSet {
	ss := &scaleSet{id: s.st.newID(), scope: sc, group: g, created: s.now(), disableUpdate: disableUpdate,
		runners: map[int64]*runner{}, notify: make(chan struct{}, 1), nextMsg: 1}
	ss.setLabels(name, labels)
	s.st.actions.scaleSets[ss.id] = ss
	k := sc.key()
	s.st.actions.byScope[k] = append(s.st.actions.byScope[k], ss)
	s.offerWaitingLocked(ss)
	return ss
}

func (ss *scaleSet) setLabels(name string, labels []string) {
	ss.name = name
	ss.labels = []string{name}
	ss.labelSet = map[string]bool{strings.ToLower(name): true}
	for _, l := range labels {
		if k := strings.ToLower(strings.TrimSpace(l)); k != "" && !ss.labelSet[k] {
			ss.labelSet[k] = true
			ss.labels = append(ss.labels, strings.TrimSpace(l))
		}
	}
}

// offerWaitingLocked hands a new or changed scale set the waiting jobs it matches
// that no scale set has yet, oldest first.
func (s *Sim) offerWaitingLocked(ss *scaleSet) {
	for _, j := range s.st.jobOrder {
		if j.waiting() && j.scaleSet() == nil && ss.covers(j.lower) && ss.group.visibleTo(j.repo()) &&
			slices.Contains(jobScopes(j.repo()), ss.scope.key()) {
			s.offerToScaleSetLocked(j)
		}
	}
}

// deleteScaleSetLocked removes a scale set: its session ends, its idle runners are
// removed (busy ones finish their job), its waiting jobs go to another scale set or
// back to the queue.
func (s *Sim) deleteScaleSetLocked(ss *scaleSet) {
	ss.deleted = true
	if ss.session != nil {
		s.closeSessionLocked(ss.session)
	}
	delete(s.st.actions.scaleSets, ss.id)
	k := ss.scope.key()
	s.st.actions.byScope[k] = slices.DeleteFunc(s.st.actions.byScope[k], func(o *scaleSet) bool { return o == ss })
	for _, r := range ss.runners {
		if !r.busy() {
			s.removeRunnerLocked(r)
		}
	}
	for _, j := range slices.Clone(ss.jobs) {
		if j.runner != nil {
			continue
		}
		s.dropFromScaleSetLocked(j)
		j.ss.set = nil
		if !s.offerToScaleSetLocked(j) {
			s.requeueLocked(j)
		}
	}
}

// feedScaleSetLocked gives the acquired jobs of ss to its idle runners, oldest job
// and lowest runner ID first.
func (s *Sim) feedScaleSetLocked(ss *scaleSet) {
	ids := make([]int64, 0, len(ss.runners))
	for id, r := range ss.runners {
		if r.idle() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := ss.nextJob()
		if j == nil {
			return
		}
		s.assignLocked(j, ss.runners[id])
	}
}
