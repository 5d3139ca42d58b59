package runnerpool

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
)

// observe counts the pool's runners and reads its demand from the Tracker and its
// demand source, once per pass, and computes the desired count. Contract: it never
// fails and never requeues; a pool whose stored spec is partly unknown holds the
// runners it has.
func (r *Reconciler) observe(_ context.Context, st *state) (reconcile.Result, error) {
	pool := st.pool
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	st.tracked = st.source.Runners(key, r.snapshot(key, st.runners), st.runners)
	st.held = r.holds.of(key, st.tracked.Answer)
	expected := r.expectations.pending(key, st.seenMark, st.runners, r.Clock.Now())
	if st.held != nil && expected > 0 {
		st.expecting = r.expectations.names(key)
	}
	st.count(expected)
	st.countOutdated()
	if prev := pool.Status.TemplateHash; prev != "" && prev != st.templateHash {
		// A changed template gets a fresh start: the failures were the old template's,
		// and a fixed template should not wait out their backoff.
		r.Failures.RecordSuccess(key)
	}
	st.demand, st.rebuilt = st.source.Demand(key, st.tracked, st.busy)
	st.failures = r.Failures.Get(key)
	st.desired = desired(pool.Spec, st.floor.MinIdle, st.busy, st.demand.Queued)
	if storedSpecError(pool) != nil {
		// Part of the spec is unknown: hold the runners there are, neither create nor retire.
		st.desired = st.active()
	}
	st.recent = recentRepositories(pool.Status.RecentRepositories, st.tracked.Repos, r.Clock.Now())
	return reconcile.Result{}, nil
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
