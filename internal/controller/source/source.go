// Package source is the seam between a RunnerPool and where its demand comes from: a
// pool chooses its demand source once (spec.demand.source), and the RunnerPool and
// Runner controllers talk to it only through Source, never branching on the kind.
//
//	source.go   the interface, the typed wait, the choice (Sources.For)
//	webhook.go  Webhook: workflow_job webhooks and resync feed the Tracker; runners
//	            registered and removed through GitHub's REST API
//
// The scale-set source (internal/controller/scaleset.Source) long-polls a runner scale
// set on GitHub's Actions service and registers and removes runners there.
package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
)

// Source is one kind of demand source: how a pool's demand arrives, and how its runners
// are registered and removed. Implementations are safe for concurrent use.
//
// Errors of Register, RemoveStale and Unregister are typed: *controller.ConfigError (the
// pool's owner must fix something), *WaitError (not ready yet: look again later), and
// github's NotFound, AlreadyExists, Busy and RateLimited (github.IsBusy …), whatever
// service answered.
type Source interface {
	// Follow starts or keeps following the demand of a usable pool; floor is the idle
	// floor in force (spec.minIdle as raised by spec.warm). Idempotent.
	Follow(pool *v1alpha1.RunnerPool, floor int32)
	// Forget stops following a pool that is gone or cannot be used. Idempotent.
	Forget(key types.NamespacedName)
	// Runners is tracked, the Tracker's word on which of the pool's runners run a job and
	// which finished one, with the source's own word added where it has one, as of the
	// demand Demand reads: a pass counts its runners and its demand from one moment.
	Runners(key types.NamespacedName, tracked demand.PoolSnapshot, runners []v1alpha1.Runner) demand.PoolSnapshot
	// Demand is the pool's demand: tracked is the Tracker's snapshot of the pool, busy the
	// pool's busy runners. known is false while the source cannot tell yet (after a
	// restart, before the service answered): nothing is retired then.
	Demand(key types.NamespacedName, tracked demand.PoolSnapshot, busy int) (d demand.Demand, known bool)
	// Status writes the source's own part of the pool's status (status.scaleSet and the
	// ScaleSetSession condition) and returns a reason and message that keep the pool from
	// being Ready ("" when none).
	Status(pool *v1alpha1.RunnerPool) (notReadyReason, message string)
	// Remove is the last step of draining a deleted pool, once its runners are gone.
	// done is false while it has yet to succeed.
	Remove(ctx context.Context, pool *v1alpha1.RunnerPool) (done bool, err error)

	// Register registers one runner named name and returns what its pod needs. Not
	// idempotent: a second call for the same name is github AlreadyExists.
	Register(ctx context.Context, pool *v1alpha1.RunnerPool, name string) (Registration, error)
	// RemoveStale removes a registration named name whose configuration was lost (its
	// Secret never written), so that the runner can register again.
	RemoveStale(ctx context.Context, pool *v1alpha1.RunnerPool, name string) error
	// Unregister removes the runner (id, or found by name when 0). A runner already gone
	// is done (nil); one running a job is github Busy.
	Unregister(ctx context.Context, pool *v1alpha1.RunnerPool, name string, id int64) error
}

// Registration is what a runner's pod needs: a JIT configuration, or the pool's shared
// registration token (registrationMode RegistrationToken, RunnerID 0: the runner
// registers itself).
type Registration struct {
	JITConfig string
	Token     string
	RunnerID  int64
}

// WaitError says the source is not ready for the call yet, why, and when to look again.
type WaitError struct {
	Message string
	After   time.Duration
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("%s (looking again in %v)", e.Message, e.After)
}

// NewWaitError returns a *WaitError.
func NewWaitError(msg string, after time.Duration) error {
	return &WaitError{Message: msg, After: after}
}

// AsWait returns the *WaitError in err's chain, or nil.
func AsWait(err error) *WaitError {
	var w *WaitError
	if errors.As(err, &w) {
		return w
	}
	return nil
}

// Sources holds one Source of each kind and chooses a pool's: the one place the choice
// is made.
type Sources struct {
	Webhook  Source
	ScaleSet Source
}

// For returns the pool's demand source.
func (s *Sources) For(pool *v1alpha1.RunnerPool) Source {
	if pool.UsesScaleSet() {
		return s.ScaleSet
	}
	return s.Webhook
}

// Forget tells every source that the pool is gone: its kind is no longer known.
func (s *Sources) Forget(key types.NamespacedName) {
	for _, src := range []Source{s.Webhook, s.ScaleSet} {
		if src != nil {
			src.Forget(key)
		}
	}
}

// SetNotify wires the sources that wake a pool on their own (a scale set's statistics
// moved) to f.
func (s *Sources) SetNotify(f func(types.NamespacedName)) {
	for _, src := range []Source{s.Webhook, s.ScaleSet} {
		if n, ok := src.(interface {
			SetNotify(func(types.NamespacedName))
		}); ok {
			n.SetNotify(f)
		}
	}
}
