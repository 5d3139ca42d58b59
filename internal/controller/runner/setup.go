package runner

import (
	"context"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	gantrycontroller "github.com/gantry-dev/gantry/internal/controller"
)

// SetupWithManager registers the controller: Runners, their pods and Secrets, and the
// Tracker's word that a runner started or finished a job.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Runner{}, indexName,
		func(o client.Object) []string { return []string{o.GetName()} }); err != nil {
		return err
	}
	jobs := source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.Tracker.SetRunnerNotify(func(name string) {
			for _, req := range r.runnerByName(ctx, name) {
				q.Add(req)
			}
		})
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("runner").
		For(&v1alpha1.Runner{}).
		Owns(&corev1.Pod{}).
		// Kubernetes mode: the workflow and step pods the hook makes where it works.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(hookPodRunner)).
		// A changed template makes the pool's runners outdated (status.outdated).
		Watches(&v1alpha1.RunnerPool{}, handler.EnqueueRequestsFromMapFunc(r.poolRunners),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controllerOptions(concurrency)).
		WatchesRawSource(jobs).
		Complete(gantrycontroller.QuietOnShutdown(r))
}

// maxRetryDelay caps the backoff of a runner whose reconcile keeps failing (GitHub
// answering 5xx or timing out, the API server unreachable): controller-runtime's
// default grows to 16m40s, so a runner could wait that long after GitHub recovered.
// Capped, every waiting runner tries again within 30 s of the recovery — at most two
// calls a minute per waiting runner while GitHub is down — and the bucket still holds
// the retries of all runners together to 10 a second.
const maxRetryDelay = 30 * time.Second

func controllerOptions(concurrency int) controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: max(1, concurrency),
		RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
			&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
		),
	}
}

// poolRunners are the Runners of a pool, for a pool whose spec changed.
func (r *Reconciler) poolRunners(ctx context.Context, pool client.Object) []reconcile.Request {
	var list v1alpha1.RunnerList
	if err := r.Client.List(ctx, &list, client.InNamespace(pool.GetNamespace()),
		client.MatchingLabels{v1alpha1.LabelPool: pool.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: it.Namespace, Name: it.Name}})
	}
	return out
}
