package runnerpool

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// HookSlotIdle is how long a container hook slot (runner/hookslot.go) that no runner
// holds stays after its last claim before its pool deletes it: a burst's slots serve
// the bursts that follow, and go some minutes after the last.
const HookSlotIdle = 10 * time.Minute

// hookSlotPruneEvery is how often a pool looks for slots to delete.
const hookSlotPruneEvery = 5 * time.Minute

// hookSlotsPruned is when each pool (by UID) last looked.
var hookSlotsPruned sync.Map

// pruneHookSlots deletes the hook slots of a pool with isolation Runner that have been
// idle HookSlotIdle: no runner of the pool holds the slot, no pod of the pool has its
// ServiceAccount, and it was last claimed that long ago (or that long before this
// process loaded the pool's slots), as the claim table says (runner.HookSlots, shared
// with the Runner reconciler). The table marks them first, so no runner claims a slot
// being deleted; the ServiceAccount goes, then the namespace with everything in it.
// Looks every hookSlotPruneEvery; other pools, or no table: nothing.
func (r *Reconciler) pruneHookSlots(ctx context.Context, st *state) (reconcile.Result, error) {
	pool := st.pool
	if !pool.Spec.ContainerMode.IsolatesRunners() || r.Slots == nil {
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()
	if v, ok := hookSlotsPruned.Load(pool.UID); ok {
		if left := hookSlotPruneEvery - now.Sub(v.(time.Time)); left > 0 {
			return reconcile.Result{RequeueAfter: left}, nil
		}
	}
	live := map[string]bool{}
	for _, rn := range st.runners {
		live[rn.Name] = true
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(pool.Namespace), client.MatchingLabels{v1alpha1.LabelPool: pool.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pool's pods: %w", err)
	}
	mounted := map[string]bool{}
	for _, p := range pods.Items {
		mounted[p.Spec.ServiceAccountName] = true
	}
	idle, err := r.Slots.Prunable(ctx, r.APIReader, pool, now, HookSlotIdle, live, mounted)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading the pool's container hook slots: %w", err)
	}
	hookSlotsPruned.Store(pool.UID, now)
	for _, n := range idle {
		err := r.deleteSlot(ctx, pool, n)
		r.Slots.Pruned(pool.UID, n, err == nil)
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: hookSlotPruneEvery}, nil
}

// deleteSlot deletes slot n of pool: its ServiceAccount, then its namespace.
func (r *Reconciler) deleteSlot(ctx context.Context, pool *v1alpha1.RunnerPool, n int) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: v1alpha1.ContainerHookSlotServiceAccountName(pool.Name, n)}}
	if err := r.Client.Delete(ctx, sa); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the idle hook slot %s: %w", sa.Name, err)
	}
	ns := v1alpha1.ContainerHookSlotNamespace(pool, n)
	log.FromContext(ctx).V(1).Info("Deleting an idle container hook slot", "serviceAccount", sa.Name, "namespace", ns)
	return r.deleteSlotNamespace(ctx, pool, ns)
}

// deleteSlotNamespace deletes the hook namespace ns if it is one of pool's.
func (r *Reconciler) deleteSlotNamespace(ctx context.Context, pool *v1alpha1.RunnerPool, ns string) error {
	obj := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: ns}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !runner.IsHookSlotOf(obj, pool) || obj.DeletionTimestamp != nil {
		return nil
	}
	if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &obj.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the container hook namespace %s: %w", ns, err)
	}
	return nil
}
