package scaleset

import (
	"context"
	"sync"
	"time"

	"github.com/actions/scaleset"
	"k8s.io/utils/clock"
)

// DefaultGatherWindow is how long the listener lets job messages gather on the
// service, after an answer that was not full, before it asks for the next.
const DefaultGatherWindow = time.Second

// maxJobMessages is the most job messages the service puts in one message.
const maxJobMessages = 50

// gatheringSession is a Session whose long poll waits out a gather window after an
// answer that held fewer than maxJobMessages job messages. Every answer costs two calls
// (the GET and the DELETE that acknowledges it, which the protocol requires: an
// unacknowledged message comes again) whatever it holds, and the service answers a
// waiting poll with the first job message it has: without the window a burst's
// JobStarted and JobCompleted messages, which trickle in as runners start and finish,
// come two or three to an answer (burst-scaleset: 844 answers for 500 jobs). A full
// answer says more are waiting, so the next poll goes at once; an empty one (202) came
// after the service's own hold, so the next goes at once too, and a poll waiting on the
// service still answers the first job of a quiet pool at once. The price: a job queued
// within the window after an answer is seen up to the window later (steady-scaleset,
// 5 jobs a second: pickup p50 1.02 s without a window, 1.30 s with half a second, 1.65
// s with a second). A second is kept for bursts: their answers do not grow with the
// load with it (burst-scaleset: 51 or 52 answers for 500 jobs at loads 9 to 12, 1.25
// GitHub calls per job), where with half a second they did (56 to 58, 1.28: near the
// 1.3 target).
type gatheringSession struct {
	inner  Session
	clk    clock.Clock
	window time.Duration

	mu    sync.Mutex
	after time.Time // no poll before
}

var _ Session = (*gatheringSession)(nil)

func newGatheringSession(s Session, clk clock.Clock, window time.Duration) *gatheringSession {
	return &gatheringSession{inner: s, clk: clk, window: window}
}

// GetMessage waits out the window, if the last answer opened one, then long-polls.
func (g *gatheringSession) GetMessage(ctx context.Context, lastMessageID, maxCapacity int) (*scaleset.RunnerScaleSetMessage, error) {
	g.mu.Lock()
	wait := g.after.Sub(g.clk.Now())
	g.mu.Unlock()
	if wait > 0 {
		t := g.clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C():
		}
	}
	msg, err := g.inner.GetMessage(ctx, lastMessageID, maxCapacity)
	g.mu.Lock()
	g.after = time.Time{}
	if err == nil && msg != nil && jobMessages(msg) < maxJobMessages {
		g.after = g.clk.Now().Add(g.window)
	}
	g.mu.Unlock()
	return msg, err
}

// jobMessages counts the job messages of one answer.
func jobMessages(m *scaleset.RunnerScaleSetMessage) int {
	return len(m.JobAvailableMessages) + len(m.JobAssignedMessages) + len(m.JobStartedMessages) + len(m.JobCompletedMessages)
}

func (g *gatheringSession) DeleteMessage(ctx context.Context, messageID int) error {
	return g.inner.DeleteMessage(ctx, messageID)
}

func (g *gatheringSession) AcquireJobs(ctx context.Context, requestIDs []int64) ([]int64, error) {
	return g.inner.AcquireJobs(ctx, requestIDs)
}

func (g *gatheringSession) Session() scaleset.RunnerScaleSetSession { return g.inner.Session() }

func (g *gatheringSession) Close(ctx context.Context) error { return g.inner.Close(ctx) }
