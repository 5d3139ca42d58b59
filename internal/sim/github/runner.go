package github

import (
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// serveRunner serves the runner API (package runnerapi documents it).
func (s *Sim) serveRunner(w http.ResponseWriter, r *http.Request, root string) {
	p := r.URL.Path
	if p == runnerapi.PathRegister {
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
			return
		}
		if e := s.runnerRegister(w, r, root); e != nil {
			e.write(w)
		}
		return
	}
	rn, e := s.runnerAuth(r)
	if e != nil {
		e.write(w)
		return
	}
	switch {
	case p == runnerapi.PathSession && r.Method == http.MethodPost:
		e = s.runnerConnect(w, rn)
	case p == runnerapi.PathSession && r.Method == http.MethodDelete:
		e = s.runnerDisconnect(w, rn)
	case p == runnerapi.PathNextJob && r.Method == http.MethodGet:
		e = s.runnerNextJob(w, r, rn)
	default:
		id, action, ok := runnerapi.ParseJobPath(p)
		switch {
		case !ok:
			e = errNotFound()
		case r.Method != http.MethodPost:
			e = newError(http.StatusMethodNotAllowed, "Method Not Allowed")
		case action == "start":
			e = s.runnerJob(w, rn, id, func(j *job) *apiError { return s.startJobLocked(rn, j) })
		case action == "renew":
			e = s.runnerJob(w, rn, id, func(j *job) *apiError {
				if rn.job != j || j.status != StatusInProgress {
					return newError(http.StatusConflict, "Job is not running on this runner")
				}
				return nil
			})
		default:
			var req runnerapi.CompleteRequest
			if e = decodeBody(r.Body, &req); e == nil {
				e = validConclusion(&req.Conclusion)
			}
			if e == nil {
				e = s.runnerJob(w, rn, id, func(j *job) *apiError { return s.completeJobLocked(rn, j, req.Conclusion) })
			}
		}
	}
	if e != nil {
		e.write(w)
	}
}

func validConclusion(c *string) *apiError {
	switch *c {
	case "":
		*c = ConclusionSuccess
	case ConclusionSuccess, ConclusionFailure, ConclusionCancelled:
	default:
		return errInvalid("conclusion must be success, failure or cancelled") //nolint:misspell // GitHub's spelling
	}
	return nil
}

// runnerAuth finds the runner of the request's credential: 401 for an unknown one
// (never issued, or the runner was removed).
func (s *Sim) runnerAuth(r *http.Request) (*runner, *apiError) {
	_, secret, ok := parseAuthorization(r.Header.Get("Authorization"))
	if !ok {
		return nil, newError(http.StatusUnauthorized, msgRequiresAuth)
	}
	s.lock()
	defer s.unlock()
	rn := s.st.runnerCreds[secret]
	if rn == nil {
		return nil, newError(http.StatusUnauthorized, msgBadCredentials)
	}
	rn.seen = s.now()
	return rn, nil
}

func (s *Sim) runnerRegister(w http.ResponseWriter, r *http.Request, root string) *apiError {
	var req runnerapi.RegisterRequest
	if e := decodeBody(r.Body, &req); e != nil {
		return e
	}
	if strings.TrimSpace(req.Name) == "" {
		return errInvalid(`"name" wasn't supplied.`)
	}
	if len(req.Labels) > 100 {
		return errInvalid("at most 100 labels")
	}
	s.lock()
	defer s.unlock()
	tok := s.st.regTokens[req.Token]
	if tok == nil || tok.remove || !s.now().Before(tok.expires) {
		return newError(http.StatusUnauthorized, msgBadCredentials)
	}
	sc := tok.scope
	g := repoDefaultGroup
	if sc.kind != scopeRepo {
		g = nil
		for _, cand := range sc.groups() {
			if (req.RunnerGroup == "" && cand.isDefault) || strings.EqualFold(cand.name, req.RunnerGroup) {
				g = cand
			}
		}
		if g == nil {
			return errValidation("Runner group not found")
		}
	}
	rn, e := s.registerRunnerLocked(sc, registration{name: req.Name, labels: req.Labels, group: g,
		ephemeral: req.Ephemeral, defaults: !req.NoDefaultLabels, replace: req.Replace})
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusCreated, runnerapi.RegisterResponse{RunnerID: rn.id, RunnerName: rn.name,
		EncodedJITConfig: s.runnerConfig(root, rn).Encode()})
	return nil
}

