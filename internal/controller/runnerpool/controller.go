// Package runnerpool is the RunnerPool controller: it computes how many runners a pool
// needs and chooses which to create or retire. It never touches GitHub for a runner —
// the Runner controller does — and never retires a busy runner.
//
//	controller.go  Reconcile: get, drain, take up, then the phases in order, their
//	               requeues merged by one rule (controller.LowestNonZeroResult):
//	credentials.go   takeUp: finalizer and credentials in one patch; holdCredentials:
//	                 the credentials Secret held while the pool uses it
//	platform.go      platform: the OS and architecture runners are pinned to and register
//	budget.go        disruptionBudget: the pool's PodDisruptionBudget, applied once
//	follow.go        follow: configuration, idle floor, Router and demand source told
//	observe.go       observe: runners counted, demand read once, desired computed
//	scale.go         scale: creation with expectations, victim choice
//	holds.go         a scale-set pool's runners held busy until the service's next answer
//	cache.go         caches: cache volumes' status, idle ones deleted, reclaimed with the pool
//	hookslots.go     pruneHookSlots: container hook slots idle HookSlotIdle deleted
//	statuswrites.go  writeStatus (deferred): the status computed and written once
//	validate.go    a stored pool that cannot be used as it is (InvalidSpec)
//	warm.go        the idle floor in force: minIdle, raised by schedules and the prediction
//	rollout.go     runners made from an older template: counted, idle and pending replaced
//	status.go      counts and conditions
//	events.go      Warning and Normal events when the pool degrades and recovers
//	metrics.go     per-pool gauges and the pickup latency histogram
package runnerpool

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/nodes"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
	"github.com/gantry-dev/gantry/internal/warm"
)

// Finalizer keeps a RunnerPool until it has drained: busy runners finished, the others
// unregistered and removed.
const Finalizer = "gantry.dev/pool-drain"

// Reconciler reconciles RunnerPools.
type Reconciler struct {
	Client client.Client
	// APIReader reads credentials Secrets, which the cache does not hold.
	APIReader client.Reader
	// Nodes is the shared view of the nodes (platform.go); nil or disabled: none is read.
	Nodes *nodes.View
	// Births is told of each Runner created (shared with the Runner reconciler); nil:
	// not told.
	Births  *controller.RunnerBirths
	GitHub  *controller.GitHubResolver
	Tracker *demand.Tracker
	// Sources are the pools' demand sources, one chosen per pool (source.Sources.For).
	Sources  *source.Sources
	Failures *controller.FailureBackoff
	Events   events.EventRecorder
	Clock    clock.Clock
	// Warm holds the job arrivals and runner start times spec.warm.predictive is sized
	// from; nil turns the prediction off.
	Warm *warm.Observations
	// FailureThreshold is how many failures in a row mark a pool Degraded.
	FailureThreshold int
	// WatchedNamespaces are the namespaces the manager's cache watches (--namespaces);
	// empty: all. A Kubernetes-mode pool's containerMode.namespace must be among them.
	WatchedNamespaces []string
	// Slots is the claim table of the container hook slots, shared with the Runner
	// reconciler (runner.HookSlots): idle slots are pruned through it; nil: none is.
	Slots *runner.HookSlots

	expectations  expectations
	credentials   credentialsGuard
	routedMu      sync.Mutex
	routed        map[types.NamespacedName]demand.Pool
	statusWrites  statusWrites
	platformReads platformReads
	holds         answerHolds
	budgets       budgetApplied
}

// Reconcile scales one pool: get it, drain it when deleted, take it up (its finalizer
// and the credentials Secret it holds, in one patch), then run the phases in order on
// one state and write the status once (deferred). Every phase runs, whatever the others
// returned; their results merge into the lowest non-zero requeue and their errors are
// joined.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	pool = r.statusWrites.newest(req.NamespacedName, pool) // its last status write, if the cache is behind
	seenMark := r.expectations.mark()                      // before the list: see expectations
	runners, err := r.listRunners(ctx, pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		return r.drain(ctx, pool, runners)
	}
	if !controllerutil.ContainsFinalizer(pool, Finalizer) {
		return reconcile.Result{}, r.takeUp(ctx, pool) // credentials.go
	}

	st := &state{pool: pool, runners: runners, before: pool.DeepCopy(), seenMark: seenMark, source: r.Sources.For(pool)}
	defer func() {
		wres, werr := r.writeStatus(ctx, st)
		res, err = controller.LowestNonZeroResult(res, wres), errors.Join(err, werr)
	}()
	var errs []error
	for _, phase := range []func(context.Context, *state) (reconcile.Result, error){
		r.holdCredentials,
		r.platform,
		r.disruptionBudget, // budget.go
		r.follow,
		r.observe,
		r.scale,
		r.caches,
		r.pruneHookSlots, // hookslots.go
	} {
		pres, perr := phase(ctx, st)
		res = controller.LowestNonZeroResult(res, pres)
		errs = append(errs, perr)
	}
	return res, errors.Join(errs...)
}

