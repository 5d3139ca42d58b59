package scaleset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actions/scaleset"
	"github.com/actions/scaleset/listener"
	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
)

// poolListener keeps one pool's scale set and message session: it ensures the scale
// set, opens the session, long-polls it through the scaleset listener, and feeds the
// Tracker and the pool's demand. Every failure is retried with backoff; only ctx ends it.
type poolListener struct {
	m    *Manager
	key  types.NamespacedName
	cfg  poolConfig
	pool *v1alpha1.RunnerPool // as of Ensure: credentials, scope
	log  logr.Logger

	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	status     v1alpha1.ScaleSetStatus
	reason     string // of the ScaleSetSession condition
	id         int64
	assigned   int
	haveStats  bool
	maxRunners int32
	minIdle    int32
	lis        *listener.Listener
	// jobs is what the service's answers said of the pool's runners, committed with the
	// count of the same answer (answer.go); told is the current answer's job messages,
	// held until then.
	jobs answerJobs
	told []jobNews
	// dead is the session a previous leader left open (its id from the pool's status),
	// until this listener has closed it.
	dead string
}

func newPoolListener(m *Manager, key types.NamespacedName, cfg poolConfig, pool *v1alpha1.RunnerPool) *poolListener {
	return &poolListener{
		m: m, key: key, cfg: cfg, pool: pool, id: cfg.knownID,
		log: m.Log.WithValues("pool", key.String(), "scaleSet", cfg.name),
		status: v1alpha1.ScaleSetStatus{
			ID: cfg.knownID, Name: cfg.name, Session: v1alpha1.SessionConnecting, Message: "connecting to the Actions service",
			// Kept until closed: a successor of this process must still find it.
			SessionID: cfg.deadSession,
		},
		dead:   cfg.deadSession,
		reason: v1alpha1.ReasonScaleSetUnavailable,
	}
}

// errNameTaken: a same-named scale set exists that Gantry did not create for this pool.
type nameTakenError struct {
	name string
	id   int
}

func (e *nameTakenError) Error() string {
	return fmt.Sprintf("a runner scale set named %q (id %d) already exists in the runner group and was not created by Gantry for this pool; "+
		"Gantry does not take it over: delete it on GitHub (the workflows using it stop getting runners from it), or create a new pool with another demand.scaleSetName",
		e.name, e.id)
}

// conflictRetryMax caps the wait between attempts while the service holds another
// session for the scale set.
const conflictRetryMax = 5 * time.Second

// run connects and listens until ctx ends, backing off after each failure.
func (l *poolListener) run(ctx context.Context) {
	base, maxWait := l.m.BackoffBase, l.m.BackoffMax
	if base == 0 {
		base = time.Second
	}
	if maxWait == 0 {
		maxWait = 30 * time.Second
	}
	wait := base
	for ctx.Err() == nil {
		active, err := l.connectAndListen(ctx)
		if ctx.Err() != nil {
			break
		}
		if active {
			wait = base // it worked for a while: start the backoff over
		}
		l.failed(err)
		next := wait
		if isSessionConflict(err) {
			// The old session goes as soon as it expires: look often, a 409 is cheap.
			next = min(wait, conflictRetryMax)
		}
		select {
		case <-ctx.Done():
		case <-l.m.Clock.After(next):
		}
		wait = min(2*wait, maxWait)
	}
	l.setSession(v1alpha1.SessionClosed, v1alpha1.ReasonNotLeader, "the session was closed: this controller stopped leading or the pool changed")
}

// failed records why the last attempt ended, in the status and the log.
func (l *poolListener) failed(err error) {
	var taken *nameTakenError
	var cfg *controller.ConfigError
	switch {
	case errors.As(err, &taken):
		l.setSession(v1alpha1.SessionError, v1alpha1.ReasonScaleSetNameTaken, err.Error())
	case isSessionConflict(err):
		l.setSession(v1alpha1.SessionConflict, v1alpha1.ReasonSessionConflict, "the Actions service holds another session for this scale set (409 RunnerScaleSetSessionConflictException), "+
			"most often that of a controller that was stopped without closing it; retrying until the service lets this one in")
	case errors.As(err, &cfg):
		l.setSession(v1alpha1.SessionError, v1alpha1.ReasonScaleSetUnavailable, cfg.Message)
	default:
		l.setSession(v1alpha1.SessionError, v1alpha1.ReasonScaleSetUnavailable, truncate(err.Error()))
	}
	l.log.Info("Scale set session not running; retrying", "reason", truncate(err.Error()))
}

