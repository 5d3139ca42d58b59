package github

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// These tests drive the Actions service with GitHub's own client,
// github.com/actions/scaleset, over HTTP.

func newScaleSetClient(t *testing.T, w *world, scope string) *scaleset.Client {
	t.Helper()
	c, err := scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
		GitHubConfigURL: w.srv.URL + "/" + scope, PersonalAccessToken: testPAT,
		SystemInfo: scaleset.SystemInfo{System: "gantry-test"},
	}, scaleset.WithRetryMax(1), scaleset.WithRetryWaitMax(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createScaleSet creates scale set name in the Default group of the client's scope.
func createScaleSet(t *testing.T, c *scaleset.Client, name string, labels ...string) *scaleset.RunnerScaleSet {
	t.Helper()
	ctx := context.Background()
	g, err := c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
	if err != nil {
		t.Fatalf("runner group: %v", err)
	}
	set := &scaleset.RunnerScaleSet{Name: name, RunnerGroupID: g.ID}
	for _, l := range append([]string{name}, labels...) {
		set.Labels = append(set.Labels, scaleset.Label{Name: l})
	}
	ss, err := c.CreateRunnerScaleSet(ctx, set)
	if err != nil {
		t.Fatalf("creating scale set %s: %v", name, err)
	}
	return ss
}

// jobIDs are the job IDs of a message's messages of one type.
func jobIDs(m *scaleset.RunnerScaleSetMessage, typ scaleset.MessageType) []string {
	var out []string
	add := func(b scaleset.JobMessageBase) {
		if b.MessageType == typ {
			out = append(out, b.JobID)
		}
	}
	for _, j := range m.JobAvailableMessages {
		add(j.JobMessageBase)
	}
	for _, j := range m.JobAssignedMessages {
		add(j.JobMessageBase)
	}
	for _, j := range m.JobStartedMessages {
		add(j.JobMessageBase)
	}
	for _, j := range m.JobCompletedMessages {
		add(j.JobMessageBase)
	}
	return out
}

func getMessage(t *testing.T, sc *scaleset.MessageSessionClient, last int) *scaleset.RunnerScaleSetMessage {
	t.Helper()
	m, err := sc.GetMessage(context.Background(), last, 10)
	if err != nil {
		t.Fatalf("GetMessage: %v", err)
	}
	if m == nil {
		t.Fatal("GetMessage answered no message, want one")
	}
	return m
}

func queueJobs(t *testing.T, w *world, n int, labels ...string) []string {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, strconv.FormatInt(must(w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: labels})).ID, 10))
	}
	return ids
}

