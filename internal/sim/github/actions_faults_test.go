package github

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/google/go-cmp/cmp"
)

// These tests run the Actions service on a fake clock: they poll only when a message
// waits (the hold would wait for the fake clock), or with a short real deadline.

// noMessage asserts that a poll finds nothing before a short real deadline.
func noMessage(t *testing.T, sess *scaleset.MessageSessionClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	m, err := sess.GetMessage(ctx, 0, 10)
	if m != nil {
		t.Fatalf("GetMessage = message %d with %d JobAvailable, want none", m.MessageID, len(m.JobAvailableMessages))
	}
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetMessage err = %v, want the poll still held at the deadline", err)
	}
}

func TestScaleSetSessionExpires(t *testing.T) {
	w := newWorld(t, worldOpts{opts: Options{ActionsSessionTimeout: time.Minute}})
	ctx := context.Background()
	c := newScaleSetClient(t, w, "acme")
	ss := createScaleSet(t, c, "linux")
	old, err := c.MessageSessionClient(ctx, ss.ID, "killed-listener")
	if err != nil {
		t.Fatal(err)
	}
	// The listener is killed: its session lingers until it expires.
	w.clk.Step(59 * time.Second)
	if _, err := c.MessageSessionClient(ctx, ss.ID, "new-listener"); err == nil || !strings.Contains(err.Error(), "RunnerScaleSetSessionConflictException") {
		t.Fatalf("session before expiry: err = %v, want RunnerScaleSetSessionConflictException", err)
	}
	w.clk.Step(time.Second)
	sess, err := c.MessageSessionClient(ctx, ss.ID, "new-listener")
	if err != nil {
		t.Fatalf("session after the old one expired: %v", err)
	}
	ids := queueJobs(t, w, 1, "linux")
	// The old session is gone: its queue answers 401, its refresh 404.
	if _, err := old.GetMessage(ctx, 0, 10); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("old session's poll: err = %v, want a refresh answered 404", err)
	}
	if diff := cmp.Diff(ids, jobIDs(getMessage(t, sess, 0), scaleset.MessageTypeJobAvailable)); diff != "" {
		t.Errorf("new session's JobAvailable (-want +got):\n%s", diff)
	}
}

func TestScaleSetQueueTokenExpiresAndRefreshes(t *testing.T) {
	w := newWorld(t, worldOpts{opts: Options{MessageQueueTokenTTL: 10 * time.Minute, ActionsSessionTimeout: time.Hour, ScaleSetAssignTimeout: time.Hour}})
	ctx := context.Background()
	c := newScaleSetClient(t, w, "acme")
	ss := createScaleSet(t, c, "linux")
	sess, err := c.MessageSessionClient(ctx, ss.ID, "listener")
	if err != nil {
		t.Fatal(err)
	}
	ids := queueJobs(t, w, 1, "linux")
	w.clk.Step(10 * time.Minute)
	if diff := cmp.Diff(ids, jobIDs(getMessage(t, sess, 0), scaleset.MessageTypeJobAvailable)); diff != "" {
		t.Errorf("JobAvailable after the refresh (-want +got):\n%s", diff)
	}
	calls := w.sim.CallCounts()
	polls := calls["GET /_apis/runtime/runnerscalesets/{id}/messages"]
	if diff := cmp.Diff(map[int]int64{401: 1, 200: 1}, polls.ByStatus); diff != "" {
		t.Errorf("message polls by status (-want +got):\n%s", diff)
	}
	if n := calls["PATCH /_apis/runtime/runnerscalesets/{id}/sessions/{session_id}"].Total; n != 1 {
		t.Errorf("session refreshes = %d, want 1", n)
	}
}

