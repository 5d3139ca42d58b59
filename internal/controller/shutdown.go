package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QuietOnShutdown wraps a reconciler so that a reconcile cut short because the
// manager is stopping (its context canceled: a rolling update, a lost lease) is not
// logged as a "Reconciler error" with a stack trace. Nothing is lost: whichever
// controller leads next reconciles every object again from the API server.
func QuietOnShutdown(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if ctx.Err() != nil {
			return reconcile.Result{}, nil //nolint:nilerr // stopping: the next leader reconciles again
		}
		return res, err
	})
}
