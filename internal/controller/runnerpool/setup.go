package runnerpool

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	gantrycontroller "github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/nodes"
)

// maxRetryDelay caps the backoff of a pool whose reconcile keeps failing — only the API
// server can make it fail. controller-runtime's default grows to 16m40s, and a pool
// woken by every webhook during an outage of a few seconds fails often enough to wait
// half a minute or more once the API server is back. A pool reconcile is cheap: retry
// at least every 10 s.
const maxRetryDelay = 10 * time.Second

// settle is how long a pool waits, after one of its Runners changed or its demand fell,
// before it reconciles. Such changes come several times per job (a Runner created,
// busy, deleting, gone; a job started) and only move the counts, which the status
// shows at most once a second (statusInterval), or free a slot nothing waits for:
// within the wait they are taken in by one reconcile, which lists every runner of the
// pool, instead of one each. A job queued wakes the pool at once, as a scale set's
// word does.
const settle = 250 * time.Millisecond

// SetupWithManager registers the controller: RunnerPools, their Runners, and the
// Tracker's word that a pool's demand changed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	demandChanged := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.Tracker.SetNotify(func(key types.NamespacedName, rose bool) {
			if rose {
				q.Add(reconcile.Request{NamespacedName: key})
			} else {
				q.AddAfter(reconcile.Request{NamespacedName: key}, settle)
			}
		})
		r.Tracker.SetPickupObserver(ObservePickup)
		r.Tracker.SetArrivalObserver(r.Warm.Arrival)
		r.Sources.SetNotify(func(key types.NamespacedName) { q.Add(reconcile.Request{NamespacedName: key}) })
		return nil
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("runnerpool").
		For(&v1alpha1.RunnerPool{})
	if r.Nodes.Enabled() {
		// A pool that has seen no node it can run on (status.platform Default) reads the
		// nodes again when one joins or changes, not only every platformRecheck.
		b = b.WatchesRawSource(nodeChanges(mgr, r.recheckDefaultPlatforms))
	}
	return b.
		Watches(&v1alpha1.Runner{}, enqueueAfter{runnersPool(mgr.GetScheme(), mgr.GetRESTMapper()), settle}).
		Watches(&v1alpha1.Runner{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.runnerSeen(e.Object)
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.runnerSeen(e.Object)
			},
		}).
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

// nodeChanges tells recheck of every node that joins or changes what Gantry decides on
// (nodes.Changed). Unlike a watch of the controller's own (Watches), it does not hold
// the pools back until the cache holds every node: the pools start at once, and only a
// pool that must read the nodes (platform.go) waits for them. Listing thousands of
// nodes takes seconds (11 s for 1,000 on a loaded machine in `gantry sim run
// --scenario fleet`), and a restarted controller's pools, whose platform is in their
// status, need none to open their sessions.
func nodeChanges(mgr ctrl.Manager, recheck func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Node{}, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching nodes: %w", err)
		}
		_, err = inf.AddEventHandlerWithOptions(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(_ any, initial bool) {
				if !initial { // the nodes there at the start are read by the pools' first passes
					recheck(ctx, q)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				old, okOld := oldObj.(*corev1.Node)
				cur, okCur := newObj.(*corev1.Node)
				if okOld && okCur && nodes.Changed(old, cur) {
					recheck(ctx, q)
				}
			},
		}, toolscache.HandlerOptions{})
		return err
	})
}

// recheckDefaultPlatforms wakes the pools whose status.platform is Default (they saw no
// node they can run on) and lets each read the nodes again at once.
func (r *Reconciler) recheckDefaultPlatforms(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	var pools v1alpha1.RunnerPoolList
	if err := r.Client.List(ctx, &pools, client.UnsafeDisableDeepCopy); err != nil { // read only
		return
	}
	for i := range pools.Items {
		p := &pools.Items[i]
		if p.Status.Platform == nil || p.Status.Platform.Source != v1alpha1.PlatformDefault {
			continue
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		r.platformReads.forget(key)
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// runnerSeen tells the pool's expectations that the informer has seen a Runner it
// created, made or already gone: the pool's next reconcile drops the expectation even
// if its list does not show the Runner. Met only by listing, a Runner made and gone
// between two reconciles (a short job) would be counted as on its way for
// expectationTTL, holding back a runner for the next job.
func (r *Reconciler) runnerSeen(o client.Object) {
	if pool := o.GetLabels()[v1alpha1.LabelPool]; pool != "" {
		r.expectations.observed(types.NamespacedName{Namespace: o.GetNamespace(), Name: pool}, o.GetName())
	}
}

// runnersPool enqueues the RunnerPool that controls a Runner, as Owns does.
func runnersPool(scheme *runtime.Scheme, mapper meta.RESTMapper) handler.EventHandler {
	return handler.EnqueueRequestForOwner(scheme, mapper, &v1alpha1.RunnerPool{}, handler.OnlyControllerOwner())
}

// enqueueAfter passes a handler's events through with their requests enqueued wait
// later. Events within the wait are one reconcile: the work queue keeps the earliest of
// an item's waits and holds an item once.
type enqueueAfter struct {
	handler.EventHandler
	wait time.Duration
}

func (h enqueueAfter) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Create(ctx, e, addAfter{q, h.wait})
}

func (h enqueueAfter) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Update(ctx, e, addAfter{q, h.wait})
}

func (h enqueueAfter) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Delete(ctx, e, addAfter{q, h.wait})
}

func (h enqueueAfter) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.EventHandler.Generic(ctx, e, addAfter{q, h.wait})
}

// addAfter is a work queue whose Add waits.
type addAfter struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	wait time.Duration
}

func (q addAfter) Add(item reconcile.Request) { q.AddAfter(item, q.wait) }
