package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// RunnerBirths remembers, by UID, the Runners this process created, until the Runner
// reconciler has registered them. Only the leader creates and registers runners, and a
// process that loses leadership exits, so no other process can have registered a Runner
// this one created: its Secret cannot exist unless this process wrote it. The Runner
// reconciler uses that to skip the uncached Secret lookup before registering. The zero
// value is ready to use; a nil *RunnerBirths remembers nothing.
type RunnerBirths struct {
	m sync.Map
}

// Born records a Runner this process created.
func (b *RunnerBirths) Born(uid types.UID) {
	if b != nil && uid != "" {
		b.m.Store(uid, struct{}{})
	}
}

// Ours reports whether this process created the Runner.
func (b *RunnerBirths) Ours(uid types.UID) bool {
	if b == nil {
		return false
	}
	_, ok := b.m.Load(uid)
	return ok
}

// Forget lets the Runner go: it is registered, or being deleted.
func (b *RunnerBirths) Forget(uid types.UID) {
	if b != nil {
		b.m.Delete(uid)
	}
}