// caches tends the pool's cache volumes (cache.go).
func (r *Reconciler) caches(ctx context.Context, st *state) (reconcile.Result, error) {
	return r.tendCaches(ctx, st.pool)
}

// forget lets go of everything held for a pool that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.unroute(key)
	r.Sources.Forget(key)
	r.statusWrites.forget(key)
	r.platformReads.forget(key)
	r.holds.forget(key)
	r.budgets.forget(key)
	r.Failures.Forget(key)
	r.Warm.Forget(key)
	forgetMetrics(key)
	forgetCacheMetrics(key.Namespace, key.Name)
}

// credentialsRetry is how soon holding the credentials Secret is tried again after a
// write conflict.
const credentialsRetry = time.Second

// configRecheck is how often a pool whose configuration is broken is checked again.
const configRecheck = 30 * time.Second

// listRunners returns the pool's Runners as the cache holds them, not copied: a pool is
// reconciled as its runners move (settle apart), and deep-copying every runner each time was
// a sixth of the controller's CPU in `gantry sim run --scenario steady`. They are
// read-only: the pool controller only reads them and passes them to Delete, which does
// not write into its argument.
func (r *Reconciler) listRunners(ctx context.Context, pool *v1alpha1.RunnerPool) ([]v1alpha1.Runner, error) {
	var list v1alpha1.RunnerList
	if err := r.Client.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingLabels{v1alpha1.LabelPool: pool.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// drain retires a deleted pool's runners: idle and pending ones are deleted (the Runner
// controller unregisters them), busy ones finish their job first. When no Runner is
// left, the cache volumes are deleted or kept per their reclaimPolicy (cache.go), the
// credentials Secret is let go (unless another pool uses it), the pool's
// failure record forgotten and the finalizer removed.
func (r *Reconciler) drain(ctx context.Context, pool *v1alpha1.RunnerPool, runners []v1alpha1.Runner) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	r.unroute(key)
	tracked := r.snapshot(key, runners)
	var errs []error
	for i := range runners {
		rn := &runners[i]
		if !rn.DeletionTimestamp.IsZero() || isBusy(rn, tracked) {
			continue
		}
		if err := r.Client.Delete(ctx, rn); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return reconcile.Result{}, errors.Join(errs...)
	}
	if len(runners) > 0 {
		// Runner changes wake the pool; the requeue is a backstop.
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	}
	// Every runner is unregistered: what the demand source keeps for the pool (a scale
	// set) can go, then the credentials are no longer needed for this pool.
	if done, err := r.Sources.For(pool).Remove(ctx, pool); err != nil || !done {
		if err != nil {
			log.FromContext(ctx).Info("Removing what the pool's demand source keeps failed; retrying", "reason", err.Error())
		}
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if err := r.reclaimCaches(ctx, pool); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.releaseCredentials(ctx, pool); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.removeContainerMode(ctx, pool); err != nil {
		return reconcile.Result{}, err
	}
	r.Failures.Forget(key)
	runner.ForgetPool(pool.UID)
	controllerutil.RemoveFinalizer(pool, Finalizer)
	patch := controller.FinalizersPatch(pool)
	return reconcile.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, pool, patch))
}

// RouterPool is what the Router is told of a pool: its scope and the labels its runners
// register (RunnerLabels). `gantry doctor` routes a job with the same answer.
func RouterPool(pool *v1alpha1.RunnerPool) (demand.Pool, error) {
	sc, err := github.ParseURL(pool.Spec.GitHub.URL)
	if err != nil {
		return demand.Pool{}, err
	}
	p := demand.Pool{
		Key: types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}, Host: sc.Host,
		Owner: sc.Owner, Repo: sc.Repo, Enterprise: sc.Enterprise, Labels: pool.RunnerLabels(),
		External: pool.UsesScaleSet(),
	}
	if pool.UsesScaleSet() {
		// Jobs reach a scale set by its name too.
		p.Labels = append([]string{pool.ScaleSetName()}, p.Labels...)
	}
	switch sc.Kind {
	case github.ScopeRepository:
		p.Kind = demand.ScopeRepository
	case github.ScopeOrganization:
		p.Kind = demand.ScopeOrganization
	case github.ScopeEnterprise:
		p.Kind = demand.ScopeEnterprise
	}
	return p, nil
}