// connectAndListen ensures the scale set, opens a session and listens on it until an
// error or ctx ends. active says whether the session got as far as listening.
func (l *poolListener) connectAndListen(ctx context.Context) (active bool, err error) {
	c, err := l.m.Clients.For(ctx, l.pool)
	if err != nil {
		return false, err
	}
	l.setSession(v1alpha1.SessionConnecting, v1alpha1.ReasonScaleSetUnavailable, "ensuring the scale set")
	ss, err := l.ensureScaleSet(ctx, c)
	if err != nil {
		return false, err
	}
	l.closeDeadSession(ctx, c, ss.ID)
	l.setSession(v1alpha1.SessionConnecting, v1alpha1.ReasonScaleSetUnavailable, "opening the message session")
	session, err := c.OpenSession(ctx, ss.ID, l.m.Owner)
	if err != nil {
		return false, err
	}
	l.setSessionID(session.Session().SessionID.String())
	defer func() {
		// Close the session even when ctx has ended (leadership lost, shutdown): the
		// next leader then gets in at once instead of waiting for it to expire.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if cerr := session.Close(cctx); cerr != nil && !isNotFound(cerr) {
			l.log.Info("Closing the scale set session failed; it expires on the service, or the next leader closes it", "reason", truncate(cerr.Error()))
		} else {
			l.setSessionID("")
			l.log.V(1).Info("Closed the scale set session")
		}
	}()
	lis, err := listener.New(newGatheringSession(session, l.m.Clock, l.m.gatherWindow()), listener.Config{
		ScaleSetID: ss.ID,
		MaxRunners: int(l.limits()),
		Logger:     slog.New(logr.ToSlogHandler(l.log.V(2))),
	}, listener.WithMetricsRecorder(l))
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	l.lis = lis
	l.mu.Unlock()
	l.setSession(v1alpha1.SessionActive, v1alpha1.ReasonSessionActive, "")
	l.log.Info("Scale set session open", "scaleSetID", ss.ID)
	err = lis.Run(ctx, l)
	l.mu.Lock()
	l.lis = nil
	l.mu.Unlock()
	return true, err
}

// closeDeadSession closes the session a previous leader recorded in the pool's status and
// left open (it was killed, or its node lost), so that this listener's own gets in at
// once instead of meeting 409 until the service expires it. A failure is logged and tried
// again on the next attempt; opening the session meanwhile meets the 409 and its retries.
func (l *poolListener) closeDeadSession(ctx context.Context, c ActionsService, scaleSetID int) {
	l.mu.Lock()
	dead := l.dead
	l.mu.Unlock()
	if dead == "" {
		return
	}
	l.setSession(v1alpha1.SessionConnecting, v1alpha1.ReasonScaleSetUnavailable, "closing the session the previous leader left open")
	l.log.Info("Closing the scale set session the previous leader left open", "session", dead)
	if err := c.CloseSession(ctx, scaleSetID, dead); err != nil {
		l.log.Info("Closing the previous leader's session failed; it expires on the service", "reason", truncate(err.Error()))
		return
	}
	l.mu.Lock()
	l.dead = ""
	if l.status.SessionID == dead {
		l.status.SessionID = ""
	}
	l.mu.Unlock()
}

// setSessionID records the id of this listener's open session ("" once closed) for the
// pool's status.
func (l *poolListener) setSessionID(id string) {
	l.mu.Lock()
	changed := l.status.SessionID != id
	l.status.SessionID = id
	l.mu.Unlock()
	if changed {
		l.m.wake(l.key)
	}
}