func (s *Sim) runnerConnect(w http.ResponseWriter, rn *runner) *apiError {
	s.lock()
	defer s.unlock()
	if rn.removed {
		return newError(http.StatusUnauthorized, msgBadCredentials)
	}
	if !rn.online {
		rn.online = true
		s.runnerAvailableLocked(rn)
	}
	writeJSON(w, http.StatusOK, runnerapi.Session{RunnerID: rn.id, RunnerName: rn.name, Status: "online", Busy: rn.busy()})
	return nil
}

func (s *Sim) runnerDisconnect(w http.ResponseWriter, rn *runner) *apiError {
	s.lock()
	defer s.unlock()
	if rn.removed {
		return newError(http.StatusUnauthorized, msgBadCredentials)
	}
	s.runnerOfflineLocked(rn)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// runnerOfflineLocked takes rn offline. A job assigned but not started goes back to
// the queue; a job it was running fails, as when a runner dies mid-job.
func (s *Sim) runnerOfflineLocked(rn *runner) {
	rn.online = false
	removeFrom(s.st.index(rn.scope.key()).idle, rn)
	j := rn.job
	if j == nil {
		return
	}
	if j.status == StatusQueued {
		rn.job = nil
		s.requeueLocked(j)
		return
	}
	_ = s.completeJobLocked(rn, j, ConclusionFailure)
}

func (s *Sim) runnerNextJob(w http.ResponseWriter, r *http.Request, rn *runner) *apiError {
	wait := 30 * time.Second
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return errInvalid("wait must be a duration such as 30s")
		}
		wait = min(d, runnerapi.MaxWait)
	}
	var timer <-chan time.Time
	s.lock()
	rn.polls++
	s.unlock()
	defer func() {
		s.lock()
		rn.polls--
		rn.seen = s.now()
		s.unlock()
	}()
	for {
		s.lock()
		if rn.removed {
			s.unlock()
			return newError(http.StatusUnauthorized, msgBadCredentials)
		}
		if !rn.online {
			rn.online = true
			s.runnerAvailableLocked(rn)
		}
		if j := rn.job; j != nil && j.status != StatusCompleted {
			out := runnerapi.Job{ID: j.id, RunID: j.run.id, Name: j.name, WorkflowName: j.run.name,
				Repository: j.repo().fullName(), Labels: j.labels, DurationMS: j.duration.Milliseconds(), Conclusion: j.conclude,
				Container: j.container, Services: maps.Clone(j.services), ContainerOptions: j.containerOptions.Clone()}
			s.unlock()
			writeJSON(w, http.StatusOK, out)
			return nil
		}
		s.unlock()
		if wait == 0 {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		if timer == nil {
			t := s.clk.NewTimer(wait)
			defer t.Stop()
			timer = t.C()
		}
		select {
		case <-rn.notify:
		case <-timer:
			w.WriteHeader(http.StatusNoContent)
			return nil
		case <-r.Context().Done():
			return nil
		}
	}
}

func (s *Sim) runnerJob(w http.ResponseWriter, rn *runner, id int64, f func(*job) *apiError) *apiError {
	s.lock()
	defer s.unlock()
	if rn.removed {
		return newError(http.StatusUnauthorized, msgBadCredentials)
	}
	j := s.st.jobs[id]
	if j == nil {
		return errNotFound()
	}
	if e := f(j); e != nil {
		return e
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sweepLostRunners takes offline, every quarter of timeout, the online runners that
// have not called the runner API for timeout and have no long poll in flight.
func (s *Sim) sweepLostRunners(timeout time.Duration) {
	defer close(s.sweepDone)
	every := max(timeout/4, time.Millisecond)
	for {
		t := s.clk.NewTimer(every)
		select {
		case <-s.stopSweep:
			t.Stop()
			return
		case <-t.C():
			s.loseSilentRunners(timeout)
		}
	}
}

// loseSilentRunners is one sweep of sweepLostRunners.
func (s *Sim) loseSilentRunners(timeout time.Duration) {
	s.lock()
	defer s.unlock()
	now := s.now()
	for _, rn := range s.st.runners {
		if !rn.online || rn.polls > 0 || now.Sub(rn.seen) < timeout {
			continue
		}
		if j := rn.job; j != nil && j.status == StatusInProgress {
			j.events = append(j.events, TimelineEvent{Type: EventRunnerLost, Time: now, RunnerID: rn.id})
		}
		s.runnerOfflineLocked(rn)
	}
}
