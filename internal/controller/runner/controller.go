// Package runner is the Runner controller: it owns one ephemeral runner from birth to
// removal. Phases, each in its own file:
//
//	register.go  JIT configuration from the pool's demand source → a Secret the Runner owns
//	cache.go     a free volume of each of the pool's caches, claimed for the runner
//	pod.go       the runner pod, reading the JIT configuration from that Secret
//	observe.go   pod and job state → phase
//	stuck.go     failure detection for every container of a pod not running its agent
//	online.go    Pending until GitHub lists the runner online, from one listing per scope
//	rollout.go   the template hash a runner's pod was made from; outdated runners
//	finalize.go  unregister from GitHub (a busy runner is kept), delete pod and Secret
//	reap.go      exited runners' pods and Secrets deleted many runners a request
//	usage.go     each runner's usage record (log line, event, metrics) when it ends
//
// ownwrites.go keeps a reconcile from acting on a cached Runner older than the
// controller's own last write to it; unwritten.go remembers a new runner's registration
// and pod until the status write that records them with its job.
package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/nodes"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/warm"
)

// Reconciler reconciles Runners.
type Reconciler struct {
	Client    ctrl.Client // cached reads, writes
	APIReader ctrl.Reader // uncached reads: guards against a stale cache before creating
	GitHub    *controller.GitHubResolver
	Tracker   *demand.Tracker
	// Sources register and remove the runners, by the pool's demand source.
	Sources  *source.Sources
	Failures *controller.FailureBackoff
	Events   events.EventRecorder
	Clock    clock.Clock
	// FailedRetention is how long a Failed Runner stays visible before it is removed.
	FailedRetention time.Duration
	// Warm is told each runner's start time, for spec.warm.predictive; nil: not told.
	Warm *warm.Observations
	// Births are the Runners this process created (the RunnerPool reconciler records
	// them): their Secret needs no lookup before registering. nil: every Runner's is
	// looked up.
	Births *controller.RunnerBirths
	// WatchedNamespaces are the namespaces the manager's cache watches (--namespaces);
	// empty: all. A container hook slot is used only where the cache sees it.
	WatchedNamespaces []string
	// HookNetworkPolicy is the runner NetworkPolicy (--runner-network-policy) put in each
	// container hook namespace a runner gets (isolation Runner); nil: none.
	HookNetworkPolicy *networkingv1.NetworkPolicy
	// Usage says how runners' usage is recorded (usage.go).
	Usage UsageOptions
	// Nodes is the shared view of the nodes (a cache volume's node, cache.go); nil or
	// disabled: every node is taken to be usable.
	Nodes *nodes.View
	// Slots is the claim table of the container hook slots (hookslots.go), shared with
	// the RunnerPool reconciler, which prunes idle slots through it; nil: one of this
	// Reconciler's own.
	Slots *HookSlots

	writes    ownWrites
	online    onlineRunners
	unwritten unwrittenStatus
	exited    exitedReaper
	slotsOnce sync.Once
	// defaultServiceAccounts are the hook namespaces whose default ServiceAccount this
	// process saw or made (ensureDefaultServiceAccount).
	defaultServiceAccounts sync.Map
	// hookPods is what this process saw of each runner's workflow pod (hookpods.go).
	hookPods seenHookPods
	// unregistered: finalizing runners already removed from GitHub (finalize.go).
	unregistered unregisteredRunners
	// usage: what each runner's usage record needs until it is written (usage.go).
	usage usageBook
}

// scope is one reconcile's working set.
type scope struct {
	runner *v1alpha1.Runner
	pool   *v1alpha1.RunnerPool
	pod    *corev1.Pod
	before *v1alpha1.Runner
}

func (s *scope) poolKey() types.NamespacedName {
	return types.NamespacedName{Namespace: s.runner.Namespace, Name: s.runner.Spec.PoolName}
}

// Reconcile moves one Runner along its life.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	runner := &v1alpha1.Runner{}
	if err := r.Client.Get(ctx, req.NamespacedName, runner); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.forget(req.NamespacedName)
			r.forgetRegistration(req.NamespacedName)
			r.usage.forget(req.NamespacedName)
			if r.Tracker != nil {
				r.Tracker.ForgetRunner(req.Name) // finalize leaves it till now
			}
		}
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	if r.writes.behind(runner, r.Clock.Now()) {
		// The cache has not caught up with this controller's last write to the runner:
		// that write's event brings it back; the requeue is a backstop.
		return reconcile.Result{RequeueAfter: behindRecheck}, nil
	}
	if !runner.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, runner)
	}
	if runner.DecodeError != "" {
		// Stored with fields this version cannot read: acting on part of its status could
		// register it twice or lose its job. Say so on it and leave it alone.
		log.FromContext(ctx).Info("Runner cannot be read as stored; leaving it alone", "problem", runner.DecodeError)
		r.Events.Eventf(runner, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidSpec, "Reconcile",
			"the stored runner has fields Gantry cannot read (%s); delete it to have it replaced", runner.DecodeError)
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(runner, v1alpha1.Finalizer) {
		controllerutil.AddFinalizer(runner, v1alpha1.Finalizer)
		from := runner.ResourceVersion
		patch := controller.FinalizersPatch(runner)
		if err := r.Client.Patch(ctx, runner, patch); err != nil {
			return reconcile.Result{}, err
		}
		r.writes.wrote(runner, from, r.Clock.Now())
		return reconcile.Result{}, nil
	}

	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: runner.Namespace, Name: runner.Spec.PoolName}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			// An orphan: its pool is gone. Unregister and remove it.
			return reconcile.Result{}, r.deleteRunner(ctx, runner)
		}
		return reconcile.Result{}, err
	}

	if pool.DecodeError != "" && runner.Status.PodName == "" && !r.podMade(runner) {
		// Part of the pool's spec cannot be read (its conditions say which): start no
		// runner from the rest. Runners already running go on.
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}

	s := &scope{runner: runner, pool: pool, before: runner.DeepCopy()}
	r.recall(s)
	r.recallJob(s)
	defer func() {
		later, perr := r.writeStatus(ctx, s)
		if perr != nil && err == nil {
			err = perr
		}
		if later > 0 && (res.RequeueAfter == 0 || later < res.RequeueAfter) {
			res.RequeueAfter = later // to write what waits, if nothing else has by then
		}
	}()

	if runner.Status.Phase == v1alpha1.RunnerFailed {
		return r.expireFailed(ctx, s)
	}
	markOutdated(s)
	return runPhases(ctx, s,
		r.register,
		r.leaseCaches,
		r.claimHookSlot, // hookslot.go
		r.ensurePod,
		r.trackUsage,     // usage.go
		r.containerHooks, // hookpods.go
		r.observe,
	)
}

