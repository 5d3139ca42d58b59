package runnerpool

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
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
// at once — except the session on its way (sessionSettle).
const statusInterval = time.Second

// countWritesPerSecond is the budget of status writes of counts across all the
// controller's pools: one pool's counts are written every statusInterval as they move,
// two pools' too, but more pools whose counts move together take turns. Each pool of a
// burst spread over many pools otherwise writes its counts every second while its jobs
// run, and the writes per job of the whole burst grow with the number of pools it
// touches: 50 pools of 10 jobs each wrote half a status per job at 5 a second, where
// their runners' own writes are about six (`gantry sim run --scenario fleet`). Within
// the budget the fleet's count writes follow time, not the number of pools scaling:
// with 50 pools scaling at once each shows counts up to 25 s old, with 200 up to 100 s.
// Conditions, the session and the platform are written at once, and the metrics
// (gantry_runnerpool_*) follow every pass.
const countWritesPerSecond = 2

// sessionSettle is how long a scale-set pool's status may wait for its session to open
// when all that changed besides the counts is that the session is on its way
// (Connecting, the session id it closed cleared) or, on the pool's first write, that
// the pool was taken up while its session connects. A controller that starts or
// restarts opens every pool's session within a few seconds: written at once, each pool
// would write "Connecting" and then "Active" — two writes per pool and start, 400 for
// 200 pools — where one says it all. A session that fails (Error, Conflict) or opens
// (a new session id, which a successor must find) is written at once; one still
// connecting after sessionSettle is written as it is.
const sessionSettle = 10 * time.Second

// statusWrites remembers when each pool's status was last written, since when a change
// waiting for its session (sessionSettle) has waited, and each pool's turn in the budget
// of count writes (countWritesPerSecond): a pool keeps the turn it took until it writes,
// so pools waiting for the budget write in the order they asked.
type statusWrites struct {
	mu       sync.Mutex
	last     map[types.NamespacedName]time.Time
	settling map[types.NamespacedName]time.Time
	turns    map[types.NamespacedName]*rate.Reservation
	budget   *rate.Limiter
	written  map[types.NamespacedName]writtenStatus
}

// writtenStatus is a pool as this controller's last status write returned it.
type writtenStatus struct {
	pool *v1alpha1.RunnerPool
}

// remember keeps pool, as its status write returned it.
func (w *statusWrites) remember(key types.NamespacedName, pool *v1alpha1.RunnerPool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written == nil {
		w.written = map[types.NamespacedName]writtenStatus{}
	}
	w.written[key] = writtenStatus{pool: pool.DeepCopy()}
}

// newest is the newest version of the pool this controller knows: cached, or, when
// the cache does not show this controller's last status write yet (an older
// resourceVersion: they are comparable, apimachinery's CompareResourceVersion), the
// pool as that write returned it. A pool is reconciled again as soon as its session
// opens, its statistics come and its runners move, often before the cache has the
// status written a moment ago: read from the cache, such a pass chose the platform
// again and wrote the same status again (two or three times per pool at start in
// `gantry sim run --scenario idle-scalesets`).
func (w *statusWrites) newest(key types.NamespacedName, cached *v1alpha1.RunnerPool) *v1alpha1.RunnerPool {
	w.mu.Lock()
	defer w.mu.Unlock()
	wr, ok := w.written[key]
	if !ok {
		return cached
	}
	if c, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, wr.pool.ResourceVersion); err != nil || c >= 0 {
		delete(w.written, key) // the cache has it (or a later version): not needed any more
		return cached
	}
	return wr.pool.DeepCopy()
}

// wait reports how long the write of after's status should wait, or 0 to write now.
func (w *statusWrites) wait(key types.NamespacedName, before, after *v1alpha1.RunnerPool, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		delete(w.settling, key)
		w.giveBackTurn(key, now)
		return 0 // nothing to write: the caller sends no patch
	}
	switch statusChangeOf(&before.Status, &after.Status) {
	case changeNow:
		return 0
	case changeSettling:
		since, ok := w.settling[key]
		if !ok {
			if w.settling == nil {
				w.settling = map[types.NamespacedName]time.Time{}
			}
			since = now
			w.settling[key] = now
		}
		return max(0, sessionSettle-now.Sub(since))
	}
	if last, ok := w.last[key]; ok {
		if left := statusInterval - now.Sub(last); left > 0 {
			return left
		}
	}
	turn := w.turns[key]
	if turn == nil {
		if w.budget == nil {
			w.budget = rate.NewLimiter(countWritesPerSecond, countWritesPerSecond)
			w.turns = map[types.NamespacedName]*rate.Reservation{}
		}
		turn = w.budget.ReserveN(now, 1)
		w.turns[key] = turn
	}
	return turn.DelayFrom(now)
}

// giveBackTurn returns a pool's turn it did not use for counts to the budget, as far as
// the turns taken after it allow (rate.Reservation.CancelAt).
func (w *statusWrites) giveBackTurn(key types.NamespacedName, now time.Time) {
	if turn := w.turns[key]; turn != nil {
		turn.CancelAt(now) // only a turn still ahead is given back
		delete(w.turns, key)
	}
}

