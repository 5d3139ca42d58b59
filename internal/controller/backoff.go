package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// FailureBackoff holds back runner creation for a pool whose runners keep failing,
// instead of churning pods: after Threshold failures in a row, creation waits
// Base·2^(failures−Threshold), capped at Max. One success resets the pool.
type FailureBackoff struct {
	Clock     clock.PassiveClock
	Threshold int
	Base, Max time.Duration

	mu    sync.Mutex
	pools map[types.NamespacedName]*poolFailures
}

type poolFailures struct {
	consecutive int
	lastReason  string
	lastMessage string
	until       time.Time
}

// PoolFailures is what FailureBackoff says of a pool.
type PoolFailures struct {
	Consecutive int
	LastReason  string
	LastMessage string
	// Until is when creation may resume; zero when not backing off.
	Until time.Time
}

// RecordFailure counts one failed runner of a pool.
func (b *FailureBackoff) RecordFailure(pool types.NamespacedName, reason, message string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pools == nil {
		b.pools = map[types.NamespacedName]*poolFailures{}
	}
	pf := b.pools[pool]
	if pf == nil {
		pf = &poolFailures{}
		b.pools[pool] = pf
	}
	pf.consecutive++
	pf.lastReason, pf.lastMessage = reason, message
	if over := pf.consecutive - b.Threshold; over >= 0 {
		d := b.Base
		for i := 0; i < over && d < b.Max; i++ {
			d *= 2
		}
		d = min(d, b.Max)
		pf.until = b.Clock.Now().Add(d)
	}
}

// RecordSuccess resets a pool after one of its runners ran a job.
func (b *FailureBackoff) RecordSuccess(pool types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pools, pool)
}

// Forget drops what is known of a pool: it was deleted, and a pool created again under
// its name starts with a clean record.
func (b *FailureBackoff) Forget(pool types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pools, pool)
}

// Get returns a pool's failure state.
func (b *FailureBackoff) Get(pool types.NamespacedName) PoolFailures {
	b.mu.Lock()
	defer b.mu.Unlock()
	pf := b.pools[pool]
	if pf == nil {
		return PoolFailures{}
	}
	out := PoolFailures{Consecutive: pf.consecutive, LastReason: pf.lastReason, LastMessage: pf.lastMessage}
	if b.Clock.Now().Before(pf.until) {
		out.Until = pf.until
	}
	return out
}

// Degraded reports whether a pool has failed at least Threshold times in a row.
func (p PoolFailures) Degraded(threshold int) bool { return p.Consecutive >= threshold }