// phase is one step of a Runner's reconcile: its result, whether the next phase may
// run (done), and an error that ends the reconcile.
type phase func(context.Context, *scope) (reconcile.Result, bool, error)

// runPhases runs the phases in order until one is not done or fails. The result merges
// the requeues of every phase that ran, the sooner non-zero one winning
// (controller.LowestNonZeroResult): a phase that is done but wants another look later —
// containerHooks while a Pending workflow pod is inside imagePullGracePeriod — keeps
// that look even when the phases after it ask for none. On an error the failing phase's
// result is returned as it is, the error deciding the retry.
func runPhases(ctx context.Context, s *scope, phases ...phase) (reconcile.Result, error) {
	var merged reconcile.Result
	for _, p := range phases {
		res, done, err := p(ctx, s)
		if err != nil {
			return res, err
		}
		merged = controller.LowestNonZeroResult(merged, res)
		if !done {
			return merged, nil
		}
	}
	return merged, nil
}

// behindRecheck is the backstop requeue of a runner the cache shows older than this
// controller's last write to it.
const behindRecheck = 2 * time.Second

// writeStatus writes the reconcile's status, unless only what this process remembers
// changed and may wait (writeLater): then it returns how long.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) (time.Duration, error) {
	if later := r.writeLater(s); later > 0 {
		return later, nil
	}
	if workflowPodReadyRides(s) { // hookpods.go
		return 0, nil
	}
	return 0, r.patchStatus(ctx, s)
}

func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	if equalStatus(s.before.Status, s.runner.Status) {
		return nil
	}
	from := s.runner.ResourceVersion
	patch, err := controller.StatusPatch(s.before.Status, s.runner.Status)
	if err != nil {
		return err
	}
	if err := r.Client.Status().Patch(ctx, s.runner, patch); err != nil {
		return ctrl.IgnoreNotFound(err)
	}
	r.writes.wrote(s.runner, from, r.Clock.Now())
	return nil
}

// deleteRunner deletes the Runner, which runs finalize, and remembers it did so that a
// reconcile on a cache that does not show the deletion yet does not send it again.
func (r *Reconciler) deleteRunner(ctx context.Context, rn *v1alpha1.Runner) error {
	if err := r.Client.Delete(ctx, rn); err != nil {
		return ctrl.IgnoreNotFound(err)
	}
	r.writes.deleted(rn, r.Clock.Now())
	return nil
}

// expireFailed removes a Failed Runner once it has been visible for FailedRetention.
// Until then it sees its pod go: the pod was deleted when the runner failed, and one
// stuck terminating — its node gone too — is force-deleted after nodeLostTimeout.
func (r *Reconciler) expireFailed(ctx context.Context, s *scope) (reconcile.Result, error) {
	var res reconcile.Result
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.runner.Namespace, Name: s.runner.Name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		// The pod is gone: its cache volumes are free again.
		if err := r.releaseCaches(ctx, s.runner); err != nil {
			return reconcile.Result{}, err
		}
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading the failed runner's pod: %w", err)
	case pod.DeletionTimestamp.IsZero():
		// The delete when the runner failed did not go through.
		if err := r.Client.Delete(ctx, pod); ctrl.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("deleting the failed runner's pod: %w", err)
		}
	default:
		if res.RequeueAfter, err = r.reapStuckPod(ctx, pod, s.pool.Spec.Recovery.NodeLostTimeoutOrDefault()); err != nil {
			return reconcile.Result{}, err
		}
		if res.RequeueAfter > 0 {
			// Keep the Runner until its pod is gone: removed now, it would leave a pod
			// stuck terminating on a lost node with nothing left to force-delete it.
			return res, nil
		}
	}
	failedAt := s.runner.CreationTimestamp.Time
	for _, c := range s.runner.Status.Conditions {
		if c.Type == ConditionFailed {
			failedAt = c.LastTransitionTime.Time
		}
	}
	if left := r.FailedRetention - r.Clock.Since(failedAt); left > 0 {
		if res.RequeueAfter == 0 || left < res.RequeueAfter {
			res.RequeueAfter = left
		}
		return res, nil
	}
	return reconcile.Result{}, r.deleteRunner(ctx, s.runner)
}

// indexName indexes Runners by name across namespaces: a GitHub runner's name is its
// Runner's name, and webhooks name only the GitHub runner.
const indexName = "gantry.runner.name"

// runnerByName finds the Runners a GitHub runner name belongs to.
func (r *Reconciler) runnerByName(ctx context.Context, name string) []reconcile.Request {
	var list v1alpha1.RunnerList
	if err := r.Client.List(ctx, &list, ctrl.MatchingFields{indexName: name}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: it.Namespace, Name: it.Name}})
	}
	return out
}
