package runnerpool

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// ServiceAccount, and the ServiceAccount was last written (claimed) that long ago. The
// ServiceAccount goes first, with its resourceVersion as a precondition, so a runner
// that claims the slot meanwhile keeps it (the API server refuses one of the two); then
// the namespace, with everything in it. Looks every hookSlotPruneEvery; other pools:
// nothing.
func (r *Reconciler) pruneHookSlots(ctx context.Context, st *state) (reconcile.Result, error) {
	pool := st.pool
	if !pool.Spec.ContainerMode.IsolatesRunners() {
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()
	if v, ok := hookSlotsPruned.Load(pool.UID); ok {
		if left := hookSlotPruneEvery - now.Sub(v.(time.Time)); left > 0 {
			return reconcile.Result{RequeueAfter: left}, nil
		}
	}
	var sas corev1.ServiceAccountList
	if err := r.APIReader.List(ctx, &sas, client.InNamespace(pool.Namespace), runner.HookSlotsOf(pool)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pool's container hook slots: %w", err)
	}
	hookSlotsPruned.Store(pool.UID, now)
	held := map[string]bool{}
	for _, rn := range st.runners {
		held[rn.Name] = true
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(pool.Namespace), client.MatchingLabels{v1alpha1.LabelPool: pool.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pool's pods: %w", err)
	}
	mounted := map[string]bool{}
	for _, p := range pods.Items {
		mounted[p.Spec.ServiceAccountName] = true
	}
	for i := range sas.Items {
		sa := &sas.Items[i]
		n, err := strconv.Atoi(sa.Labels[runner.LabelHookSlot])
		if err != nil || held[sa.Labels[v1alpha1.LabelRunner]] || mounted[sa.Name] || now.Sub(lastWritten(sa)) < HookSlotIdle {
			continue
		}
		err = r.Client.Delete(ctx, sa, client.Preconditions{UID: &sa.UID, ResourceVersion: &sa.ResourceVersion})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue // claimed or removed since the list
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("deleting the idle hook slot %s: %w", sa.Name, err)
		}
		ns := v1alpha1.ContainerHookSlotNamespace(pool, n)
		log.FromContext(ctx).V(1).Info("Deleted an idle container hook slot", "serviceAccount", sa.Name, "namespace", ns)
		if err := r.deleteSlotNamespace(ctx, pool, ns); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: hookSlotPruneEvery}, nil
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

// lastWritten is when an object was last written, as its managed fields say; its
// creation when they say nothing.
func lastWritten(o client.Object) time.Time {
	t := o.GetCreationTimestamp().Time
	for _, f := range o.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}
