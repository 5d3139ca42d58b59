package runnerpool

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// answerHolds keeps, for each pool whose demand is a count of a service's answer (a
// runner scale set's statistics.totalAssignedJobs), the runners seen alive since that
// answer came. The count holds the job of every runner alive when it was taken — a
// waiting job for a runner still free, a running one for a busy runner — and lets go of
// it only in a later answer. A runner that finishes its job between two answers (its
// pod exits, the webhooks say completed, its Runner goes) would leave the pool one
// runner short of the count until the next answer, and the pool would make a runner
// for a job that has one: the scale set's runners created beyond its jobs. So a
// runner seen alive since the last answer keeps counting busy, finished or gone, until
// the next answer; one retired unused or failed does not (it holds no job, and a
// failed one is replaced at once). Webhook pools (answer 0) hold nothing: their demand
// is the jobs still queued. Each pool's set is only touched by that pool's reconcile
// (one at a time per pool); the map of pools is locked.
type answerHolds struct {
	mu    sync.Mutex
	pools map[types.NamespacedName]*answerHold
}

type answerHold struct {
	answer uint64
	names  map[string]struct{}
}

// of returns the pool's held runners for answer, starting over at a new answer; nil for
// answer 0.
func (h *answerHolds) of(key types.NamespacedName, answer uint64) map[string]struct{} {
	if answer == 0 {
		h.forget(key)
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pools == nil {
		h.pools = map[types.NamespacedName]*answerHold{}
	}
	a := h.pools[key]
	if a == nil || a.answer != answer {
		a = &answerHold{answer: answer, names: map[string]struct{}{}}
		h.pools[key] = a
	}
	return a.names
}

func (h *answerHolds) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pools, key)
}

// alive records a runner seen alive (pending, idle or busy) since the answer, or created
// since.
func (s *state) alive(name string) {
	if s.held != nil {
		s.held[name] = struct{}{}
	}
}

// hold counts a runner on its way out busy if it was seen alive since the answer.
func (s *state) hold(name string) {
	if _, ok := s.held[name]; ok {
		s.busy++
		s.holding++
	}
}

// release lets go of a runner that holds no job: retired unused, or failed.
func (s *state) release(name string) {
	delete(s.held, name)
}

// holdGone counts busy the runners gone from the list that hold a job: seen alive (or
// created) since the answer, or running one as the demand source says
// (tracked.Elsewhere). One created and not yet in the cache counts as expected instead.
func (s *state) holdGone() {
	if len(s.held) == 0 && len(s.tracked.Elsewhere) == 0 {
		return
	}
	listed := make(map[string]struct{}, len(s.runners))
	for i := range s.runners {
		listed[s.runners[i].Name] = struct{}{}
	}
	gone := map[string]struct{}{}
	for name := range s.held {
		_, ok := listed[name]
		if _, expected := s.expecting[name]; !ok && !expected { // an expected one counts as such
			gone[name] = struct{}{}
		}
	}
	for _, name := range s.tracked.Elsewhere {
		if _, ok := listed[name]; !ok {
			gone[name] = struct{}{}
		}
	}
	s.busy += len(gone)
	s.holding += len(gone)
}
