package runner

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/nodes"
	"github.com/gantry-dev/gantry/internal/github"
)

// Voluntary disruptions: a node emptied on purpose (kubectl drain, a node upgrade,
// cluster-autoscaler's scale-down, Karpenter's consolidation, drift and expiry). The
// pool's PodDisruptionBudget (runnerpool/budget.go) refuses every eviction of a Ready
// runner pod, so nothing evicts a busy runner; drain is the Runner's side of it.

// Taints autoscalers put on a node they are about to empty and remove.
const (
	// taintClusterAutoscaler: cluster-autoscaler, when it scales a node down
	// (NoSchedule; its FAQ, "How does scale-down work?").
	taintClusterAutoscaler = "ToBeDeletedByClusterAutoscaler"
	// taintKarpenterDisrupted: Karpenter v1, before it drains a node it disrupts
	// (karpenter.sh/disrupted:NoSchedule; karpenter.sh, Concepts, Disruption).
	taintKarpenterDisrupted = "karpenter.sh/disrupted"
	// taintKarpenterDisruption: Karpenter v1beta1 (karpenter.sh/disruption=disrupting).
	taintKarpenterDisruption = "karpenter.sh/disruption"
)

// leaving says why a node is being emptied on purpose, "" when it is not: being
// deleted (Karpenter's finalizer drains it first), tainted by an autoscaler about to
// remove it, or cordoned (kubectl drain and node upgrades cordon first). A candidate
// cluster-autoscaler has only marked (DeletionCandidateOfClusterAutoscaler,
// PreferNoSchedule) is not leaving: it may never be chosen.
func leaving(n *corev1.Node) string {
	if !n.DeletionTimestamp.IsZero() {
		return fmt.Sprintf("node %s is being deleted", n.Name)
	}
	for _, t := range n.Spec.Taints {
		switch t.Key {
		case taintClusterAutoscaler:
			return fmt.Sprintf("cluster-autoscaler is removing node %s (taint %s)", n.Name, t.Key)
		case taintKarpenterDisrupted, taintKarpenterDisruption:
			return fmt.Sprintf("Karpenter is disrupting node %s (taint %s)", n.Name, t.Key)
		}
	}
	if n.Spec.Unschedulable {
		return fmt.Sprintf("node %s is cordoned (a drain or an upgrade)", n.Name)
	}
	return ""
}

// drain is the phase for a runner whose pod runs on a node being emptied on purpose.
// Contract:
//   - a runner without a job (pending or idle) is retired at once: removed from GitHub
//     first — GitHub's "busy" answer means it just took a job, and it is then kept as
//     busy — then deleted (its pod with it); its pool replaces it on another node;
//   - a busy runner finishes its job: condition Draining says since when, once (one
//     status write per drained busy runner); at disruption.drainTimeout its pod is
//     deleted and the runner fails DrainTimeout (its job re-run where the pool says so);
//   - a node no longer leaving (uncordoned) lets the runner be: Draining is removed.
//
// Only where the nodes are read (nodes.View enabled); a pod not bound yet, being
// deleted or ended is observe's.
func (r *Reconciler) drain(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	pod := s.pod
	if !r.Nodes.Enabled() || pod == nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return reconcile.Result{}, true, nil
	}
	node, err := r.Nodes.Get(ctx, pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, true, nil // gone: the pod goes with it (observe)
	}
	if err != nil {
		return reconcile.Result{}, false, fmt.Errorf("reading the runner's node: %w", err)
	}
	why := leaving(node)
	if why == "" {
		meta.RemoveStatusCondition(&s.runner.Status.Conditions, ConditionDraining)
		return reconcile.Result{}, true, nil
	}
	if !ranJob(s.runner) {
		return r.retire(ctx, s, why)
	}
	return r.holdDrain(ctx, s, why)
}

