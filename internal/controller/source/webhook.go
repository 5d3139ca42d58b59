package source

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
)

// Webhook is the webhook demand source: workflow_job webhooks (and the resync that
// repairs lost ones) feed the Tracker, which the RunnerPool controller reads; runners
// are registered (a JIT configuration, or the scope's registration token) and removed
// through GitHub's REST API.
type Webhook struct {
	GitHub *controller.GitHubResolver
}

var _ Source = (*Webhook)(nil)

// Follow: the Tracker hears of the pool's jobs once the pool is routed.
func (*Webhook) Follow(*v1alpha1.RunnerPool, int32) {}

// Forget: nothing is held per pool.
func (*Webhook) Forget(types.NamespacedName) {}

// Runners: the Tracker's word is the webhooks'.
func (*Webhook) Runners(_ types.NamespacedName, tracked demand.PoolSnapshot, _ []v1alpha1.Runner) demand.PoolSnapshot {
	return tracked
}

// Demand is the Tracker's: the pool's queued jobs; known once demand was rebuilt from
// GitHub after a start.
func (*Webhook) Demand(_ types.NamespacedName, tracked demand.PoolSnapshot, _ int) (demand.Demand, bool) {
	return tracked.Demand, tracked.Rebuilt
}

// Status: a webhook pool has no source status of its own.
func (*Webhook) Status(*v1alpha1.RunnerPool) (string, string) { return "", "" }

// Remove: nothing outlives the pool's runners.
func (*Webhook) Remove(context.Context, *v1alpha1.RunnerPool) (bool, error) { return true, nil }

// Register asks GitHub for a JIT configuration in the pool's runner group, or, with
// registrationMode RegistrationToken, for the scope's registration token (cached by the
// client until near its expiry: one call an hour for a burst of any size).
func (w *Webhook) Register(ctx context.Context, pool *v1alpha1.RunnerPool, name string) (Registration, error) {
	gh, sc, err := w.GitHub.For(ctx, pool)
	if err != nil {
		return Registration{}, err
	}
	if pool.Spec.RegistrationMode == v1alpha1.RegistrationModeRegistrationToken {
		tok, err := gh.CreateRegistrationToken(ctx, sc)
		if err != nil {
			return Registration{}, fmt.Errorf("creating a registration token: %w", err)
		}
		return Registration{Token: tok.Token}, nil
	}
	group, err := gh.RunnerGroupID(ctx, sc, pool.Spec.GitHub.RunnerGroup)
	if err != nil {
		return Registration{}, fmt.Errorf("resolving runner group %q: %w", pool.Spec.GitHub.RunnerGroup, err)
	}
	log.FromContext(ctx).V(1).Info("Registering runner with GitHub", "scope", sc.String())
	jit, err := gh.GenerateJITConfig(ctx, sc, github.JITConfigRequest{Name: name, RunnerGroupID: group, Labels: pool.RunnerLabels()})
	if err != nil {
		return Registration{}, fmt.Errorf("generating the JIT configuration: %w", err)
	}
	return Registration{JITConfig: jit.EncodedJITConfig, RunnerID: jit.Runner.ID}, nil
}

// RemoveStale removes every registration named name.
func (w *Webhook) RemoveStale(ctx context.Context, pool *v1alpha1.RunnerPool, name string) error {
	gh, sc, err := w.GitHub.For(ctx, pool)
	if err != nil {
		return err
	}
	found, err := gh.ListRunners(ctx, sc, name)
	if err != nil {
		return fmt.Errorf("finding the stale registration of %s: %w", name, err)
	}
	for _, gr := range found {
		if err := gh.DeleteRunner(ctx, sc, gr.ID); err != nil && !github.IsNotFound(err) {
			return fmt.Errorf("removing the stale registration of %s: %w", name, err)
		}
	}
	return nil
}

// Unregister deletes the runner from GitHub; a runner that registered itself with the
// pool's token (id 0) is found by name first, if it got that far.
func (w *Webhook) Unregister(ctx context.Context, pool *v1alpha1.RunnerPool, name string, id int64) error {
	gh, sc, err := w.GitHub.For(ctx, pool)
	if err != nil {
		return err
	}
	if id == 0 {
		found, err := gh.ListRunners(ctx, sc, name)
		if err != nil {
			return fmt.Errorf("looking up runner %s on GitHub: %w", name, err)
		}
		if len(found) == 0 {
			return nil
		}
		id = found[0].ID
	}
	log.FromContext(ctx).V(1).Info("Unregistering runner from GitHub", "id", id)
	if err := gh.DeleteRunner(ctx, sc, id); err != nil && !github.IsNotFound(err) {
		return fmt.Errorf("unregistering runner from GitHub: %w", err)
	}
	return nil
}
