package scaleset

import (
	"context"
	"testing"
	"time"

	"github.com/actions/scaleset"
	clocktesting "k8s.io/utils/clock/testing"
)

// scriptedSession answers each long poll with the next of its answers (nil: 202).
type scriptedSession struct {
	*fakeSession // never called
	answers      []*scaleset.RunnerScaleSetMessage
	polls        int
}

func (s *scriptedSession) GetMessage(context.Context, int, int) (*scaleset.RunnerScaleSetMessage, error) {
	m := s.answers[s.polls]
	s.polls++
	return m, nil
}

// answer is a message of n JobStarted messages.
func answer(id, n int) *scaleset.RunnerScaleSetMessage {
	m := &scaleset.RunnerScaleSetMessage{MessageID: id, Statistics: &scaleset.RunnerScaleSetStatistic{}}
	for range n {
		m.JobStartedMessages = append(m.JobStartedMessages, &scaleset.JobStarted{})
	}
	return m
}

// After an answer that was not full the next poll waits out the gather window, so that
// the job messages trickling in meanwhile come in one answer; after a full answer or an
// empty one (202) it goes at once.
func TestGatheringSessionWaitsAfterAnAnswerThatWasNotFull(t *testing.T) {
	tests := []struct {
		name     string
		first    *scaleset.RunnerScaleSetMessage
		wantWait bool
	}{
		{name: "two job messages", first: answer(1, 2), wantWait: true},
		{name: "a message with no job message", first: answer(1, 0), wantWait: true},
		{name: "a full answer", first: answer(1, maxJobMessages), wantWait: false},
		{name: "nothing (202)", first: nil, wantWait: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			inner := &scriptedSession{answers: []*scaleset.RunnerScaleSetMessage{tt.first, answer(2, 1)}}
			g := newGatheringSession(inner, clk, time.Second)
			ctx := context.Background()
			if _, err := g.GetMessage(ctx, 0, 10); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				if _, err := g.GetMessage(ctx, 1, 10); err != nil {
					t.Error(err)
				}
			}()
			if !tt.wantWait {
				<-done
				return
			}
			for !clk.HasWaiters() {
				select {
				case <-done:
					t.Fatal("the next poll went at once, want it to wait out the window")
				case <-time.After(time.Millisecond):
				}
			}
			clk.Step(999 * time.Millisecond)
			select {
			case <-done:
				t.Fatal("the next poll went before the window ended")
			case <-time.After(20 * time.Millisecond):
			}
			clk.Step(time.Millisecond)
			<-done
			if inner.polls != 2 {
				t.Errorf("%d polls, want 2", inner.polls)
			}
		})
	}
}

// A poll waiting out the window ends with its context.
func TestGatheringSessionWaitEndsWithContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	inner := &scriptedSession{answers: []*scaleset.RunnerScaleSetMessage{answer(1, 1), answer(2, 1)}}
	g := newGatheringSession(inner, clk, time.Second)
	if _, err := g.GetMessage(context.Background(), 0, 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.GetMessage(ctx, 1, 10); err == nil {
		t.Error("want the context's error")
	}
	if inner.polls != 1 {
		t.Errorf("%d polls, want 1", inner.polls)
	}
}