func TestScaleSetDroppedSessionRedeliversUnacknowledged(t *testing.T) {
	w := newWorld(t, worldOpts{})
	ctx := context.Background()
	c := newScaleSetClient(t, w, "acme")
	ss := createScaleSet(t, c, "linux")
	sess, err := c.MessageSessionClient(ctx, ss.ID, "listener")
	if err != nil {
		t.Fatal(err)
	}
	ids := queueJobs(t, w, 2, "linux")
	first := getMessage(t, sess, 0)
	if err := w.sim.DropScaleSetSession(int64(ss.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.GetMessage(ctx, first.MessageID, 10); err == nil || !strings.Contains(err.Error(), "TaskAgentSessionExpiredException") {
		t.Fatalf("poll of a dropped session: err = %v, want its refresh answered 404", err)
	}
	again, err := c.MessageSessionClient(ctx, ss.ID, "listener")
	if err != nil {
		t.Fatalf("new session after the drop: %v", err)
	}
	m := getMessage(t, again, 0)
	if m.MessageID != first.MessageID {
		t.Errorf("new session got message %d, want the unacknowledged %d again", m.MessageID, first.MessageID)
	}
	if diff := cmp.Diff(ids, jobIDs(m, scaleset.MessageTypeJobAvailable)); diff != "" {
		t.Errorf("JobAvailable (-want +got):\n%s", diff)
	}
}

// A job assigned to a scale set and not picked up in time is assigned again, up to
// three times, each time with a new JobAvailable for the same runner request.
func TestScaleSetJobAssignedAgain(t *testing.T) {
	w := newWorld(t, worldOpts{opts: Options{ScaleSetAssignTimeout: time.Minute, ActionsSessionTimeout: time.Hour}})
	ctx := context.Background()
	c := newScaleSetClient(t, w, "acme")
	ss := createScaleSet(t, c, "linux")
	sess, err := c.MessageSessionClient(ctx, ss.ID, "listener")
	if err != nil {
		t.Fatal(err)
	}
	ids := queueJobs(t, w, 1, "linux")
	var requests []int64
	last := 0
	for i := range 4 { // the first assignment and three more
		if i > 0 {
			w.clk.Step(time.Minute)
		}
		m := getMessage(t, sess, last)
		if diff := cmp.Diff(ids, jobIDs(m, scaleset.MessageTypeJobAvailable)); diff != "" {
			t.Fatalf("assignment %d: JobAvailable (-want +got):\n%s", i+1, diff)
		}
		if m.Statistics.TotalAssignedJobs != 1 {
			t.Errorf("assignment %d: statistics %+v, want 1 assigned job", i+1, m.Statistics)
		}
		requests = append(requests, m.JobAvailableMessages[0].RunnerRequestID)
		last = m.MessageID
		if err := sess.DeleteMessage(ctx, m.MessageID); err != nil {
			t.Fatal(err)
		}
	}
	if requests[0] != requests[len(requests)-1] {
		t.Errorf("runner request IDs %v, want the same request each time", requests)
	}
	w.clk.Step(time.Minute)
	noMessage(t, sess)
	if got := w.sim.ScaleSets()[0].Assigned; got != 1 {
		t.Errorf("assigned jobs after the last reassignment = %d, want 1 (it stays with the scale set)", got)
	}
}

// A job goes to the scale set whose labels cover its runs-on, never to a runner
// outside it; a job the scale set does not cover goes to a matching runner.
func TestScaleSetRouting(t *testing.T) {
	w := newWorld(t, worldOpts{})
	ctx := context.Background()
	c := newScaleSetClient(t, w, "acme")
	early := queueJobs(t, w, 1, "arc")
	ss := createScaleSet(t, c, "arc", "linux")
	sess, err := c.MessageSessionClient(ctx, ss.ID, "listener")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.sim.GenerateJITConfig(JITSpec{Scope: "acme", Name: "plain", Labels: []string{"arc", "linux"}, GroupID: 1}); err != nil {
		t.Fatal(err)
	}
	setJobs := queueJobs(t, w, 1, "ARC", "linux")
	other := queueJobs(t, w, 1, "self-hosted", "linux")
	m := getMessage(t, sess, 0)
	if diff := cmp.Diff(append(early, setJobs...), jobIDs(m, scaleset.MessageTypeJobAvailable)); diff != "" {
		t.Errorf("scale set's JobAvailable (-want +got):\n%s", diff)
	}
	for _, j := range w.sim.Jobs() {
		if itoa(j.ID) == other[0] && (j.Status != StatusQueued || j.RunnerID != 0) {
			t.Errorf("job %s is %s on runner %d, want it queued for a runner that is online", other[0], j.Status, j.RunnerID)
		}
	}
}

func TestActionsServiceFaultsLimitsAndCredentials(t *testing.T) {
	w := newWorld(t, worldOpts{})
	ctx := context.Background()
	c := newScaleSetClient(t, w, "acme")
	g, err := c.GetRunnerGroupByName(ctx, "Default")
	if err != nil {
		t.Fatal(err)
	}
	const create = "POST /_apis/runtime/runnerscalesets"
	w.sim.SetFaults(Faults{Endpoints: map[string]EndpointFaults{create: {ErrorRate: 1, ErrorStatus: http.StatusServiceUnavailable}}})
	if _, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: "x", RunnerGroupID: g.ID}); err == nil {
		t.Error("CreateRunnerScaleSet under an injected 503: no error")
	}
	if n := w.sim.CallCounts()[create].ByStatus[http.StatusServiceUnavailable]; n == 0 {
		t.Errorf("calls of %s answered 503 = 0, want the injected faults counted", create)
	}
	w.sim.SetFaults(Faults{})

	w.sim.SetRateLimits(RateLimits{ActionsService: 2})
	var limited bool
	for range 3 {
		if _, err := c.GetRunnerScaleSet(ctx, g.ID, "x"); err != nil && strings.Contains(err.Error(), "403") {
			limited = true
		}
	}
	if !limited {
		t.Error("three service calls under a limit of two: none refused")
	}
	w.sim.SetRateLimits(RateLimits{})

	tests := []struct {
		name, auth, body string
		want             int
	}{
		{"no credentials", "", `{"url":"http://x/acme"}`, http.StatusUnauthorized},
		{"unknown registration token", "RemoteAuth bogus", `{"url":"http://x/acme"}`, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		if got := w.do(t, http.MethodPost, "/api/v3/actions/runner-registration", tc.auth, tc.body).code; got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	tok := w.do(t, http.MethodPost, "/api/v3/repos/acme/app/actions/runners/registration-token", "Bearer "+testPAT, "")
	var rt struct{ Token string }
	decodeJSON(t, tok.body, &rt)
	if got := w.do(t, http.MethodPost, "/api/v3/actions/runner-registration", "RemoteAuth "+rt.Token, `{"url":"http://x/acme"}`).code; got != http.StatusNotFound {
		t.Errorf("a repository's token for the organization: status %d, want 404", got)
	}
	if got := w.do(t, http.MethodGet, actionsPrefix+"/_apis/runtime/runnerscalesets", "Bearer bogus", "").code; got != http.StatusUnauthorized {
		t.Errorf("service call with an unknown admin token: status %d, want 401", got)
	}
}
