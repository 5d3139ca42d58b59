package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// RunnerBirths remembers, by namespace and name, the Runners this process created, until
// their stored status shows their registration. A birth is recorded before the create is
// sent: the Runner's watch event can reach the Runner reconciler before the create's
// answer reaches the pool's. Only the leader creates and registers runners, and a
// process that loses leadership exits, so no other process can have registered a Runner
// this one created: its Secret cannot exist unless this process wrote it. The Runner
// reconciler uses that to skip the uncached Secret lookup before registering. The zero
// value is ready to use; a nil *RunnerBirths remembers nothing.
type RunnerBirths struct {
	m sync.Map
}

// Born records a Runner this process is creating.
func (b *RunnerBirths) Born(key types.NamespacedName) {
	if b != nil {
		b.m.Store(key, struct{}{})
	}
}

// Ours reports whether this process created the Runner.
func (b *RunnerBirths) Ours(key types.NamespacedName) bool {
	if b == nil {
		return false
	}
	_, ok := b.m.Load(key)
	return ok
}

// Forget lets the Runner go: its create failed, its status shows its registration, or
// it is gone.
func (b *RunnerBirths) Forget(key types.NamespacedName) {
	if b != nil {
		b.m.Delete(key)
	}
}
