package runnerpool

import (
	"context"
	"fmt"
	"sync"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// The pool's PodDisruptionBudget: what keeps voluntary disruptions — a drain through
// the eviction API (kubectl drain, node upgrades), cluster-autoscaler's scale-down,
// Karpenter's consolidation, drift and expiry — from killing a runner's job. It
// selects every runner pod of the pool and allows no eviction of a Ready one:
//
//   - minAvailable is an integer, budgetMinAvailable, above any pool's runner count
//     (maxRunners is at most 100,000), so disruptionsAllowed is always 0. The
//     disruption controller can count an integer minAvailable for any pods; a
//     percentage or maxUnavailable needs the pods' owner to have a scale subresource,
//     which a Runner has not (kube-controller-manager's disruption controller,
//     getExpectedPodCount).
//   - unhealthyPodEvictionPolicy AlwaysAllow lets a pod that is not Ready (starting)
//     be evicted at once; a Pending one, and one that ended, the eviction API lets go
//     whatever the budget says.
//
// So a drain waits only on Ready runner pods, and the Runner controller
// (runner/drain.go) retires the idle ones of a node being emptied itself — removed from
// GitHub first, so that a runner that just took a job is never killed — leaving the
// drain to wait on busy runners alone, each for at most disruption.drainTimeout.
// cluster-autoscaler and Karpenter do not pick a node whose pods a budget blocks: a
// node holding runner pods is consolidated once they are gone.
//
// Cost: one server-side apply per pool per controller process (the first reconcile),
// no write per runner or job. Only where the controller reads nodes: on a namespaced
// install nothing would retire idle runners from a node being drained, and a drain
// would wait on them.

// budgetMinAvailable is the budget's minAvailable: more runner pods than a pool can
// have (spec.maxRunners is at most 100,000).
const budgetMinAvailable = 100001

// budgetApplied remembers the pools whose budget this process applied: by namespace and
// name, the pool's UID.
type budgetApplied struct{ m sync.Map }

func (b *budgetApplied) done(pool *v1alpha1.RunnerPool) bool {
	uid, ok := b.m.Load(types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name})
	return ok && uid == pool.UID
}

func (b *budgetApplied) forget(key types.NamespacedName) { b.m.Delete(key) }

// BudgetName is the name of a pool's PodDisruptionBudget.
func BudgetName(pool string) string { return "gantry-runners-" + pool }

// disruptionBudget is the phase that applies the pool's PodDisruptionBudget once.
// Contract: the budget exists (owned by the pool, gone with it) before the pool's
// runners could meet a drain; applied once per pool per process; an error is logged
// and tried again with the next reconcile, never blocking the pool.
func (r *Reconciler) disruptionBudget(ctx context.Context, st *state) (reconcile.Result, error) {
	pool := st.pool
	if !r.Nodes.Enabled() {
		return reconcile.Result{}, nil
	}
	if r.budgets.done(pool) {
		return reconcile.Result{}, nil
	}
	log.FromContext(ctx).V(1).Info("Applying the pool's PodDisruptionBudget", "name", BudgetName(pool.Name))
	if err := r.Client.Apply(ctx, budgetFor(pool), client.FieldOwner(fieldManager)); err != nil {
		log.FromContext(ctx).Info("Applying the pool's PodDisruptionBudget failed; retrying with the next reconcile", "reason", err.Error())
		return reconcile.Result{}, nil
	}
	r.budgets.m.Store(types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}, pool.UID)
	return reconcile.Result{}, nil
}

// budgetFor is the pool's PodDisruptionBudget as Gantry applies it.
func budgetFor(pool *v1alpha1.RunnerPool) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	owner := metav1ac.OwnerReference().WithAPIVersion(v1alpha1.GroupVersion.String()).WithKind("RunnerPool").
		WithName(pool.Name).WithUID(pool.UID).WithController(true).WithBlockOwnerDeletion(true)
	selector := metav1ac.LabelSelector().
		WithMatchLabels(map[string]string{v1alpha1.LabelPool: pool.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}).
		WithMatchExpressions(metav1ac.LabelSelectorRequirement().WithKey(v1alpha1.LabelRunner).WithOperator("Exists"))
	return policyv1ac.PodDisruptionBudget(BudgetName(pool.Name), pool.Namespace).
		WithLabels(map[string]string{v1alpha1.LabelPool: pool.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}).
		WithAnnotations(map[string]string{"gantry.dev/why": fmt.Sprintf(
			"runner pods of pool %s: no eviction of a Ready one, so a drain never kills a job; idle runners leave a node being emptied by themselves, busy ones within spec.disruption.drainTimeout", pool.Name)}).
		WithOwnerReferences(owner).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMinAvailable(intstr.FromInt32(budgetMinAvailable)).
			WithSelector(selector).
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow))
}
