package runnerpool

import (
	"context"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	gantrycontroller "github.com/gantry-dev/gantry/internal/controller"
)

// maxRetryDelay caps the backoff of a pool whose reconcile keeps failing — only the API
// server can make it fail. controller-runtime's default grows to 16m40s, and a pool
// woken by every webhook during an outage of a few seconds fails often enough to wait
// half a minute or more once the API server is back. A pool reconcile is cheap: retry
// at least every 10 s.
const maxRetryDelay = 10 * time.Second

// SetupWithManager registers the controller: RunnerPools, their Runners, and the
// Tracker's word that a pool's demand changed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	demandChanged := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.Tracker.SetNotify(func(key types.NamespacedName) { q.Add(reconcile.Request{NamespacedName: key}) })
		r.Tracker.SetPickupObserver(ObservePickup)
		r.Tracker.SetArrivalObserver(r.Warm.Arrival)
		r.ScaleSets.SetNotify(func(key types.NamespacedName) { q.Add(reconcile.Request{NamespacedName: key}) })
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("runnerpool").
		For(&v1alpha1.RunnerPool{}).
		Owns(&v1alpha1.Runner{}).
		// Cache volumes claimed, released or deleted change the pool's status.caches.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(poolOfVolume)).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: max(1, concurrency),
			RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
				&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
			),
		}).
		WatchesRawSource(demandChanged).
		Complete(gantrycontroller.QuietOnShutdown(r))
}
