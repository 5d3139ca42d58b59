package runner

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// ownWrites remembers, per Runner, the last write this controller made to it that the
// informer cache may not show yet. A reconcile woken before the cache caught up — by the
// runner's new pod, by the write's own event racing another — would otherwise act on a
// Runner older than its own last write: create its pod again (AlreadyExists), complete
// and delete it again, or run its finalizer a second time against objects already gone.
// Each of those is an API request that changes nothing; in a burst they were a third
// of the controller's requests. A reconcile that finds its Runner behind returns: the
// write's watch event brings the Runner back once the cache has it.
//
// Contract: behind never holds a Runner back longer than ownWriteTTL, so a lost event
// costs at most that delay, never a stuck runner.
type ownWrites struct {
	mu sync.Mutex
	m  map[types.NamespacedName]ownWrite
}

// ownWriteTTL bounds how long a Runner can be held back waiting for the cache.
const ownWriteTTL = 30 * time.Second

type ownWrite struct {
	uid types.UID
	at  time.Time
	// staleRV is the resourceVersion the last write started from: a cached Runner still
	// at it has not seen that write.
	staleRV string
	// deleted: a delete was sent; a cached Runner without a deletionTimestamp is behind.
	deleted bool
	// finalized: the finalizer was removed, so the Runner is gone whatever the cache says.
	finalized bool
}

func runnerKey(rn *v1alpha1.Runner) types.NamespacedName {
	return types.NamespacedName{Namespace: rn.Namespace, Name: rn.Name}
}

// update applies change to rn's entry, starting a new one for a new UID.
func (o *ownWrites) update(rn *v1alpha1.Runner, now time.Time, change func(*ownWrite)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[types.NamespacedName]ownWrite{}
	}
	k := runnerKey(rn)
	e := o.m[k]
	if e.uid != rn.UID {
		e = ownWrite{uid: rn.UID}
	}
	e.at = now
	change(&e)
	o.m[k] = e
}

// wrote records a write to rn that started from resourceVersion from.
func (o *ownWrites) wrote(rn *v1alpha1.Runner, from string, now time.Time) {
	o.update(rn, now, func(e *ownWrite) { e.staleRV = from })
}

// deleted records a delete of rn.
func (o *ownWrites) deleted(rn *v1alpha1.Runner, now time.Time) {
	o.update(rn, now, func(e *ownWrite) { e.deleted = true })
}

// finalized records that rn's finalizer was removed.
func (o *ownWrites) finalized(rn *v1alpha1.Runner, now time.Time) {
	o.update(rn, now, func(e *ownWrite) { e.finalized = true })
}

// behind reports whether the cached rn is older than the last write recorded for it.
func (o *ownWrites) behind(rn *v1alpha1.Runner, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := runnerKey(rn)
	e, ok := o.m[k]
	switch {
	case !ok:
		return false
	case e.uid != rn.UID || now.Sub(e.at) > ownWriteTTL:
		delete(o.m, k)
		return false
	case e.finalized,
		e.deleted && rn.DeletionTimestamp.IsZero(),
		e.staleRV != "" && e.staleRV == rn.ResourceVersion:
		return true
	}
	// The cache has the last write: nothing to wait for until the next one.
	e.staleRV = ""
	o.m[k] = e
	return false
}

// forget drops the entry of a Runner that is gone.
func (o *ownWrites) forget(k types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, k)
}
