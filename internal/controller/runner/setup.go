package runner

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gantry-dev/gantry/api/v1alpha1"
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
		WithOptions(controllerOptions(concurrency)).
		WatchesRawSource(jobs).
		Complete(r)
}

func controllerOptions(concurrency int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: max(1, concurrency)}
}