func (w *statusWrites) wrote(key types.NamespacedName, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[types.NamespacedName]time.Time{}
	}
	w.last[key] = now
	delete(w.settling, key)
	w.giveBackTurn(key, now) // a write at once carried the counts too
}

func (w *statusWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
	delete(w.settling, key)
	delete(w.turns, key) // a turn ahead lapses unused
	delete(w.written, key)
}

// statusChange is how soon a change of a pool's status is written.
type statusChange int

const (
	// changeCounts: only what moves with every runner changed; written at most once per
	// statusInterval.
	changeCounts statusChange = iota
	// changeSettling: besides the counts, only a scale-set session on its way; written
	// once it opens, or after sessionSettle.
	changeSettling
	// changeNow: written at once.
	changeNow
)

// statusChangeOf says how soon the change from a to b is written. Counts are what moves
// with every runner: the counts, the statistics and the timestamps of the scale set,
// the conditions' messages (which quote counts) and ScalingUp and ScalingDown, which
// follow the counts. Written at once: the status or reason of Ready or Degraded, the
// observed generation, the template hash, the idle floor in force, the platform, the
// scale set's id, and its session (state, id, and the ScaleSetSession condition) unless
// the session is only on its way (connecting, or the id of a session it closed
// cleared), which settles. A pool's first status (a has no observed generation) written
// while its session connects settles too.
func statusChangeOf(a, b *v1alpha1.RunnerPoolStatus) statusChange {
	connecting := b.ScaleSet != nil && b.ScaleSet.Session == v1alpha1.SessionConnecting
	if a.ObservedGeneration == 0 && b.ObservedGeneration != 0 {
		if connecting {
			return changeSettling
		}
		return changeNow
	}
	if a.ObservedGeneration != b.ObservedGeneration || a.TemplateHash != b.TemplateHash || len(a.Conditions) != len(b.Conditions) {
		return changeNow
	}
	settling := false
	for i := range a.Conditions {
		ca, cb := a.Conditions[i], b.Conditions[i]
		switch {
		case ca.Type != cb.Type:
			return changeNow
		case ca.Type == v1alpha1.ConditionScalingUp || ca.Type == v1alpha1.ConditionScalingDown:
			continue // they turn with the counts, many times a second during a burst
		case ca.Status == cb.Status && ca.Reason == cb.Reason:
			continue
		case ca.Type == v1alpha1.ConditionScaleSetSession && connecting:
			settling = true
		default:
			return changeNow
		}
	}
	if (a.Warm == nil) != (b.Warm == nil) {
		return changeNow
	}
	if a.Warm != nil && (a.Warm.MinIdle != b.Warm.MinIdle || a.Warm.Source != b.Warm.Source || a.Warm.Schedule != b.Warm.Schedule) {
		return changeNow
	}
	if !equality.Semantic.DeepEqual(a.Platform, b.Platform) {
		return changeNow // the labels runners are made with follow it
	}
	if (a.ScaleSet == nil) != (b.ScaleSet == nil) {
		return changeNow
	}
	if sa, sb := a.ScaleSet, b.ScaleSet; sa != nil {
		if sa.ID != sb.ID {
			return changeNow
		}
		if sa.Session != sb.Session {
			if !connecting {
				return changeNow
			}
			settling = true
		}
		if sa.SessionID != sb.SessionID {
			if sb.SessionID != "" {
				return changeNow // a successor must find the session id at once
			}
			settling = true // the session it names is closed
		}
	}
	if settling {
		return changeSettling
	}
	return changeCounts
}

// writeStatus computes the pool's status from the pass's state (its demand source's
// part, counts, conditions), records the metrics and writes the status once. Contract: an
// unchanged status is not sent (an empty patch still costs the API server a request,
// once for every runner that moves), nor is one that differs only in what its JSON
// does not carry (a time's fraction of a second: the stored status has none); a change
// of counts only, less than statusInterval after the last write, waits for it
// (requeue), and takes its turn in the fleet's budget, and one that waits for the
// session waits up to sessionSettle (wait); events follow the stored status.
func (r *Reconciler) writeStatus(ctx context.Context, st *state) (reconcile.Result, error) {
	pool := st.pool
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	before := st.before
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
	if controller.IsEmptyStatusPatch(patch) {
		return reconcile.Result{}, nil
	}
	if err := r.Client.Status().Patch(ctx, pool, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.statusWrites.wrote(key, r.Clock.Now())
	r.statusWrites.remember(key, pool)
	// Events follow the stored status: whoever reads a Recovered event and then the
	// pool sees it Ready, and a failed patch does not announce a change twice.
	r.recordEvents(before, pool)
	if st.platformChanged {
		// The runners held back for the platform can be made now that it is stored.
		return reconcile.Result{RequeueAfter: platformStored}, nil
	}
	return reconcile.Result{}, nil
}

// platformStored is how soon a pool whose platform changed is reconciled again once
// the status that records it is written.
const platformStored = 10 * time.Millisecond
