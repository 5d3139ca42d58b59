package scaleset

import (
	"context"
	"fmt"
	"time"

	"github.com/actions/scaleset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
)

// Source is the scale-set demand source: the pool's listener (Manager) long-polls its
// scale set, whose statistics are its demand; runners get their JIT configuration from
// the scale set and are removed through the Actions service. The service's typed
// failures are translated to github's (AlreadyExists, Busy), so that the Runner
// controller handles one vocabulary.
type Source struct {
	*Manager
}

var _ source.Source = Source{}

// scaleSetWait is how long a runner of a scale-set pool waits for its pool's scale set
// to exist before it looks again.
const scaleSetWait = 2 * time.Second

// Follow starts or keeps the pool's listener (Ensure).
func (s Source) Follow(pool *v1alpha1.RunnerPool, floor int32) { s.Ensure(pool, floor) }

// Demand is the jobs the service assigned to the pool's scale set
// (statistics.totalAssignedJobs, waiting and running) less those its busy runners run,
// plus the answer's lag (tracked.Lag): runners its job messages say run a job the same
// answer's count no longer has running. An answer's counts are the service's when it
// was sent, while its job messages may be a backlog (at most 50 to an answer), so a job
// completed since has left the count before its JobCompleted is heard: its runner,
// busy to the pool until then, must not take the place of the runner of a job still
// waiting. Counted against the waiting jobs, it had the pool retire runners on their
// way to a job and make them again an answer later (the fleet scenario's single-pool
// burst: 16 runners made and retired unused, 8 jobs picked up 10 s late). The lag is
// of the answers alone — the webhooks may have told of more starts — so that what the
// webhooks heard first is not counted twice. Until the session has answered, known is
// false and nothing is retired.
func (s Source) Demand(key types.NamespacedName, tracked demand.PoolSnapshot, busy int) (demand.Demand, bool) {
	assigned, ok := s.Assigned(key)
	return demand.Demand{Queued: max(0, assigned-busy+tracked.Lag)}, ok
}

// Runners adds to tracked, the Tracker's word on the pool's runners, the listener's:
// which run a job and which finished one as of the answer whose count Demand reads,
// which runners run a job without a Runner any more, and which answer that is. The pool
// counts its runners and the assigned jobs from the same answer.
func (s Source) Runners(key types.NamespacedName, tracked demand.PoolSnapshot, runners []v1alpha1.Runner) demand.PoolSnapshot {
	names := make([]string, len(runners))
	for i := range runners {
		names[i] = runners[i].Name
	}
	running, done, elsewhere, answer, lag, ok := s.Manager.Runners(key, names)
	if !ok {
		return tracked
	}
	out := tracked.WithRunners(running, done, elsewhere, answer)
	out.Lag = lag
	return out
}

// Status copies the listener's view of the scale set and its session into the pool's
// status and its ScaleSetSession condition. A same-named scale set Gantry did not create
// keeps the pool from being Ready.
func (s Source) Status(pool *v1alpha1.RunnerPool) (string, string) {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	ss, reason, ok := s.Manager.Status(key)
	if !ok {
		ss = v1alpha1.ScaleSetStatus{Name: pool.ScaleSetName(), Session: v1alpha1.SessionClosed,
			Message: "no session: the pool's configuration must be fixed first (see the Ready condition)"}
		reason = v1alpha1.ReasonScaleSetUnavailable
	}
	if prev := pool.Status.ScaleSet; prev != nil && ss.ID == 0 {
		ss.ID, ss.RunnerGroupID = prev.ID, prev.RunnerGroupID
	}
	if prev := pool.Status.ScaleSet; prev != nil && !ok {
		ss.SessionID = prev.SessionID // no listener: whatever session is recorded stays for the next one to close
	}
	pool.Status.ScaleSet = &ss
	c := metav1.Condition{Type: v1alpha1.ConditionScaleSetSession, Status: metav1.ConditionFalse, Reason: reason, Message: ss.Message,
		ObservedGeneration: pool.Generation}
	if ss.Session == v1alpha1.SessionActive {
		c.Status, c.Message = metav1.ConditionTrue, "the scale set's message session is open in the leader and long-polled"
	}
	if c.Message == "" {
		c.Message = string(ss.Session)
	}
	meta.SetStatusCondition(&pool.Status.Conditions, c)
	if reason == v1alpha1.ReasonScaleSetNameTaken {
		return reason, ss.Message
	}
	return "", ""
}

// Remove stops the listener and deletes the scale set (Manager.Remove).
func (s Source) Remove(ctx context.Context, pool *v1alpha1.RunnerPool) (bool, error) {
	if s.Manager == nil {
		return true, nil
	}
	return s.Manager.Remove(ctx, pool)
}

// Register asks the scale set's own endpoint for the runner's JIT configuration, so
// the service hands it the scale set's jobs. A *source.WaitError while the scale set
// does not exist yet.
func (s Source) Register(ctx context.Context, pool *v1alpha1.RunnerPool, name string) (source.Registration, error) {
	id := s.ScaleSetID(pool)
	if id == 0 {
		return source.Registration{}, source.NewWaitError(
			"waiting for the pool's runner scale set to exist on GitHub (see the pool's ScaleSetSession condition)", scaleSetWait)
	}
	c, err := s.Clients.For(ctx, pool)
	if err != nil {
		return source.Registration{}, err
	}
	log.FromContext(ctx).V(1).Info("Registering runner in the scale set", "scaleSetID", id)
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: name, WorkFolder: "_work"}, int(id))
	if err != nil {
		return source.Registration{}, translate(fmt.Errorf("generating the scale set's JIT configuration: %w", err))
	}
	return source.Registration{JITConfig: jit.EncodedJITConfig, RunnerID: int64(jit.Runner.ID)}, nil
}

// RemoveStale removes the registration named name, if the service has one.
func (s Source) RemoveStale(ctx context.Context, pool *v1alpha1.RunnerPool, name string) error {
	c, err := s.Clients.For(ctx, pool)
	if err != nil {
		return err
	}
	ref, err := c.GetRunnerByName(ctx, name)
	if err != nil {
		return fmt.Errorf("finding the stale registration of %s: %w", name, err)
	}
	if ref == nil {
		return nil
	}
	if err := c.RemoveRunner(ctx, int64(ref.ID)); err != nil && !IsRunnerNotFound(err) {
		return translate(fmt.Errorf("removing the stale registration of %s: %w", name, err))
	}
	return nil
}

// Unregister removes the runner through the Actions service. A runner never registered
// (id 0: scale-set runners always have one) or already gone is done.
func (s Source) Unregister(ctx context.Context, pool *v1alpha1.RunnerPool, _ string, id int64) error {
	if id == 0 {
		return nil
	}
	c, err := s.Clients.For(ctx, pool)
	if err != nil {
		return err
	}
	log.FromContext(ctx).V(1).Info("Removing runner from the scale set", "id", id)
	if err := c.RemoveRunner(ctx, id); err != nil && !IsRunnerNotFound(err) {
		return translate(fmt.Errorf("removing runner from the scale set: %w", err))
	}
	return nil
}

// translate gives the service's typed failures github's reasons.
func translate(err error) error {
	switch {
	case IsRunnerExists(err):
		return github.NewAlreadyExistsError(err.Error(), err)
	case IsJobStillRunning(err):
		return github.NewBusyError(err.Error(), err)
	}
	return err
}
