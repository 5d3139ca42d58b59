package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// observe reads the pod and the job the Tracker saw start, and sets the phase: Pending
// until the runner container runs and GitHub lists the runner online (checkOnline, in
// online.go), Busy once GitHub said it took a job, Idle otherwise. A pod that does not
// run its agent is checkStuck's (stuck.go).
// Contract: a runner that cannot recover is failed with a reason a person can act on,
// as soon as that is certain and never earlier than its pool's recovery timeouts say;
// a finished runner is completed. It requeues for the next deadline it is waiting on.
func (r *Reconciler) observe(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	pod, rec := s.pod, s.pool.Spec.Recovery

	hasJob := s.runner.Status.Job != nil

	if pod.DeletionTimestamp != nil {
		if isEvicted(pod) {
			// Evicted through the Eviction API (a drain), preempted or tainted out: the
			// pod is marked as disrupted and is being deleted. That is certain now; should
			// no kubelet confirm the deletion, expireFailed force-deletes the pod later.
			return r.failEvicted(ctx, s)
		}
		// Terminating: normally gone in seconds. Stuck past nodeLostTimeout means the
		// kubelet that should confirm it is gone: force the deletion.
		left, err := r.reapStuckPod(ctx, pod, rec.NodeLostTimeoutOrDefault())
		if err != nil || left > 0 {
			return reconcile.Result{RequeueAfter: left}, false, err
		}
		if hasJob {
			// The job was cut off with its node; GitHub fails it after its own timeout.
			return r.fail(ctx, s, v1alpha1.ReasonNodeLost, fmt.Sprintf("node %s was lost while the runner ran job %d; its pod was force-deleted", pod.Spec.NodeName, s.runner.Status.Job.ID))
		}
		return r.fail(ctx, s, v1alpha1.ReasonNodeLost, fmt.Sprintf("node %s was lost; the runner's pod was stuck terminating for %s and was force-deleted", pod.Spec.NodeName, humanDuration(rec.NodeLostTimeoutOrDefault())))
	}

	if handled, res, done, err := r.checkStuck(ctx, s, hasJob); handled {
		return res, done, err
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		if len(s.runner.Status.Caches) > 0 {
			// Its volumes are released once the pod is gone, with the job's repository:
			// the status keeps the job for that.
			s.runner.Status.Phase = v1alpha1.RunnerSucceeded
			return r.complete(ctx, s)
		}
		return r.completeExited(ctx, s)
	case corev1.PodFailed:
		if isEvicted(pod) {
			return r.failEvicted(ctx, s)
		}
		if hasJob {
			// The job ran; how it ended is GitHub's to report. The runner is done.
			s.runner.Status.Phase = v1alpha1.RunnerSucceeded
			return r.complete(ctx, s)
		}
		return r.fail(ctx, s, v1alpha1.ReasonExitedWithoutJob, fmt.Sprintf("the runner container exited with code %d before running a job; check its logs", exitCode(pod)))
	case corev1.PodRunning:
		wasOnline := meta.IsStatusConditionTrue(s.runner.Status.Conditions, ConditionOnline)
		if hasJob {
			s.runner.Status.Phase = v1alpha1.RunnerBusy
			setOnline(s, "the runner took a job")
			r.observeStart(s, wasOnline)
			return reconcile.Result{}, true, nil
		}
		res, done, err := r.checkOnline(ctx, s, runningSince(pod))
		r.observeStart(s, wasOnline)
		return res, done, err
	}

	return reconcile.Result{}, false, nil
}

// observeStart tells the pool's prediction (spec.warm.predictive) how long the runner
// took to start — from the Runner's creation to its runner container running — once,
// when it is first known online.
func (r *Reconciler) observeStart(s *scope, wasOnline bool) {
	if wasOnline || !meta.IsStatusConditionTrue(s.runner.Status.Conditions, ConditionOnline) {
		return
	}
	cs := runnerStatus(s.pod)
	if cs == nil || cs.State.Running == nil {
		return
	}
	r.Warm.Started(s.poolKey(), cs.State.Running.StartedAt.Sub(s.runner.CreationTimestamp.Time), r.Clock.Now())
}

// fail ends a runner that cannot recover: phase Failed with a reason and a message, a
// Warning event, a count in the failures metric and in the pool's backoff. The pod is
// deleted at once to free its node; the Runner stays visible for FailedRetention and is
// then removed, which unregisters it from GitHub.
func (r *Reconciler) fail(ctx context.Context, s *scope, reason, message string) (reconcile.Result, bool, error) {
	log.FromContext(ctx).Info("Runner failed", "reason", reason, "message", message)
	s.runner.Status.Phase = v1alpha1.RunnerFailed
	s.runner.Status.Reason = reason
	s.runner.Status.Message = message
	meta.SetStatusCondition(&s.runner.Status.Conditions, metav1.Condition{
		Type: ConditionFailed, Status: metav1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: s.runner.Generation,
	})
	r.Events.Eventf(s.runner, s.pool, corev1.EventTypeWarning, reason, "Fail", "%s", message)
	runnerFailures.WithLabelValues(s.runner.Namespace, s.pool.Name, reason).Inc()
	if !disrupted(reason, s.pod) && s.pool.DeletionTimestamp.IsZero() {
		// A pool being deleted loses its runners on purpose: none counts as a failure.
		r.Failures.RecordFailure(s.poolKey(), reason, message)
	}
	if s.pod != nil && s.pod.DeletionTimestamp == nil {
		if err := r.Client.Delete(ctx, s.pod); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, false, fmt.Errorf("deleting the failed runner's pod: %w", err)
		}
	}
	if err := r.removeHookObjects(ctx, s.runner, s.pool, nil); err != nil { // hookpods.go: a failed runner's Secrets always go
		return reconcile.Result{}, false, err
	}
	return reconcile.Result{RequeueAfter: r.FailedRetention}, false, nil
}

