// Package runnerpool is the RunnerPool controller: it computes how many runners a pool
// needs and chooses which to create or retire. It never touches GitHub for a runner —
// the Runner controller does — and never retires a busy runner.
//
//	controller.go  Reconcile: get, finalizer, route, count, scale, status
//	credentials.go the credentials Secret held (finalizer) while the pool uses it
//	validate.go    a stored pool that cannot be used as it is (InvalidSpec)
//	warm.go        the idle floor in force: minIdle, raised by schedules and the prediction
//	scale.go       desired count, creation with expectations, victim choice
//	cache.go       cache volumes: status, idle ones deleted, reclaimed with the pool
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

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/controller/scaleset"
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
	// Births is told of each Runner created (shared with the Runner reconciler); nil:
	// not told.
	Births  *controller.RunnerBirths
	GitHub  *controller.GitHubResolver
	Tracker *demand.Tracker
	// ScaleSets runs the scale-set pools' listeners (demand.source ScaleSet).
	ScaleSets *scaleset.Manager
	Failures  *controller.FailureBackoff
	Events    events.EventRecorder
	Clock     clock.Clock
	// Warm holds the job arrivals and runner start times spec.warm.predictive is sized
	// from; nil turns the prediction off.
	Warm *warm.Observations
	// FailureThreshold is how many failures in a row mark a pool Degraded.
	FailureThreshold int

	expectations  expectations
	credentialsMu sync.Mutex
	credentials   credentialsGuard
	routedMu      sync.Mutex
	routed        map[types.NamespacedName]demand.Pool
	statusWrites  statusWrites
}

// Reconcile scales one pool.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.unroute(req.NamespacedName)
			r.ScaleSets.Forget(req.NamespacedName)
			r.statusWrites.forget(req.NamespacedName)
			r.Failures.Forget(req.NamespacedName)
			r.Warm.Forget(req.NamespacedName)
			forgetMetrics(req.NamespacedName)
			forgetCacheMetrics(req.Namespace, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	seenMark := r.expectations.mark() // before the list: see expectations
	runners, err := r.listRunners(ctx, pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		return r.drain(ctx, pool, runners)
	}
	if !controllerutil.ContainsFinalizer(pool, Finalizer) {
		controllerutil.AddFinalizer(pool, Finalizer)
		patch := controller.FinalizersPatch(pool)
		return reconcile.Result{}, r.Client.Patch(ctx, pool, patch)
	}

	credErr := r.guardCredentials(ctx, pool)
	switch {
	case apierrors.IsConflict(credErr):
		// Someone else wrote the Secret or the pool meanwhile: an ordinary race, tried
		// again shortly.
		log.FromContext(ctx).V(1).Info("Holding the credentials secret: tried again shortly", "reason", credErr.Error())
	case credErr != nil && ctx.Err() == nil: // not the controller shutting down
		// The pool works on; only the Secret's protection waits for the next reconcile.
		log.FromContext(ctx).Error(credErr, "Holding the credentials secret")
	}

	before := pool.DeepCopy()
	st := &state{pool: pool, runners: runners}
	st.configErr, st.unavailable = r.checkConfig(ctx, pool)
	if st.configErr == nil {
		st.configErr = r.ensureContainerMode(ctx, pool) // containermode.go
	}
	st.floor = r.computeWarmFloor(pool, r.Clock.Now())
	if st.configErr == nil {
		r.route(pool)
		if pool.UsesScaleSet() {
			r.ScaleSets.Ensure(pool, int32(st.floor.MinIdle))
		}
	} else {
		r.unroute(req.NamespacedName)
		r.ScaleSets.Forget(req.NamespacedName)
	}

	st.tracked = r.snapshot(req.NamespacedName, runners)
	st.count(r.expectations.pending(req.NamespacedName, seenMark, runners, r.Clock.Now()))
	st.countOutdated()
	if prev := pool.Status.TemplateHash; prev != "" && prev != st.templateHash {
		// A changed template gets a fresh start: the failures were the old template's,
		// and a fixed template should not wait out their backoff.
		r.Failures.RecordSuccess(req.NamespacedName)
	}
	st.demand, st.rebuilt = st.tracked.Demand, st.tracked.Rebuilt
	if pool.UsesScaleSet() {
		st.demand, st.rebuilt = r.scaleSetDemand(req.NamespacedName, st.busy)
	}
	st.failures = r.Failures.Get(req.NamespacedName)
	st.desired = desired(pool.Spec, st.floor.MinIdle, st.busy, st.demand.Queued)
	if storedSpecError(pool) != nil {
		// Part of the spec is unknown: hold the runners there are, neither create nor retire.
		st.desired = st.active()
	}
	st.recent = recentRepositories(pool.Status.RecentRepositories, st.tracked.Repos, r.Clock.Now())

	res, scaleErr := r.scale(ctx, st)
	cacheRes, cacheErr := r.tendCaches(ctx, pool)
	if cacheRes.RequeueAfter > 0 && (res.RequeueAfter == 0 || cacheRes.RequeueAfter < res.RequeueAfter) {
		res.RequeueAfter = cacheRes.RequeueAfter
	}
	scaleErr = errors.Join(scaleErr, cacheErr)
	if pool.UsesScaleSet() {
		r.scaleSetStatus(st)
	}
	setStatus(st, r.Clock.Now(), r.FailureThreshold)
	recordMetrics(st)
	if wait := r.statusWrites.wait(req.NamespacedName, before, pool, r.Clock.Now()); wait > 0 {
		// Only counts moved, and the status was written less than statusInterval ago:
		// write the latest counts then.
		if res.RequeueAfter == 0 || res.RequeueAfter > wait {
			res.RequeueAfter = wait
		}
	} else if !equality.Semantic.DeepEqual(before.Status, pool.Status) {
		// An unchanged status is not sent: an empty patch still costs the API server a
		// request, once for every runner that moves.
		patch, err := controller.StatusPatch(before.Status, pool.Status)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.Client.Status().Patch(ctx, pool, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		r.statusWrites.wrote(req.NamespacedName, r.Clock.Now())
		// Events follow the stored status: whoever reads a Recovered event and then the
		// pool sees it Ready, and a failed patch does not announce a change twice.
		r.recordEvents(before, pool)
	}
	if next := st.floor.Next; !next.IsZero() {
		// The floor changes at the next window edge, or as the prediction moves, with no
		// event to say so.
		if wait := max(next.Sub(r.Clock.Now()), 10*time.Millisecond); res.RequeueAfter == 0 || res.RequeueAfter > wait {
			res.RequeueAfter = wait
		}
	}
	if (st.configErr != nil || st.unavailable != nil) && (res.RequeueAfter == 0 || res.RequeueAfter > configRecheck) {
		// Credentials Secrets are not watched and GitHub's answer is kept a while: look
		// again, so that a Secret created or fixed, an App installed again or GitHub
		// back makes the pool Ready even while no job asks for a runner.
		res.RequeueAfter = configRecheck
	}
	if apierrors.IsConflict(credErr) && (res.RequeueAfter == 0 || res.RequeueAfter > credentialsRetry) {
		res.RequeueAfter = credentialsRetry
	}
	return res, scaleErr
}

// credentialsRetry is how soon holding the credentials Secret is tried again after a
// write conflict.
const credentialsRetry = time.Second

// configRecheck is how often a pool whose configuration is broken is checked again.
const configRecheck = 30 * time.Second

// checkConfig says what the pool's owner must fix before runners can be created
// (configErr: a *controller.ConfigError, or the stored pool's own InvalidSpec error), or
// that access could not be checked right now (unavailable: the Secret unreadable, GitHub
// not answering — runners are still created). GitHub's answer comes from
// GitHubResolver.Check, cached per credentials and scope.
func (r *Reconciler) checkConfig(ctx context.Context, pool *v1alpha1.RunnerPool) (configErr, unavailable error) {
	if err := storedSpecError(pool); err != nil {
		if c := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.ConditionDegraded); c == nil || c.Reason != v1alpha1.ReasonInvalidSpec {
			log.FromContext(ctx).Info("Pool cannot be used as stored; it creates no runners until it is fixed", "message", err.Error())
		}
		return err, nil
	}
	err := r.GitHub.Check(ctx, pool)
	var down *controller.UnavailableError
	if errors.As(err, &down) {
		return nil, err
	}
	return err, nil
}

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

