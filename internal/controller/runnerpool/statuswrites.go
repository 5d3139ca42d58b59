package runnerpool

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
)

// statusInterval is the least time between two status writes of a pool whose status
// changed only in its counts. During a burst a pool is reconciled for every runner
// that moves; writing each count would cost the API server a write each time and tell
// nobody anything a second-old count does not. A change of Ready, Degraded or
// ScaleSetSession, of the observed generation or of the scale set's session is written
// at once.
const statusInterval = time.Second

// statusWrites remembers when each pool's status was last written.
type statusWrites struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// defer reports how long the write of after's status should wait, or 0 to write now.
func (w *statusWrites) wait(key types.NamespacedName, before, after *v1alpha1.RunnerPool, now time.Time) time.Duration {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return 0 // nothing to write: the caller sends no patch
	}
	if !onlyCountsChanged(&before.Status, &after.Status) {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[key]
	if !ok {
		return 0
	}
	if left := statusInterval - now.Sub(last); left > 0 {
		return left
	}
	return 0
}

func (w *statusWrites) wrote(key types.NamespacedName, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[types.NamespacedName]time.Time{}
	}
	w.last[key] = now
}

func (w *statusWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}

// onlyCountsChanged reports whether a and b differ only in what moves with every runner:
// the counts, the statistics and the timestamps of the scale set, the conditions'
// messages (which quote counts) and ScalingUp and ScalingDown, which follow the counts —
// not in the status or reason of Ready, Degraded or ScaleSetSession, the observed
// generation, the template hash, the idle floor in force, the platform or the scale set's session
// (state and id).
func onlyCountsChanged(a, b *v1alpha1.RunnerPoolStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.TemplateHash != b.TemplateHash || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		ca, cb := a.Conditions[i], b.Conditions[i]
		if ca.Type != cb.Type {
			return false
		}
		if ca.Type == v1alpha1.ConditionScalingUp || ca.Type == v1alpha1.ConditionScalingDown {
			continue // they turn with the counts, many times a second during a burst
		}
		if ca.Status != cb.Status || ca.Reason != cb.Reason {
			return false
		}
	}
	if (a.Warm == nil) != (b.Warm == nil) {
		return false
	}
	if a.Warm != nil && (a.Warm.MinIdle != b.Warm.MinIdle || a.Warm.Source != b.Warm.Source || a.Warm.Schedule != b.Warm.Schedule) {
		return false
	}
	if !equality.Semantic.DeepEqual(a.Platform, b.Platform) {
		return false // the labels runners are made with follow it
	}
	if (a.ScaleSet == nil) != (b.ScaleSet == nil) {
		return false
	}
	if a.ScaleSet != nil && (a.ScaleSet.ID != b.ScaleSet.ID || a.ScaleSet.Session != b.ScaleSet.Session ||
		a.ScaleSet.SessionID != b.ScaleSet.SessionID) { // a successor must find the session id at once
		return false
	}
	return true
}

// writeStatus computes the pool's status from the pass's state (its demand source's
// part, counts, conditions), records the metrics and writes the status once. Contract: an
// unchanged status is not sent (an empty patch still costs the API server a request,
// once for every runner that moves); a change of counts only, less than statusInterval
// after the last write, waits for it (requeue); events follow the stored status.
func (r *Reconciler) writeStatus(ctx context.Context, st *state) (reconcile.Result, error) {
	pool, before := st.pool, st.before
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	st.sourceReason, st.sourceMessage = st.source.Status(pool)
	setStatus(st, r.Clock.Now(), r.FailureThreshold)
	recordMetrics(st)
	if wait := r.statusWrites.wait(key, before, pool, r.Clock.Now()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if equality.Semantic.DeepEqual(before.Status, pool.Status) {
		return reconcile.Result{}, nil
	}
	patch, err := controller.StatusPatch(before.Status, pool.Status)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Client.Status().Patch(ctx, pool, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.statusWrites.wrote(key, r.Clock.Now())
	// Events follow the stored status: whoever reads a Recovered event and then the
	// pool sees it Ready, and a failed patch does not announce a change twice.
	r.recordEvents(before, pool)
	return reconcile.Result{}, nil
}
