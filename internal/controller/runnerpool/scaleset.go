package runnerpool

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
)

// scaleSetDemand is a scale-set pool's demand: the jobs the service assigned to its
// scale set (statistics.totalAssignedJobs, waiting and running) less those its busy
// runners run. Until the session has answered, ok is false and nothing is retired.
func (r *Reconciler) scaleSetDemand(key types.NamespacedName, busy int) (d demand.Demand, ok bool) {
	assigned, ok := r.ScaleSets.Assigned(key)
	return demand.Demand{Queued: max(0, assigned-busy)}, ok
}

// scaleSetStatus copies the listener's view of the scale set and its session into the
// pool's status and its ScaleSetSession condition.
func (r *Reconciler) scaleSetStatus(s *state) {
	pool := s.pool
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	ss, reason, ok := r.ScaleSets.Status(key)
	if !ok {
		ss = v1alpha1.ScaleSetStatus{Name: pool.ScaleSetName(), Session: v1alpha1.SessionClosed,
			Message: "no session: the pool's configuration must be fixed first (see the Ready condition)"}
		reason = v1alpha1.ReasonScaleSetUnavailable
	}
	if prev := pool.Status.ScaleSet; prev != nil && ss.ID == 0 {
		ss.ID, ss.RunnerGroupID = prev.ID, prev.RunnerGroupID
	}
	pool.Status.ScaleSet = &ss
	s.scaleSetReason, s.scaleSetMessage = reason, ss.Message
	c := metav1.Condition{Type: v1alpha1.ConditionScaleSetSession, Status: metav1.ConditionFalse, Reason: reason, Message: ss.Message,
		ObservedGeneration: pool.Generation}
	if ss.Session == v1alpha1.SessionActive {
		c.Status, c.Message = metav1.ConditionTrue, "the scale set's message session is open in the leader and long-polled"
	}
	if c.Message == "" {
		c.Message = string(ss.Session)
	}
	meta.SetStatusCondition(&pool.Status.Conditions, c)
}

// removeScaleSet deletes a draining pool's scale set on GitHub once its runners are gone.
func (r *Reconciler) removeScaleSet(ctx context.Context, pool *v1alpha1.RunnerPool) (reconcile.Result, bool) {
	if !pool.UsesScaleSet() || r.ScaleSets == nil {
		return reconcile.Result{}, true
	}
	done, err := r.ScaleSets.Remove(ctx, pool)
	if err != nil {
		log.FromContext(ctx).Info("Deleting the pool's scale set failed; retrying", "reason", err.Error())
		return reconcile.Result{RequeueAfter: 10 * time.Second}, false
	}
	return reconcile.Result{}, done
}
