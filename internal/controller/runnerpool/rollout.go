package runnerpool

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// isOutdated reports whether a runner's pod was made from another template than hash.
// A runner with no recorded hash (no pod yet, or made before hashes were recorded) is
// not: a pod made now follows the current template.
func isOutdated(rn *v1alpha1.Runner, hash string) bool {
	return rn.Status.TemplateHash != "" && rn.Status.TemplateHash != hash
}

// countOutdated counts the runners, busy ones included, whose pod was made from an older
// template; failed runners and runners on their way out are not counted.
func (s *state) countOutdated() {
	s.templateHash = runner.PoolTemplateHash(s.pool)
	for i := range s.runners {
		rn := &s.runners[i]
		if rn.Status.Phase == v1alpha1.RunnerFailed || rn.Status.Phase == v1alpha1.RunnerSucceeded ||
			(!rn.DeletionTimestamp.IsZero() && !isBusy(rn, s.tracked)) {
			continue
		}
		if isOutdated(rn, s.templateHash) {
			s.outdated++
		}
	}
}

// replaceOutdated retires the idle and pending runners whose pod was made from an older
// template; scale then creates their replacements from the current one. Contract: never
// a busy runner — it finishes its job on the old template and goes like any finished
// runner; nothing is retired while the pool cannot create replacements (its
// configuration is broken, or it backs off after repeated failures); a retired runner
// stops counting against maxRunners when it is deleted, as a scaled-down one does, so
// the pool never holds more than maxRunners runners that count.
func (r *Reconciler) replaceOutdated(ctx context.Context, s *state) error {
	if s.outdated == 0 || s.configBroken() || !s.failures.Until.IsZero() {
		return nil
	}
	for i := range s.runners {
		rn := &s.runners[i]
		if !rn.DeletionTimestamp.IsZero() || isBusy(rn, s.tracked) || !isOutdated(rn, s.templateHash) {
			continue
		}
		switch rn.Status.Phase {
		case v1alpha1.RunnerIdle:
			s.idle--
		case "", v1alpha1.RunnerPending:
			s.pending--
		default:
			continue
		}
		log.FromContext(ctx).V(1).Info("Replacing runner made from an older template", "runner", rn.Name, "phase", rn.Status.Phase)
		s.release(rn.Name) // replaced unused: it holds no job
		if err := r.Client.Delete(ctx, rn); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing outdated runner %s: %w", rn.Name, err)
		}
		s.outdated--
		s.replaced++
	}
	return nil
}