// snapshot asks the Tracker, once, what it knows of the pool and which of its runners
// run a job.
func (r *Reconciler) snapshot(key types.NamespacedName, runners []v1alpha1.Runner) demand.PoolSnapshot {
	return r.Tracker.Snapshot(key, func(yield func(string) bool) {
		for i := range runners {
			if !yield(runners[i].Name) {
				return
			}
		}
	})
}

// route tells the Router where this pool takes jobs from, and reroutes queued jobs when
// that changed.
func (r *Reconciler) route(pool *v1alpha1.RunnerPool) {
	p, err := RouterPool(pool)
	if err != nil {
		return
	}
	r.routedMu.Lock()
	if r.routed == nil {
		r.routed = map[types.NamespacedName]demand.Pool{}
	}
	old, had := r.routed[p.Key]
	same := had && samePool(old, p)
	r.routed[p.Key] = p
	r.routedMu.Unlock()
	if !same {
		r.Tracker.Router().SetPool(p)
		r.Tracker.Reroute()
	}
}

func (r *Reconciler) unroute(key types.NamespacedName) {
	r.routedMu.Lock()
	_, had := r.routed[key]
	delete(r.routed, key)
	r.routedMu.Unlock()
	if had {
		r.Tracker.Router().RemovePool(key)
		r.Tracker.Reroute()
	}
	r.expectations.forget(key)
}

func samePool(a, b demand.Pool) bool {
	if a.Kind != b.Kind || a.Host != b.Host || a.Owner != b.Owner || a.Repo != b.Repo || a.Enterprise != b.Enterprise || len(a.Labels) != len(b.Labels) {
		return false
	}
	for i := range a.Labels {
		if a.Labels[i] != b.Labels[i] {
			return false
		}
	}
	return true
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
	// Every runner is unregistered: the scale set can go, then the credentials are no
	// longer needed for this pool.
	if res, done := r.removeScaleSet(ctx, pool); !done {
		return res, nil
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
		Owner: sc.Owner, Repo: sc.Repo, Enterprise: sc.Enterprise, Labels: pool.Spec.RunnerLabels(),
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
