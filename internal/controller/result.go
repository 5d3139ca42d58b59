package controller

import "sigs.k8s.io/controller-runtime/pkg/reconcile"

// LowestNonZeroResult merges the results of two phases of a reconcile: the sooner of
// their requeues, a zero RequeueAfter meaning "no requeue" (cluster-api's
// util.LowestNonZeroResult).
func LowestNonZeroResult(a, b reconcile.Result) reconcile.Result {
	if b.RequeueAfter > 0 && (a.RequeueAfter == 0 || b.RequeueAfter < a.RequeueAfter) {
		a.RequeueAfter = b.RequeueAfter
	}
	return a
}
