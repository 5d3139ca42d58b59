package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// reapLinger is how long a batch of exited runners waits for more before its pods and
// Secrets are deleted, and reapBatch the most runners one batch takes: a burst's
// runners end tens a second, so a batch holds many of them, and a runner's finalizer
// waits at most reapLinger longer than it would for its own two deletes.
const (
	reapLinger = 100 * time.Millisecond
	reapBatch  = 100
	// reapTimeout bounds a batch's requests; its runners' reconciles fail and retry.
	reapTimeout = 30 * time.Second
)

// exitedReaper deletes the pods and Secrets of runners that exited 0, many runners a
// request: per batch one deletecollection of pods and one of Secrets, selected by the
// runners' names (LabelRunner) among Gantry's objects. Left to the garbage collector,
// each would cost a delete request of its own at kube-controller-manager's 20 requests
// a second — eight minutes for a 5,000-job burst, the pods and Secrets lingering
// meanwhile. An exited pod is removed at once (its phase is terminal), so the batch is
// done when its requests are answered. Its zero value is ready; batches are per
// namespace.
type exitedReaper struct {
	mu      sync.Mutex
	pending map[string]*reapBatchState
}

type reapBatchState struct {
	names   []string
	flushed bool
	done    chan struct{}
	err     error
}

// reap deletes runner name's pod and Secret in namespace ns with the other runners of
// its batch, and returns once they are deleted (or the deletes failed, or ctx ended).
func (e *exitedReaper) reap(ctx context.Context, c ctrl.Writer, clk clock.Clock, ns, name string) error {
	e.mu.Lock()
	if e.pending == nil {
		e.pending = map[string]*reapBatchState{}
	}
	b := e.pending[ns]
	if b == nil {
		b = &reapBatchState{done: make(chan struct{})}
		e.pending[ns] = b
		t := clk.NewTimer(reapLinger)
		go func() { <-t.C(); e.flush(c, ns, b) }()
	}
	b.names = append(b.names, name)
	full := len(b.names) >= reapBatch
	e.mu.Unlock()
	if full {
		e.flush(c, ns, b)
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush deletes batch b's pods and Secrets, once.
func (e *exitedReaper) flush(c ctrl.Writer, ns string, b *reapBatchState) {
	e.mu.Lock()
	if b.flushed {
		e.mu.Unlock()
		return
	}
	b.flushed = true
	if e.pending[ns] == b {
		delete(e.pending, ns)
	}
	names := b.names
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), reapTimeout)
	defer cancel()
	b.err = deleteRunnerObjects(ctx, c, ns, names)
	close(b.done)
}

// deleteRunnerObjects deletes the pods and Secrets of Gantry's runners names in ns,
// with one request for each kind.
func deleteRunnerObjects(ctx context.Context, c ctrl.Writer, ns string, names []string) error {
	ofRunners, err := labels.NewRequirement(v1alpha1.LabelRunner, selection.In, names)
	if err != nil {
		return fmt.Errorf("selecting exited runners' objects: %w", err)
	}
	managed, err := labels.NewRequirement(v1alpha1.LabelManagedBy, selection.Equals, []string{v1alpha1.ManagedByValue})
	if err != nil {
		return err
	}
	sel := ctrl.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*managed, *ofRunners)}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, ctrl.InNamespace(ns), sel); err != nil {
		return fmt.Errorf("deleting exited runners' pods: %w", err)
	}
	if err := c.DeleteAllOf(ctx, &corev1.Secret{}, ctrl.InNamespace(ns), sel); err != nil {
		return fmt.Errorf("deleting exited runners' Secrets: %w", err)
	}
	return nil
}