func TestScaleSetClientLifecycle(t *testing.T) {
	w := newWorld(t, worldOpts{realClock: true, opts: Options{ActionsPollHold: 100 * time.Millisecond}})
	ctx := context.Background()
	c := newScaleSetClient(t, w, "acme")

	// Runner group and scale set CRUD.
	g, err := c.GetRunnerGroupByName(ctx, "default")
	if err != nil || g.Name != "Default" || !g.IsDefault {
		t.Fatalf("GetRunnerGroupByName(default) = %+v, %v; want the Default group", g, err)
	}
	ss := createScaleSet(t, c, "linux")
	if _, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: "LINUX", RunnerGroupID: g.ID}); err == nil ||
		!strings.Contains(err.Error(), "RunnerScaleSetExistsException") {
		t.Errorf("second scale set named LINUX in the group: err = %v, want RunnerScaleSetExistsException", err)
	}
	got, err := c.GetRunnerScaleSet(ctx, g.ID, "linux")
	if err != nil || got == nil || got.ID != ss.ID {
		t.Fatalf("GetRunnerScaleSet = %+v, %v; want ID %d", got, err, ss.ID)
	}
	upd, err := c.UpdateRunnerScaleSet(ctx, ss.ID, &scaleset.RunnerScaleSet{Labels: []scaleset.Label{{Name: "linux"}, {Name: "x64"}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]scaleset.Label{{Type: "System", Name: "linux"}, {Type: "System", Name: "x64"}}, upd.Labels); diff != "" {
		t.Errorf("labels after update (-want +got):\n%s", diff)
	}

	// One session per scale set.
	sess, err := c.MessageSessionClient(ctx, ss.ID, "listener-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.MessageSessionClient(ctx, ss.ID, "listener-b"); err == nil || !strings.Contains(err.Error(), "RunnerScaleSetSessionConflictException") {
		t.Fatalf("second session: err = %v, want RunnerScaleSetSessionConflictException", err)
	}

	// Long poll: nothing waits → no message after the hold.
	if m, err := sess.GetMessage(ctx, 0, 10); err != nil || m != nil {
		t.Fatalf("GetMessage with nothing queued = %+v, %v; want nil, nil (202)", m, err)
	}

	// 60 jobs: 50 job messages in the first answer, the rest in the next; an
	// unacknowledged message comes again.
	ids := queueJobs(t, w, 60, "LINUX")
	m1 := getMessage(t, sess, 0)
	if diff := cmp.Diff(ids[:50], jobIDs(m1, scaleset.MessageTypeJobAvailable)); diff != "" {
		t.Errorf("first message's JobAvailable jobs (-want +got):\n%s", diff)
	}
	if m1.Statistics == nil || m1.Statistics.TotalAssignedJobs != 60 || m1.Statistics.TotalAvailableJobs != 60 {
		t.Errorf("statistics = %+v, want 60 assigned and available", m1.Statistics)
	}
	if again := getMessage(t, sess, 0); again.MessageID != m1.MessageID {
		t.Errorf("unacknowledged message %d did not come again (got %d)", m1.MessageID, again.MessageID)
	}
	if err := sess.DeleteMessage(ctx, m1.MessageID); err != nil {
		t.Fatal(err)
	}
	m2 := getMessage(t, sess, m1.MessageID)
	if diff := cmp.Diff(ids[50:], jobIDs(m2, scaleset.MessageTypeJobAvailable)); diff != "" {
		t.Errorf("second message's JobAvailable jobs (-want +got):\n%s", diff)
	}
	if err := sess.DeleteMessage(ctx, m2.MessageID); err != nil {
		t.Fatal(err)
	}

	// Acquire the first job → JobAssigned.
	req := m1.JobAvailableMessages[0].RunnerRequestID
	acquired, err := sess.AcquireJobs(ctx, []int64{req, 999999})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{req}, acquired); diff != "" {
		t.Errorf("acquired (-want +got):\n%s", diff)
	}
	m3 := getMessage(t, sess, m2.MessageID)
	if diff := cmp.Diff(ids[:1], jobIDs(m3, scaleset.MessageTypeJobAssigned)); diff != "" {
		t.Errorf("JobAssigned (-want +got):\n%s", diff)
	}
	if m3.Statistics.TotalAcquiredJobs != 1 {
		t.Errorf("statistics = %+v, want 1 acquired", m3.Statistics)
	}
	_ = sess.DeleteMessage(ctx, m3.MessageID)

	// JIT runner of the scale set: it comes online, gets the acquired job, runs it.
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "linux-r1"}, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if jit.Runner.RunnerScaleSetID != ss.ID {
		t.Errorf("JIT runner's scale set = %d, want %d", jit.Runner.RunnerScaleSetID, ss.ID)
	}
	if _, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "linux-r1"}, ss.ID); !errors.Is(err, scaleset.RunnerExistsError) {
		t.Errorf("duplicate JIT name: err = %v, want RunnerExistsError", err)
	}
	rc, err := runnerapi.NewClientFromJITConfig(jit.EncodedJITConfig, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	job, err := rc.NextJob(ctx, 10*time.Second)
	if err != nil || job == nil || strconv.FormatInt(job.ID, 10) != ids[0] {
		t.Fatalf("runner's job = %+v, %v; want job %s", job, err, ids[0])
	}
	if err := rc.StartJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	m4 := getMessage(t, sess, m3.MessageID)
	if len(m4.JobStartedMessages) != 1 || m4.JobStartedMessages[0].RunnerID != jit.Runner.ID || m4.JobStartedMessages[0].RunnerName != "linux-r1" {
		t.Errorf("JobStarted = %+v, want runner %d linux-r1", m4.JobStartedMessages, jit.Runner.ID)
	}
	_ = sess.DeleteMessage(ctx, m4.MessageID)
	if err := c.RemoveRunner(ctx, int64(jit.Runner.ID)); !errors.Is(err, scaleset.JobStillRunningError) {
		t.Errorf("removing the busy runner: err = %v, want JobStillRunningError", err)
	}
	if err := rc.CompleteJob(ctx, job.ID, ConclusionSuccess); err != nil {
		t.Fatal(err)
	}
	m5 := getMessage(t, sess, m4.MessageID)
	if len(m5.JobCompletedMessages) != 1 || m5.JobCompletedMessages[0].Result != "succeeded" || m5.JobCompletedMessages[0].JobID != ids[0] {
		t.Errorf("JobCompleted = %+v, want job %s succeeded", m5.JobCompletedMessages, ids[0])
	}
	if m5.Statistics.TotalAssignedJobs != 59 {
		t.Errorf("statistics after one job = %+v, want 59 assigned", m5.Statistics)
	}
	_ = sess.DeleteMessage(ctx, m5.MessageID)

	// Runner get and removal.
	jit2, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "linux-r2"}, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.GetRunnerByName(ctx, "linux-r2"); err != nil || r == nil || r.ID != jit2.Runner.ID {
		t.Errorf("GetRunnerByName = %+v, %v; want runner %d", r, err, jit2.Runner.ID)
	}
	if err := c.RemoveRunner(ctx, int64(jit2.Runner.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRunner(ctx, jit2.Runner.ID); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Errorf("GetRunner of a removed runner: err = %v, want RunnerNotFoundError", err)
	}

	// Closing the session lets another in; deleting the scale set ends it.
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sess2, err := c.MessageSessionClient(ctx, ss.ID, "listener-b")
	if err != nil {
		t.Fatalf("session after close: %v", err)
	}
	if m, err := sess2.GetMessage(ctx, 0, 10); err != nil || m != nil {
		t.Errorf("new session's first poll = %+v, %v; want nothing (every message was acknowledged)", m, err)
	}
	if got, err := c.GetRunnerScaleSetByID(ctx, ss.ID); err != nil || got.Statistics.TotalAssignedJobs != 59 {
		t.Errorf("GetRunnerScaleSetByID = %+v, %v; want 59 assigned jobs", got, err)
	}
	if err := c.DeleteRunnerScaleSet(ctx, ss.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRunnerScaleSetByID(ctx, ss.ID); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GetRunnerScaleSetByID after delete: err = %v, want 404", err)
	}
	if n := w.sim.CallCounts()["POST /_apis/runtime/runnerscalesets/{id}/acquirejobs"].Total; n != 1 {
		t.Errorf("acquirejobs call count = %d, want 1", n)
	}
}