// ensureScaleSet finds the pool's scale set, creating it (again, if it was deleted on
// GitHub) and bringing its labels up to date. A same-named scale set that is not the one
// recorded for this pool is refused, never taken over.
func (l *poolListener) ensureScaleSet(ctx context.Context, c ActionsService) (*scaleset.RunnerScaleSet, error) {
	want := make([]scaleset.Label, 0, len(l.cfg.labels))
	for _, name := range l.cfg.labels {
		want = append(want, scaleset.Label{Name: name, Type: "System"})
	}
	if id := l.scaleSetID(); id != 0 {
		ss, err := c.GetRunnerScaleSetByID(ctx, int(id))
		switch {
		case err == nil && ss != nil && ss.ID != 0:
			if !sameLabels(ss.Labels, want) {
				l.log.Info("Updating the scale set's labels", "labels", l.cfg.labels)
				upd, err := c.UpdateRunnerScaleSet(ctx, ss.ID, &scaleset.RunnerScaleSet{Name: ss.Name, RunnerGroupID: ss.RunnerGroupID, Labels: want})
				if err != nil {
					return nil, fmt.Errorf("updating scale set %d: %w", ss.ID, err)
				}
				ss = upd
			}
			l.setScaleSet(ss)
			return ss, nil
		case err == nil || isNotFound(err):
			l.log.Info("The pool's scale set is gone from GitHub; creating it again", "scaleSetID", id)
		default:
			return nil, fmt.Errorf("reading scale set %d: %w", id, err)
		}
	}
	group, err := c.GetRunnerGroupByName(ctx, l.cfg.group)
	if err != nil {
		return nil, fmt.Errorf("finding runner group %q: %w", l.cfg.group, err)
	}
	existing, err := c.GetRunnerScaleSet(ctx, group.ID, l.cfg.name)
	if err != nil {
		return nil, fmt.Errorf("looking up scale set %q: %w", l.cfg.name, err)
	}
	if existing != nil {
		return nil, &nameTakenError{name: l.cfg.name, id: existing.ID}
	}
	created, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{
		Name: l.cfg.name, RunnerGroupID: group.ID, Labels: want,
		RunnerSetting: scaleset.RunnerSetting{DisableUpdate: true},
	})
	if err != nil {
		return nil, fmt.Errorf("creating scale set %q: %w", l.cfg.name, err)
	}
	l.log.Info("Created the pool's runner scale set", "scaleSetID", created.ID)
	l.setScaleSet(created)
	l.recordID(ctx, created)
	return created, nil
}

