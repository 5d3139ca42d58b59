package runnerpool

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// SetupWithManager registers the controller: RunnerPools, their Runners, and the
// Tracker's word that a pool's demand changed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	demandChanged := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.Tracker.SetNotify(func(key types.NamespacedName) { q.Add(reconcile.Request{NamespacedName: key}) })
		r.Tracker.SetPickupObserver(ObservePickup)
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("runnerpool").
		For(&v1alpha1.RunnerPool{}).
		Owns(&v1alpha1.Runner{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, concurrency)}).
		WatchesRawSource(demandChanged).
		Complete(r)
}
