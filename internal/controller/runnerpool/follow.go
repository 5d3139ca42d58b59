package runnerpool

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/demand"
)

// follow checks the pool's configuration, computes the idle floor in force and tells the
// Router and the pool's demand source to follow the pool — or to let it go while its
// configuration is broken. Contract: it requeues at the floor's next change, and, while
// the configuration is broken or could not be checked, after configRecheck (credentials
// Secrets are not watched and GitHub's answer is kept a while: a Secret created or fixed,
// an App installed again or GitHub back makes the pool Ready even while no job asks for
// a runner).
func (r *Reconciler) follow(ctx context.Context, st *state) (reconcile.Result, error) {
	pool := st.pool
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	st.configErr, st.unavailable = r.checkConfig(ctx, pool)
	if st.configErr == nil {
		st.configErr = r.ensureContainerMode(ctx, pool) // containermode.go
	}
	now := r.Clock.Now()
	st.floor = r.computeWarmFloor(pool, now)
	if st.configErr == nil {
		r.route(pool)
		st.source.Follow(pool, int32(st.floor.MinIdle))
	} else {
		r.unroute(key)
		st.source.Forget(key)
	}
	var res reconcile.Result
	if next := st.floor.Next; !next.IsZero() {
		// The floor changes at the next window edge, or as the prediction moves, with no
		// event to say so.
		res.RequeueAfter = max(next.Sub(now), 10*time.Millisecond)
	}
	if st.configErr != nil || st.unavailable != nil {
		res = controller.LowestNonZeroResult(res, reconcile.Result{RequeueAfter: configRecheck})
	}
	return res, nil
}

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