// recordID writes the new scale set's id to the pool's status at once: it is what
// tells this pool's scale set from a same-named one Gantry did not create.
func (l *poolListener) recordID(ctx context.Context, ss *scaleset.RunnerScaleSet) {
	for attempt := range 5 {
		pool := &v1alpha1.RunnerPool{}
		err := l.m.Client.Get(ctx, l.key, pool)
		if err == nil {
			before := pool.DeepCopy()
			if pool.Status.ScaleSet == nil {
				pool.Status.ScaleSet = &v1alpha1.ScaleSetStatus{}
			}
			pool.Status.ScaleSet.ID, pool.Status.ScaleSet.Name = int64(ss.ID), ss.Name
			pool.Status.ScaleSet.RunnerGroupID = int64(ss.RunnerGroupID)
			var patch client.Patch
			if patch, err = controller.StatusPatch(before.Status, pool.Status); err == nil {
				if err = l.m.Client.Status().Patch(ctx, pool, patch); err == nil {
					return
				}
			}
		}
		l.log.Info("Recording the scale set's id in the pool's status failed; retrying", "attempt", attempt+1, "reason", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-l.m.Clock.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
}

// The listener's Scaler. The listener calls HandleJobStarted and HandleJobCompleted
// for the job messages of an answer, then HandleDesiredRunnerCount with the answer's
// count: the job messages are held until the count, and both are then committed
// together (answer.go), so that the pool never sees one without the other.

// HandleDesiredRunnerCount receives statistics.totalAssignedJobs after every answer of
// the long poll (and after the session's opening statistics); the pool's desired
// runners follow it (RunnerPool controller). It commits the answer's job messages with
// it, then tells the Tracker of them.
func (l *poolListener) HandleDesiredRunnerCount(_ context.Context, count int) (int, error) {
	now := l.m.Clock.Now()
	l.mu.Lock()
	told := l.told
	l.told = nil
	l.assigned, l.haveStats = count, true
	running := 0
	if st := l.status.Statistics; st != nil {
		running = int(st.RunningJobs)
	}
	l.jobs.commit(told, running, now)
	if len(told) > 0 {
		// Whole seconds, as the stored status keeps it: a time with a fraction would
		// differ from the stored one at every pass and be written again each time.
		t := metav1.NewTime(now.Truncate(time.Second))
		l.status.LastMessageAt = &t
	}
	desired := max(0, min(count+int(l.minIdle), int(l.maxRunners)))
	l.mu.Unlock()
	for _, n := range told {
		l.observe(n)
	}
	// Every answer wakes the pool, even one that changed nothing: the runners that
	// finished since the last held their jobs until this one (RunnerPool controller).
	l.m.wake(l.key)
	return desired, nil
}

// HandleJobStarted holds the news that a runner took a job until the answer's count
// (HandleDesiredRunnerCount), which then marks the runner busy, as an in_progress
// webhook would, and counts the job's arrival, at its queue time, for the pool's
// prediction: the service tells a scale set of a job when it starts, not when it is
// queued.
func (l *poolListener) HandleJobStarted(_ context.Context, j *scaleset.JobStarted) error {
	l.hold(jobNews{action: demand.ActionInProgress, job: j.JobMessageBase, runnerName: j.RunnerName, runnerID: j.RunnerID})
	return nil
}

// HandleJobCompleted holds the news that a runner's job ended until the answer's count,
// which then ends the runner's job, as a completed webhook would.
func (l *poolListener) HandleJobCompleted(_ context.Context, j *scaleset.JobCompleted) error {
	l.hold(jobNews{action: demand.ActionCompleted, job: j.JobMessageBase, runnerName: j.RunnerName, runnerID: j.RunnerID, result: j.Result})
	return nil
}

func (l *poolListener) hold(n jobNews) {
	l.mu.Lock()
	l.told = append(l.told, n)
	l.mu.Unlock()
}

// observe tells the Tracker of one job message.
func (l *poolListener) observe(n jobNews) {
	j := n.job
	if n.action == demand.ActionInProgress {
		at := j.QueueTime
		if at.IsZero() {
			at = l.m.Clock.Now()
		}
		l.m.Warm.Arrival(l.key, at)
	}
	id, err := strconv.ParseInt(j.JobID, 10, 64)
	if err != nil || id == 0 {
		id = -j.RunnerRequestID // not a workflow job id: keep it apart from them
	}
	sc, _ := github.ParseURL(l.cfg.url)
	ev := demand.JobEvent{
		Action: n.action,
		Job: demand.Job{
			ID: id, RunID: j.WorkflowRunID, Host: sc.Host, Owner: j.OwnerName, Repo: j.RepositoryName,
			Labels: j.RequestLabels, RunnerName: n.runnerName, RunnerID: int64(n.runnerID), CreatedAt: j.QueueTime,
			// For the runner's usage record: the runner's assignment is the job's start.
			Name: j.JobDisplayName, Workflow: workflowOfRef(j.JobWorkflowRef), StartedAt: j.RunnerAssignTime,
			Conclusion: conclusionOf(n.result),
		},
		ObservedAt: l.m.Clock.Now(),
	}
	if n.action == demand.ActionCompleted {
		ev.Job.CompletedAt = j.FinishTime
	}
	l.m.Tracker.Observe(ev)
}

// workflowOfRef is the workflow of a job message's jobWorkflowRef,
// "OWNER/REPO/.github/workflows/ci.yml@refs/heads/main": its file path,
// ".github/workflows/ci.yml". The Actions service names no workflow, so a scale-set
// pool's usage records name its file where a webhook pool's name its name.
func workflowOfRef(ref string) string {
	path, _, _ := strings.Cut(ref, "@")
	if i := strings.Index(path, "/.github/"); i >= 0 {
		return path[i+1:]
	}
	return path
}

// conclusionOf maps a JobCompleted result to the conclusion GitHub's REST API and
// webhooks give the same job: the service says succeeded, failed and canceled
// (actions/scaleset's JobCompleted.Result).
func conclusionOf(result string) string {
	switch r := strings.ToLower(result); r {
	case "succeeded":
		return "success"
	case "failed":
		return "failure"
	case "canceled":
		return "cancelled" //nolint:misspell // GitHub's spelling
	default:
		return r
	}
}

// The listener's MetricsRecorder: the statistics go to the pool's status.

func (l *poolListener) RecordStatistics(s *scaleset.RunnerScaleSetStatistic) {
	if s == nil {
		return
	}
	l.mu.Lock()
	l.status.Statistics = &v1alpha1.ScaleSetStatistics{
		AvailableJobs: int32(s.TotalAvailableJobs), AcquiredJobs: int32(s.TotalAcquiredJobs),
		AssignedJobs: int32(s.TotalAssignedJobs), RunningJobs: int32(s.TotalRunningJobs),
		RegisteredRunners: int32(s.TotalRegisteredRunners), BusyRunners: int32(s.TotalBusyRunners), IdleRunners: int32(s.TotalIdleRunners),
	}
	l.mu.Unlock()
}
func (l *poolListener) RecordJobStarted(*scaleset.JobStarted)     {}
func (l *poolListener) RecordJobCompleted(*scaleset.JobCompleted) {}
func (l *poolListener) RecordDesiredRunners(int)                  {}

// State.

func (l *poolListener) setLimits(maxRunners, minIdle int32) {
	l.mu.Lock()
	l.maxRunners, l.minIdle = maxRunners, minIdle
	lis := l.lis
	l.mu.Unlock()
	if lis != nil {
		lis.SetMaxRunners(int(maxRunners))
	}
}

func (l *poolListener) limits() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxRunners
}

func (l *poolListener) setScaleSet(ss *scaleset.RunnerScaleSet) {
	l.mu.Lock()
	l.id = int64(ss.ID)
	l.status.ID, l.status.Name, l.status.RunnerGroupID = int64(ss.ID), ss.Name, int64(ss.RunnerGroupID)
	l.mu.Unlock()
}

func (l *poolListener) setSession(s v1alpha1.SessionState, reason, msg string) {
	l.mu.Lock()
	changed := l.status.Session != s || l.status.Message != msg || l.reason != reason
	l.status.Session, l.status.Message, l.reason = s, msg, reason
	if s != v1alpha1.SessionActive {
		l.haveStats = false // no fresh count until the session answers again
	}
	l.mu.Unlock()
	if changed {
		l.m.wake(l.key)
	}
}

// adoptID takes the scale set id recorded in the pool's status when the listener knows
// none yet (the status was written after the listener started), and with it the session
// recorded beside it: a listener without an id has opened no session, so that one is a
// previous leader's, to be closed before this listener opens its own.
func (l *poolListener) adoptID(id int64, session string) {
	if id == 0 {
		return
	}
	l.mu.Lock()
	if l.id == 0 {
		l.id, l.status.ID = id, id
		if session != "" && l.dead == "" {
			l.dead, l.status.SessionID = session, session
		}
	}
	l.mu.Unlock()
}

func (l *poolListener) scaleSetID() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.id
}

func (l *poolListener) snapshot() (v1alpha1.ScaleSetStatus, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.status.DeepCopy(), l.reason
}

func (l *poolListener) assignedJobs() (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.assigned, l.haveStats
}

// stop ends the listener and waits until its session is closed.
func (l *poolListener) stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

func sameLabels(have, want []scaleset.Label) bool {
	if len(have) != len(want) {
		return false
	}
	seen := map[string]bool{}
	for _, h := range have {
		seen[strings.ToLower(h.Name)] = true
	}
	for _, w := range want {
		if !seen[strings.ToLower(w.Name)] {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > 900 {
		return s[:900] + "…"
	}
	return s
}
