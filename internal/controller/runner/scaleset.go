package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/actions/scaleset"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	scalesets "github.com/gantry-dev/gantry/internal/controller/scaleset"
)

// scaleSetWait is how long a runner of a scale-set pool waits for its pool's scale set
// to exist before it looks again.
const scaleSetWait = 2 * time.Second

// registerInScaleSet registers the runner in its pool's runner scale set: a JIT
// configuration from the scale set's own endpoint, so the service hands it the scale
// set's jobs. Same contract as register: at most one registration per Runner.
func (r *Reconciler) registerInScaleSet(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	id := r.ScaleSets.ScaleSetID(s.pool)
	if id == 0 {
		s.runner.Status.Message = "waiting for the pool's runner scale set to exist on GitHub (see the pool's ScaleSetSession condition)"
		return reconcile.Result{RequeueAfter: scaleSetWait}, false, nil
	}
	c, err := r.ScaleSets.Clients.For(ctx, s.pool)
	if err != nil {
		return r.waitOn(s, err)
	}
	log.FromContext(ctx).V(1).Info("Registering runner in the scale set", "scaleSetID", id)
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: s.runner.Name, WorkFolder: "_work"}, int(id))
	if scalesets.IsRunnerExists(err) {
		// Registered before. If its Secret was written after all, recover from it; if
		// not, remove that registration and register again on the next pass.
		if found, err := r.recoverRegistration(ctx, s); found || err != nil {
			return reconcile.Result{}, found, err
		}
		ref, ferr := c.GetRunnerByName(ctx, s.runner.Name)
		if ferr != nil {
			return reconcile.Result{}, false, fmt.Errorf("finding the stale registration of %s: %w", s.runner.Name, ferr)
		}
		if ref != nil {
			if rerr := c.RemoveRunner(ctx, int64(ref.ID)); rerr != nil && !scalesets.IsRunnerNotFound(rerr) {
				return reconcile.Result{}, false, fmt.Errorf("removing the stale registration of %s: %w", s.runner.Name, rerr)
			}
		}
		return reconcile.Result{RequeueAfter: time.Second}, false, nil
	}
	if err != nil {
		return reconcile.Result{}, false, fmt.Errorf("generating the scale set's JIT configuration: %w", err)
	}
	if err := r.createSecret(ctx, s, map[string][]byte{JITConfigKey: []byte(jit.EncodedJITConfig)},
		map[string]string{annotationRunnerID: strconv.Itoa(jit.Runner.ID)}); err != nil {
		return reconcile.Result{}, false, err
	}
	r.setRegistered(s, int64(jit.Runner.ID), false)
	s.runner.Status.Message = ""
	return reconcile.Result{}, true, nil
}

// unregisterFromScaleSet removes a runner of a scale-set pool through the Actions
// service. A runner running a job is kept (busy), as with the REST API.
func (r *Reconciler) unregisterFromScaleSet(ctx context.Context, runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) (reconcile.Result, error) {
	c, err := r.ScaleSets.Clients.For(ctx, pool)
	var cfg *controller.ConfigError
	if errors.As(err, &cfg) {
		r.Events.Eventf(runner, pool, corev1.EventTypeWarning, "UnregisterSkipped", "Unregister",
			"cannot unregister runner %s from the scale set: %s", runner.Name, cfg.Message)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	id := runner.Status.GitHubRunnerID
	if id == 0 {
		return reconcile.Result{}, nil // never registered
	}
	log.FromContext(ctx).V(1).Info("Removing runner from the scale set", "id", id)
	err = c.RemoveRunner(ctx, id)
	switch {
	case err == nil, scalesets.IsRunnerNotFound(err):
		return reconcile.Result{}, nil
	case scalesets.IsJobStillRunning(err):
		return r.keepBusy(ctx, runner)
	}
	return reconcile.Result{}, fmt.Errorf("removing runner from the scale set: %w", err)
}