// reapStuckPod force-deletes a pod still terminating timeout after its grace period
// ended: no kubelet confirmed it gone, so its node is taken to be lost. It returns how
// long until that is due, or 0 once the pod was force-deleted.
func (r *Reconciler) reapStuckPod(ctx context.Context, pod *corev1.Pod, timeout time.Duration) (time.Duration, error) {
	if left := timeout - r.Clock.Since(pod.DeletionTimestamp.Time); left > 0 {
		return left, nil
	}
	log.FromContext(ctx).Info("Force-deleting runner pod stuck terminating", "pod", pod.Name, "node", pod.Spec.NodeName)
	if err := r.Client.Delete(ctx, pod, ctrl.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("force-deleting runner pod: %w", err)
	}
	return 0, nil
}

// failEvicted fails a runner whose pod was evicted, saying why: the kubelet's message
// (node pressure), else the DisruptionTarget condition's (the Eviction API, preemption).
func (r *Reconciler) failEvicted(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	why := s.pod.Status.Message
	if c := podCondition(s.pod, corev1.DisruptionTarget); why == "" && c != nil {
		why = c.Message
	}
	if s.runner.Status.Job != nil {
		return r.fail(ctx, s, v1alpha1.ReasonEvicted, fmt.Sprintf("the runner's pod was evicted while running job %d: %s", s.runner.Status.Job.ID, why))
	}
	return r.fail(ctx, s, v1alpha1.ReasonEvicted, "the runner's pod was evicted before it ran a job: "+why)
}

// complete removes a runner that finished: deleting the Runner runs finalize, which
// removes what is left of it on GitHub and in the cluster.
func (r *Reconciler) complete(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	if s.runner.Status.Job != nil {
		r.Failures.RecordSuccess(s.poolKey())
	}
	log.FromContext(ctx).V(1).Info("Runner finished; removing it")
	if err := r.patchStatus(ctx, s); err != nil {
		return reconcile.Result{}, false, err
	}
	s.before = s.runner.DeepCopy()
	return reconcile.Result{}, false, r.deleteRunner(ctx, s.runner)
}

// completeExited removes a runner, holding no cache volume, whose container exited 0:
// an ephemeral runner exits 0 after its one job (or once removed from GitHub), having
// removed itself from GitHub. The Runner is deleted with no status write: finalize
// reads the exited pod, and leaves the pod and the Secret to the garbage collector.
func (r *Reconciler) completeExited(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	if s.runner.Status.Job != nil || s.runner.Status.Phase == v1alpha1.RunnerBusy {
		r.Failures.RecordSuccess(s.poolKey())
	}
	log.FromContext(ctx).V(1).Info("Runner exited; removing it")
	s.before = s.runner.DeepCopy()
	return reconcile.Result{}, false, r.deleteRunner(ctx, s.runner)
}

// disrupted reports whether a failure was the cluster's doing rather than the pool's:
// a lost node, or an eviction through the Eviction API (a drain), by preemption or by
// the taint manager. Those say nothing about the pool's template, so they do not count
// toward its failure backoff — a drain of ten nodes must not stop the pool creating
// runners for ten minutes. A kubelet's node-pressure eviction still counts: the
// template's requests may be what is wrong.
func disrupted(reason string, pod *corev1.Pod) bool {
	switch reason {
	case v1alpha1.ReasonNodeLost:
		return true
	case v1alpha1.ReasonEvicted:
		if pod == nil {
			return false
		}
		c := podCondition(pod, corev1.DisruptionTarget)
		return c != nil && c.Status == corev1.ConditionTrue &&
			(c.Reason == "EvictionByEvictionAPI" || c.Reason == "PreemptionByScheduler" || c.Reason == "DeletionByTaintManager")
	}
	return false
}

func isEvicted(pod *corev1.Pod) bool {
	if pod.Status.Reason == "Evicted" {
		return true
	}
	c := podCondition(pod, corev1.DisruptionTarget)
	return c != nil && c.Status == corev1.ConditionTrue
}

func runnerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == v1alpha1.RunnerContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func exitCode(pod *corev1.Pod) int32 {
	if cs := runnerStatus(pod); cs != nil && cs.State.Terminated != nil {
		return cs.State.Terminated.ExitCode
	}
	return -1
}

func runningSince(pod *corev1.Pod) time.Time {
	if cs := runnerStatus(pod); cs != nil && cs.State.Running != nil {
		return cs.State.Running.StartedAt.Time
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// humanDuration writes a duration as a person would in a message: "2m", "1h", "1h30m"
// rather than time.Duration's "2m0s", "1h0m0s", "1h30m0s".
func humanDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
