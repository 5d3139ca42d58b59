package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestQuietOnShutdown(t *testing.T) {
	failing := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{RequeueAfter: time.Second}, errors.New("patch: context canceled")
	})
	r := QuietOnShutdown(failing)

	res, err := r.Reconcile(context.Background(), reconcile.Request{})
	if err == nil || res.RequeueAfter != time.Second {
		t.Errorf("while running: got (%+v, %v), want the reconciler's own result and error", res, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err = r.Reconcile(ctx, reconcile.Request{})
	if err != nil || res != (reconcile.Result{}) {
		t.Errorf("after shutdown: got (%+v, %v), want no error and no requeue", res, err)
	}
}
