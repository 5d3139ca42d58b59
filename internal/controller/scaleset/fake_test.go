package scaleset

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/actions/scaleset"
	"github.com/google/uuid"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// fakeService is a recording fake of the Actions service: every call is recorded by
// name (Calls), NextErr makes the next call of a name fail, and it keeps just enough
// state (runner groups, scale sets, one session) to answer consistently.
type fakeService struct {
	mu      sync.Mutex
	calls   []string
	nextErr map[string][]error

	groupID int
	sets    map[int]*scaleset.RunnerScaleSet
	nextID  int
	// stats are the statistics a new session starts with.
	stats    scaleset.RunnerScaleSetStatistic
	sessions []*fakeSession
}

func newFakeService() *fakeService {
	return &fakeService{groupID: 1, sets: map[int]*scaleset.RunnerScaleSet{}, nextID: 100, nextErr: map[string][]error{}}
}

// For makes the fake its own Services.
func (f *fakeService) For(context.Context, *v1alpha1.RunnerPool) (ActionsService, error) {
	return f, nil
}

// NextErr makes the next call named call fail with err (queued: several make several fail).
func (f *fakeService) NextErr(call string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextErr[call] = append(f.nextErr[call], err)
}

// Calls returns the calls made so far, in order.
func (f *fakeService) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// Count returns how often call was made.
func (f *fakeService) Count(call string) int {
	n := 0
	for _, c := range f.Calls() {
		if c == call {
			n++
		}
	}
	return n
}

// record records a call and returns its injected failure, if any. Called with f.mu held.
func (f *fakeService) record(call string) error {
	f.calls = append(f.calls, call)
	if errs := f.nextErr[call]; len(errs) > 0 {
		f.nextErr[call] = errs[1:]
		return errs[0]
	}
	return nil
}

// session returns the last session opened.
func (f *fakeService) session() *fakeSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sessions) == 0 {
		return nil
	}
	return f.sessions[len(f.sessions)-1]
}

var errFakeNotFound = errors.New(`status="404 Not Found" not found`)

func (f *fakeService) GetRunnerGroupByName(_ context.Context, name string) (*scaleset.RunnerGroup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("GetRunnerGroupByName"); err != nil {
		return nil, err
	}
	return &scaleset.RunnerGroup{ID: f.groupID, Name: name}, nil
}

func (f *fakeService) GetRunnerScaleSet(_ context.Context, groupID int, name string) (*scaleset.RunnerScaleSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("GetRunnerScaleSet"); err != nil {
		return nil, err
	}
	for _, ss := range f.sets {
		if ss.RunnerGroupID == groupID && strings.EqualFold(ss.Name, name) {
			return ss, nil
		}
	}
	return nil, nil
}

func (f *fakeService) GetRunnerScaleSetByID(_ context.Context, id int) (*scaleset.RunnerScaleSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("GetRunnerScaleSetByID"); err != nil {
		return nil, err
	}
	if ss := f.sets[id]; ss != nil {
		return ss, nil
	}
	return nil, errFakeNotFound
}

func (f *fakeService) CreateRunnerScaleSet(_ context.Context, ss *scaleset.RunnerScaleSet) (*scaleset.RunnerScaleSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("CreateRunnerScaleSet"); err != nil {
		return nil, err
	}
	f.nextID++
	c := *ss
	c.ID = f.nextID
	f.sets[c.ID] = &c
	return &c, nil
}

func (f *fakeService) UpdateRunnerScaleSet(_ context.Context, id int, ss *scaleset.RunnerScaleSet) (*scaleset.RunnerScaleSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("UpdateRunnerScaleSet"); err != nil {
		return nil, err
	}
	cur := f.sets[id]
	if cur == nil {
		return nil, errFakeNotFound
	}
	cur.Labels = ss.Labels
	return cur, nil
}

func (f *fakeService) DeleteRunnerScaleSet(_ context.Context, id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("DeleteRunnerScaleSet"); err != nil {
		return err
	}
	delete(f.sets, id)
	return nil
}

func (f *fakeService) GenerateJitRunnerConfig(_ context.Context, s *scaleset.RunnerScaleSetJitRunnerSetting, id int) (*scaleset.RunnerScaleSetJitRunnerConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("GenerateJitRunnerConfig"); err != nil {
		return nil, err
	}
	f.nextID++
	return &scaleset.RunnerScaleSetJitRunnerConfig{Runner: &scaleset.RunnerReference{ID: f.nextID, Name: s.Name, RunnerScaleSetID: id},
		EncodedJITConfig: "jit-" + s.Name}, nil
}

func (f *fakeService) GetRunnerByName(context.Context, string) (*scaleset.RunnerReference, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.record("GetRunnerByName")
}

func (f *fakeService) RemoveRunner(context.Context, int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record("RemoveRunner")
}

func (f *fakeService) OpenSession(_ context.Context, scaleSetID int, owner string) (Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("OpenSession"); err != nil {
		return nil, err
	}
	if f.sets[scaleSetID] == nil {
		return nil, errFakeNotFound
	}
	stats := f.stats
	s := &fakeSession{f: f, messages: make(chan *scaleset.RunnerScaleSetMessage, 16),
		session: scaleset.RunnerScaleSetSession{SessionID: uuid.New(), OwnerName: owner, Statistics: &stats}}
	f.sessions = append(f.sessions, s)
	return s, nil
}

// fakeSession is an open session: GetMessage answers what the test sends on messages,
// and blocks until then (the long poll).
type fakeSession struct {
	f        *fakeService
	session  scaleset.RunnerScaleSetSession
	messages chan *scaleset.RunnerScaleSetMessage

	mu     sync.Mutex
	acked  []int
	closed bool
}

// send answers the long poll with a message carrying stats.
func (s *fakeSession) send(id int, assigned int) {
	s.messages <- &scaleset.RunnerScaleSetMessage{MessageID: id, Statistics: &scaleset.RunnerScaleSetStatistic{TotalAssignedJobs: assigned}}
}

func (s *fakeSession) GetMessage(ctx context.Context, _, _ int) (*scaleset.RunnerScaleSetMessage, error) {
	s.f.mu.Lock()
	err := s.f.record("GetMessage")
	s.f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-s.messages:
		return m, nil
	}
}

func (s *fakeSession) DeleteMessage(_ context.Context, id int) error {
	s.f.mu.Lock()
	err := s.f.record("DeleteMessage")
	s.f.mu.Unlock()
	s.mu.Lock()
	s.acked = append(s.acked, id)
	s.mu.Unlock()
	return err
}

func (s *fakeSession) AcquireJobs(_ context.Context, ids []int64) ([]int64, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return ids, s.f.record("AcquireJobs")
}

func (s *fakeSession) Session() scaleset.RunnerScaleSetSession { return s.session }

func (s *fakeSession) Close(context.Context) error {
	s.f.mu.Lock()
	err := s.f.record("CloseSession")
	s.f.mu.Unlock()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return err
}

func (s *fakeSession) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// conflictErr is the service's answer to a second session.
func conflictErr() error {
	return fmt.Errorf(`failed to create message session: status="409 Conflict" RunnerScaleSetSessionConflictException`)
}

func (f *fakeService) CloseSession(_ context.Context, _ int, sessionID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("CloseSession " + sessionID); err != nil {
		return err
	}
	for _, s := range f.sessions {
		if s.session.SessionID.String() == sessionID {
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
		}
	}
	return nil
}