// TestScaleSetRemoveFinishedRunner: removing an ephemeral runner that ran its job and
// left the service on its own succeeds (204), as on GitHub, where
// actions-runner-controller's finalizer accepts only 204 for exactly this call; a runner
// the service never had, or one already removed by a DELETE, is RunnerNotFoundError.
func TestScaleSetRemoveFinishedRunner(t *testing.T) {
	w := newWorld(t, worldOpts{realClock: true, opts: Options{ActionsPollHold: 100 * time.Millisecond}})
	ctx := context.Background()
	c := newScaleSetClient(t, w, "acme")
	ss := createScaleSet(t, c, "linux")
	sess, err := c.MessageSessionClient(ctx, ss.ID, "listener")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sess.Close(ctx) }()
	ids := queueJobs(t, w, 1, "linux")
	m := getMessage(t, sess, 0)
	if _, err := sess.AcquireJobs(ctx, []int64{m.JobAvailableMessages[0].RunnerRequestID}); err != nil {
		t.Fatal(err)
	}
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "linux-r1"}, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runnerapi.NewClientFromJITConfig(jit.EncodedJITConfig, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	job, err := rc.NextJob(ctx, 10*time.Second)
	if err != nil || job == nil || strconv.FormatInt(job.ID, 10) != ids[0] {
		t.Fatalf("runner's job = %+v, %v; want job %s", job, err, ids[0])
	}
	if err := rc.CompleteJob(ctx, job.ID, ConclusionSuccess); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRunner(ctx, jit.Runner.ID); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Fatalf("GetRunner of the finished runner: err = %v, want RunnerNotFoundError (it left the service)", err)
	}

	w.sim.ResetCallCounts()
	if err := c.RemoveRunner(ctx, int64(jit.Runner.ID)); err != nil {
		t.Errorf("RemoveRunner of the finished ephemeral runner: err = %v, want nil (204)", err)
	}
	if err := c.RemoveRunner(ctx, int64(jit.Runner.ID)); err != nil {
		t.Errorf("RemoveRunner of the finished ephemeral runner, again: err = %v, want nil (204)", err)
	}
	if got := w.sim.CallCounts()["DELETE /_apis/distributedtask/pools/0/agents/{id}"].ByStatus; !cmp.Equal(got, map[int]int64{http.StatusNoContent: 2}) {
		t.Errorf("agent DELETE answers = %v, want two 204", got)
	}

	// Removed by a DELETE, not finished: a second DELETE finds nothing.
	jit2, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "linux-r2"}, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveRunner(ctx, int64(jit2.Runner.ID)); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveRunner(ctx, int64(jit2.Runner.ID)); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Errorf("RemoveRunner of a runner removed before: err = %v, want RunnerNotFoundError", err)
	}
	if err := c.RemoveRunner(ctx, 987654321); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Errorf("RemoveRunner of an unknown id: err = %v, want RunnerNotFoundError", err)
	}
}