// retire removes a runner without a job from a node being emptied: unregistered first
// (finalize will not ask again), then deleted.
func (r *Reconciler) retire(ctx context.Context, s *scope, why string) (reconcile.Result, bool, error) {
	logger := log.FromContext(ctx)
	if !r.unregistered.has(s.runner) {
		logger.Info("Retiring the runner: its node is being emptied", "why", why)
		err := r.Sources.For(s.pool).Unregister(ctx, s.pool, s.runner.Name, s.runner.Status.GitHubRunnerID)
		var cfg *controller.ConfigError
		switch {
		case err == nil:
			r.unregistered.add(s.runner)
		case github.IsBusy(err):
			// It took a job as it was being retired: it finishes it, as any busy runner.
			s.runner.Status.Phase = v1alpha1.RunnerBusy
			return r.holdDrain(ctx, s, why)
		case github.IsRateLimited(err):
			return reconcile.Result{RequeueAfter: github.RetryAfter(err)}, false, nil
		case errors.As(err, &cfg):
			// Finalize says so on the runner; the pod goes all the same.
		default:
			return reconcile.Result{}, false, fmt.Errorf("unregistering the runner of a node being emptied: %w", err)
		}
	}
	r.Events.Eventf(s.runner, s.pool, corev1.EventTypeNormal, "Retired", "Drain",
		"%s: the runner had no job, so it was removed at once; its pool replaces it on another node", why)
	return reconcile.Result{}, false, r.deleteRunner(ctx, s.runner)
}

// holdDrain keeps a busy runner on a node being emptied until its job ends or the pool's
// drainTimeout has passed since the runner was first seen there.
func (r *Reconciler) holdDrain(ctx context.Context, s *scope, why string) (reconcile.Result, bool, error) {
	timeout := s.pool.Spec.Disruption.DrainTimeoutOrDefault()
	now := r.Clock.Now()
	c := meta.FindStatusCondition(s.runner.Status.Conditions, ConditionDraining)
	if c == nil || c.Status != metav1.ConditionTrue {
		log.FromContext(ctx).Info("Runner holds its node's drain until its job ends", "why", why, "drainTimeout", timeout)
		meta.SetStatusCondition(&s.runner.Status.Conditions, metav1.Condition{
			Type: ConditionDraining, Status: metav1.ConditionTrue, Reason: "NodeLeaving",
			Message:            fmt.Sprintf("%s: the runner finishes its job first, for at most disruption.drainTimeout (%s)", why, humanDuration(timeout)),
			LastTransitionTime: metav1.NewTime(now), ObservedGeneration: s.runner.Generation,
		})
		c = meta.FindStatusCondition(s.runner.Status.Conditions, ConditionDraining)
	}
	deadline := c.LastTransitionTime.Add(timeout)
	if now.Before(deadline) {
		return reconcile.Result{RequeueAfter: deadline.Sub(now)}, true, nil
	}
	job := "its job"
	if j := s.runner.Status.Job; j != nil && j.ID > 0 {
		job = fmt.Sprintf("job %d", j.ID)
	}
	return r.fail(ctx, s, v1alpha1.ReasonDrainTimeout, fmt.Sprintf(
		"%s, and the runner was still running %s after disruption.drainTimeout (%s): its pod was deleted so that the drain can end",
		why, job, humanDuration(timeout)))
}

// indexPodNode indexes the cached pods (Gantry's only) by node, for mapping a node that
// changed to the runners on it.
const indexPodNode = "gantry.pod.node"

func podNode(o ctrl.Object) []string {
	if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}
	}
	return nil
}

// nodeRunners wakes the runners on a node whose leaving changed (cordoned, uncordoned,
// tainted by an autoscaler, deleted). Most node updates are the kubelet's status
// reports and change nothing Slim keeps: they cost a comparison.
func (r *Reconciler) nodeRunners() handler.EventHandler {
	enqueue := func(ctx context.Context, node string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, ctrl.MatchingFields{indexPodNode: node}); err != nil {
			return
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if ownedByRunner(p) {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: metav1.GetControllerOf(p).Name}})
			}
		}
	}
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, okOld := e.ObjectOld.(*corev1.Node)
			cur, okCur := e.ObjectNew.(*corev1.Node)
			if okOld && okCur && nodes.Changed(old, cur) && leaving(old) != leaving(cur) {
				enqueue(ctx, cur.Name, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object.GetName(), q)
		},
	}
}
