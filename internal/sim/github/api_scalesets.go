// Go API: runner scale sets as the simulator sees them, and the broker's faults.

package github

import (
	"net/http"
	"sort"
)

// ScaleSet is a runner scale set as the simulator sees it.
type ScaleSet struct {
	ID      int64    `json:"id"`
	Name    string   `json:"name"`
	Scope   string   `json:"scope"`
	GroupID int64    `json:"group_id"`
	Labels  []string `json:"labels"`
	// Session is the owner of its live message session ("": none).
	Session string `json:"session,omitempty"`
	// Runners are its registered runners; Assigned the jobs assigned to it and not
	// completed (statistics.totalAssignedJobs).
	Runners  int `json:"runners"`
	Assigned int `json:"assigned"`
	// Unacked counts the messages answered and not acknowledged; Pending the job
	// messages not yet in a message.
	Unacked int `json:"unacked"`
	Pending int `json:"pending"`
}

// ScaleSets returns every runner scale set, by ID.
func (s *Sim) ScaleSets() []ScaleSet {
	s.lock()
	defer s.unlock()
	out := make([]ScaleSet, 0, len(s.st.actions.scaleSets))
	for _, ss := range s.st.actions.scaleSets {
		v := ScaleSet{ID: ss.id, Name: ss.name, Scope: ss.scope.path(), GroupID: ss.group.id, Labels: append([]string(nil), ss.labels...),
			Runners: len(ss.runners), Assigned: len(ss.jobs), Unacked: len(ss.unacked), Pending: len(ss.pending)}
		if s.sessionAliveLocked(ss) {
			v.Session = ss.session.owner
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DropScaleSetSession ends the message session of scale set id, as GitHub's broker
// sometimes drops one: its queue answers 401 and its refresh 404, so the listener
// must create a new session.
func (s *Sim) DropScaleSetSession(id int64) error {
	s.lock()
	defer s.unlock()
	ss := s.st.actions.scaleSets[id]
	if ss == nil {
		return errorf(http.StatusNotFound, "scale set %d not found", id)
	}
	if ss.session == nil {
		return errorf(http.StatusNotFound, "scale set %d has no session", id)
	}
	s.closeSessionLocked(ss.session)
	return nil
}
