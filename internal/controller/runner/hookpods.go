package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/hookrelease"
)

// This file is the pods and Secrets the hook makes for a runner (hookrelease's table):
// watched while the runner runs, and removed once it ends.

// containerHooks is the phase of a Kubernetes-mode runner once its pod exists. Contract:
//
//   - Once the runner pod runs (the hook makes no pod before), the namespace the hook
//     works in has its default ServiceAccount, which the hook's pods name
//     (ensureDefaultServiceAccount).
//   - The hook's pods are watched, in the namespace it works in, by their runner-pod
//     label: the workflow pod (hookrelease.WorkflowPodName) and the step pods of image
//     actions (hookrelease.StepPodPrefix). The hook never reads the runner pod, so there
//     is nothing to place for it: the scheduler places every pod it makes.
//   - The workflow pod: Running sets the Runner's WorkflowPodReady condition True; an
//     invalid image, an image pull failing past recovery.imagePullGracePeriod, or a pod
//     unschedulable past recovery.pendingTimeout (the runner pod's own stuck detection,
//     diagnose) sets it False with a Warning event naming the image or the scheduler's
//     message, and deletes the WORKFLOW pod — not the runner pod. The hook's
//     prepare_job, polling that pod, finds it gone and fails at once; the runner reports
//     the job failed with the hook's message and exits: the job ends within seconds,
//     not after the hook's prepare-job timeout nor GitHub's runner-lost timeout.
//   - Backstop: a runner still not ended backstopAfter that deletion (its
//     hook did not give up: not GitHub's) is failed as any stuck runner, its pod
//     deleted.
//   - A step pod that cannot start for the same reasons is deleted with a Warning event:
//     the hook's run_container_step, polling it, fails the step at once, and the job
//     goes on as the workflow says (the runner is not stuck, so no backstop).
//   - The workflow pod, step pods and hook Secrets go when the runner fails (fail) or is
//     removed (finalize), whatever ended it: removeHookObjects.
//
// Done unless it failed the runner. Other pools: done at once.
func (r *Reconciler) containerHooks(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	cm := s.pool.Spec.ContainerMode
	if !cm.IsKubernetes() || s.pod == nil {
		return reconcile.Result{}, true, nil
	}
	if s.pod.Status.Phase == corev1.PodSucceeded || s.pod.Status.Phase == corev1.PodFailed || s.pod.DeletionTimestamp != nil {
		// Ended: observe completes or fails the runner, and that removes the hook's objects.
		return reconcile.Result{}, true, nil
	}
	hook := hookOfPod(s.pod)
	if hook == nil {
		return reconcile.Result{}, true, nil // made before the pool took Kubernetes mode
	}
	if s.pod.Status.Phase == corev1.PodRunning {
		// The hook makes no pod before its runner runs a job.
		if err := r.ensureDefaultServiceAccount(ctx, hook.Namespace); err != nil {
			return reconcile.Result{}, false, err
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, ctrl.InNamespace(hook.Namespace), ctrl.MatchingLabels{hookrelease.LabelRunnerPod: s.pod.Name}); err != nil {
		return reconcile.Result{}, false, fmt.Errorf("listing the hook's pods: %w", err)
	}
	var wf *corev1.Pod
	var res reconcile.Result
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Name == hookrelease.WorkflowPodName(s.pod.Name) && p.DeletionTimestamp == nil:
			wf = p
			r.hookPods.saw(s.runner, p) // hookSecretsGone
		case strings.HasPrefix(p.Name, hookrelease.StepPodPrefix(s.pod.Name)) && p.DeletionTimestamp == nil:
			later, err := r.observeStepPod(ctx, s, p)
			if err != nil {
				return reconcile.Result{}, false, err
			}
			res = mergeResults(res, later)
		}
	}
	if wf == nil {
		later, done, err := r.workflowPodBackstop(ctx, s)
		return mergeResults(res, later), done, err
	}
	later, done, err := r.observeWorkflowPod(ctx, s, wf)
	return mergeResults(res, later), done, err
}

// workflowPodGrace is how long after the hook's own prepare-job timeout a runner whose
// workflow pod Gantry deleted may take to end before Gantry ends it.
const workflowPodGrace = 30 * time.Second

// backstopAfter is the time after Gantry deleted a runner's workflow pod that
// could not start by which the runner must have ended: the hook's prepare-job timeout
// (any hook gives up by then, having started waiting before the deletion) plus
// workflowPodGrace. The official hook ends within seconds of the deletion.
func backstopAfter(cm *v1alpha1.ContainerModeSpec) time.Duration {
	return cm.PrepareJobTimeoutOrDefault() + workflowPodGrace
}

// isWorkflowPodFailure reports whether reason is one for which containerHooks deletes
// a workflow pod that cannot start.
func isWorkflowPodFailure(reason string) bool {
	switch reason {
	case v1alpha1.ReasonWorkflowPodInvalidImage, v1alpha1.ReasonWorkflowPodImagePullFailed, v1alpha1.ReasonWorkflowPodUnschedulable:
		return true
	}
	return false
}

// workflowPodBackstop is containerHooks with no workflow pod, or one going: after
// Gantry deleted a workflow pod that could not start (WorkflowPodReady False with a
// workflow-pod reason), the runner is expected to end on its own; once
// workflowPodBackstop has passed since that deletion, it is failed with that reason.
func (r *Reconciler) workflowPodBackstop(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	c := meta.FindStatusCondition(s.runner.Status.Conditions, v1alpha1.ConditionWorkflowPodReady)
	if c == nil || c.Status != metav1.ConditionFalse || !isWorkflowPodFailure(c.Reason) {
		return reconcile.Result{}, true, nil
	}
	backstop := backstopAfter(s.pool.Spec.ContainerMode)
	if left := backstop - r.Clock.Since(c.LastTransitionTime.Time); left > 0 {
		return reconcile.Result{RequeueAfter: left}, true, nil
	}
	return r.fail(ctx, s, c.Reason, fmt.Sprintf(
		"%s; the runner had not ended %s after Gantry deleted that workflow pod, so its runner pod is deleted",
		c.Message, humanDuration(backstop)))
}

// observeWorkflowPod is containerHooks' look at the runner's workflow pod.
func (r *Reconciler) observeWorkflowPod(ctx context.Context, s *scope, wf *corev1.Pod) (reconcile.Result, bool, error) {
	cond := metav1.Condition{Type: v1alpha1.ConditionWorkflowPodReady, ObservedGeneration: s.runner.Generation}
	switch wf.Status.Phase {
	case corev1.PodRunning:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, v1alpha1.ReasonWorkflowPodRunning, "the workflow pod "+wf.Name+" runs"
		meta.SetStatusCondition(&s.runner.Status.Conditions, cond)
		return reconcile.Result{}, true, nil
	case corev1.PodPending:
	default:
		return reconcile.Result{}, true, nil
	}
	v := diagnose(wf, s.pool.Spec.Recovery, r.Clock.Now(), false)
	reason, message := workflowPodVerdict(wf, v, s.pool.Spec.Recovery)
	if reason == "" {
		return reconcile.Result{RequeueAfter: v.wait}, true, nil
	}
	cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, message
	meta.SetStatusCondition(&s.runner.Status.Conditions, cond)
	log.FromContext(ctx).Info("Deleting the workflow pod that cannot start", "pod", klog.KObj(wf), "reason", reason, "message", message)
	if err := r.Client.Delete(ctx, wf, ctrl.GracePeriodSeconds(0), ctrl.Preconditions{UID: &wf.UID}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Gone already, or a new pod of that name: the next look decides.
			return reconcile.Result{RequeueAfter: time.Second}, true, nil
		}
		return reconcile.Result{}, false, fmt.Errorf("deleting the workflow pod %s/%s: %w", wf.Namespace, wf.Name, err)
	}
	r.Events.Eventf(s.runner, wf, corev1.EventTypeWarning, reason, "DeleteWorkflowPod",
		"%s; the workflow pod is deleted, so the hook fails the job at once", message)
	return reconcile.Result{RequeueAfter: backstopAfter(s.pool.Spec.ContainerMode)}, true, nil
}

// observeStepPod is containerHooks' look at one of the runner's step pods: one that
// cannot start (workflowPodVerdict) is deleted, with a Warning event naming its image.
func (r *Reconciler) observeStepPod(ctx context.Context, s *scope, sp *corev1.Pod) (reconcile.Result, error) {
	if sp.Status.Phase != corev1.PodPending {
		return reconcile.Result{}, nil
	}
	v := diagnose(sp, s.pool.Spec.Recovery, r.Clock.Now(), false)
	reason, message := workflowPodVerdict(sp, v, s.pool.Spec.Recovery)
	if reason == "" {
		return reconcile.Result{RequeueAfter: v.wait}, nil
	}
	log.FromContext(ctx).Info("Deleting the step pod that cannot start", "pod", klog.KObj(sp), "reason", reason, "message", message)
	if err := r.Client.Delete(ctx, sp, ctrl.GracePeriodSeconds(0), ctrl.Preconditions{UID: &sp.UID}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("deleting the step pod %s/%s: %w", sp.Namespace, sp.Name, err)
	}
	r.Events.Eventf(s.runner, sp, corev1.EventTypeWarning, reason, "DeleteStepPod",
		"%s; the step pod is deleted, so the hook fails the step at once", message)
	return reconcile.Result{}, nil
}

// workflowPodReadyRides reports whether the reconcile's status differs from the stored
// one only by a WorkflowPodReady True condition: it is not worth a write of its own (one
// per container job), and rides with the runner's next status write, if any — a runner
// whose job ends first is deleted without one. A False one, which says what went wrong,
// is written at once, and so is a True one that replaces a stored False.
func workflowPodReadyRides(s *scope) bool {
	c := meta.FindStatusCondition(s.runner.Status.Conditions, v1alpha1.ConditionWorkflowPodReady)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	old := meta.FindStatusCondition(s.before.Status.Conditions, v1alpha1.ConditionWorkflowPodReady)
	if old != nil && old.Status != metav1.ConditionTrue {
		return false // a stored False would go on saying the pod cannot start
	}
	st := s.runner.Status.DeepCopy()
	for i := range st.Conditions {
		if st.Conditions[i].Type == v1alpha1.ConditionWorkflowPodReady {
			if old != nil {
				st.Conditions[i] = *old
			} else {
				st.Conditions = slices.Delete(st.Conditions, i, i+1)
			}
			break
		}
	}
	return equalStatus(s.before.Status, *st)
}

// mergeResults is the sooner non-zero requeue of a and b.
func mergeResults(a, b reconcile.Result) reconcile.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter > 0 && b.RequeueAfter < a.RequeueAfter) {
		return b
	}
	return a
}

// workflowPodVerdict turns the runner pod's stuck-pod verdict on a workflow pod (or a
// step pod) into the workflow pod's reason, with a message naming the pod, its image or
// the scheduler's word. Other verdicts (a pod slow to start, a container failing to start) are left to the
// hook's prepare-job timeout.
func workflowPodVerdict(wf *corev1.Pod, v verdict, rec v1alpha1.RecoverySpec) (string, string) {
	image := func(reasons ...string) (string, string, string) {
		for _, c := range podContainers(wf) {
			if w := c.status.State.Waiting; w != nil {
				for _, r := range reasons {
					if w.Reason == r {
						return c.status.Name, c.status.Image, w.Message
					}
				}
			}
		}
		return "", "", ""
	}
	what, fix := "the workflow pod", "fix the job's container: or services: image"
	if !strings.HasSuffix(wf.Name, "-workflow") {
		what, fix = "the step pod", "fix the step's uses: docker:// image"
	}
	switch v.reason {
	case v1alpha1.ReasonInvalidImageName:
		name, img, msg := image("InvalidImageName")
		return v1alpha1.ReasonWorkflowPodInvalidImage, fmt.Sprintf(
			"%s %s cannot start: the image %q of its container %q is not a valid image name%s; %s",
			what, wf.Name, img, name, detail("", msg), fix)
	case v1alpha1.ReasonImagePullFailed:
		name, img, msg := image("ErrImagePull", "ImagePullBackOff")
		return v1alpha1.ReasonWorkflowPodImagePullFailed, fmt.Sprintf(
			"%s %s cannot start: the image %q of its container %q could not be pulled for %s%s; check the image name, tag and registry credentials (container.credentials in the workflow)",
			what, wf.Name, img, name, humanDuration(rec.ImagePullGracePeriodOrDefault()), detail("", msg))
	case v1alpha1.ReasonUnschedulable:
		why := ""
		if c := podCondition(wf, corev1.PodScheduled); c != nil {
			why = c.Message
		}
		return v1alpha1.ReasonWorkflowPodUnschedulable, fmt.Sprintf(
			"%s %s could not be scheduled for %s%s; check containerMode.workflowPodTemplate (resources, nodeSelector, tolerations) against the cluster's nodes",
			what, wf.Name, humanDuration(rec.PendingTimeoutOrDefault()), detail("", why))
	}
	return "", ""
}

// removeHookObjects deletes what the hook made for a runner where it worked: the pods
// (the workflow pod, step pods) and Secrets labeled runner-pod=RUNNER. The hook sets no
// owner reference, so nothing else would. Its own cleanup_job usually did it already:
// pods are deleted only as the cache shows them; Secrets, which the controller neither
// caches nor may list, by one deletecollection — unless hookSecretsGone shows there is
// none to delete (exited is the runner pod, when it exited 0). Idempotent; pools in
// other modes: nothing. The namespace is the runner's hook namespace
// (status.containerHook, or what this process remembers of it), or, with neither,
// wherever the cache shows pods of the runner and the slot the claim table says it
// holds (a slot it held that this process does not know of is swept before reuse:
// sweepSlot).
func (r *Reconciler) removeHookObjects(ctx context.Context, runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool, exited *corev1.Pod) error {
	var namespaces []string
	hook := runner.Status.ContainerHook
	if e := r.unwritten.get(runner); hook == nil && e != nil {
		hook = e.containerHook
	}
	switch {
	case hook != nil:
		namespaces = append(namespaces, hook.Namespace)
	case pool != nil && pool.Spec.ContainerMode.IsKubernetes() && !pool.Spec.ContainerMode.IsolatesRunners():
		namespaces = append(namespaces, pool.Spec.ContainerMode.Namespace)
	case pool != nil && !pool.Spec.ContainerMode.IsKubernetes():
		return nil
	default:
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, ctrl.MatchingLabels{
			v1alpha1.LabelPoolNamespace: runner.Namespace, hookrelease.LabelRunnerPod: runner.Name}); err != nil {
			return fmt.Errorf("listing the runner's hook pods: %w", err)
		}
		for _, p := range pods.Items {
			if p.Namespace != runner.Namespace && !slices.Contains(namespaces, p.Namespace) {
				namespaces = append(namespaces, p.Namespace)
			}
		}
		// A hook that made a Secret and no pod: the slot the runner holds says where.
		if pool != nil {
			if n, ok := r.hookSlots().holderOf(pool.UID, runner.Name); ok {
				if ns := v1alpha1.ContainerHookSlotNamespace(pool, n); !slices.Contains(namespaces, ns) {
					namespaces = append(namespaces, ns)
				}
			}
		}
	}
	mine := ctrl.MatchingLabels{hookrelease.LabelRunnerPod: runner.Name}
	for _, ns := range namespaces {
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, ctrl.InNamespace(ns), mine); err != nil {
			return fmt.Errorf("listing the runner's hook pods: %w", err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			if err := r.Client.Delete(ctx, p, ctrl.GracePeriodSeconds(0)); ctrl.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the runner's pod %s/%s: %w", ns, p.Name, err)
			}
		}
		if r.hookSecretsGone(ctx, runner, exited, ns) {
			continue
		}
		// The controller may not list Secrets (it reads them by name only): one
		// deletecollection by label, whether or not the hook's cleanup_job left any.
		if err := r.Client.DeleteAllOf(ctx, &corev1.Secret{}, ctrl.InNamespace(ns), mine); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the hook's secrets: %w", err)
		}
	}
	return nil
}

// hookSecretsGone reports whether the runner's hook is known to have left no Secret in
// namespace ns, so that removeHookObjects need not delete its Secrets. All must hold:
//
//   - its pod exited 0 (exited): nothing in it runs any more — the hook, and the
//     runner's cleanup_job, have had their turn — and it is no longer being deleted;
//   - its pod requires a job container (ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true, the
//     default): job code ran only in the workflow pod and step pods, which get no
//     token, so only the hook wrote with the runner's token;
//   - this process saw its workflow pod in ns (seenHookPods): v0.8.1's hook makes a
//     Secret only for the job container's registry login, in prepare_job just before
//     that pod, and names it in the pod's imagePullSecrets (hookrelease), so the pod
//     says which Secret it made, if any;
//   - each such Secret is gone: a read of its metadata by name answers NotFound.
//
// Anything else — a runner failed, killed or evicted; a workflow pod never seen
// (refused, never made, or made and gone between two relists of the cache); a
// registry Secret still there; a process that started after the pod was seen — keeps
// the deletecollection.
func (r *Reconciler) hookSecretsGone(ctx context.Context, runner *v1alpha1.Runner, exited *corev1.Pod, ns string) bool {
	if exited == nil || !requiresJobContainer(exited) {
		return false
	}
	seen, ok := r.hookPods.get(runner)
	if !ok || seen.namespace != ns {
		return false
	}
	for _, name := range seen.pullSecrets {
		secret := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, secret); !apierrors.IsNotFound(err) {
			return false
		}
	}
	return true
}

// requiresJobContainer reports whether the runner pod's runner container refuses jobs
// without container: (hookrelease.EnvRequireJobContainer).
func requiresJobContainer(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name != v1alpha1.RunnerContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.Name == EnvRequireJobContainer {
				return e.Value == "true"
			}
		}
	}
	return false
}

// seenHookPods remembers, by runner, the workflow pod this process saw the runner's hook
// make: where, and the Secrets of the hook's it pulls with (its imagePullSecrets named
// with the hook's Secret prefix). Kept in memory only: a process that did not see the
// pod knows nothing, and hookSecretsGone then keeps the deletecollection. The zero
// value is ready to use.
type seenHookPods struct {
	m sync.Map // types.NamespacedName → seenHookPod
}

// seenHookPod is one runner's workflow pod, as seen.
type seenHookPod struct {
	uid         types.UID // the Runner's
	namespace   string
	pullSecrets []string
}

// saw records the runner's workflow pod wf.
func (h *seenHookPods) saw(runner *v1alpha1.Runner, wf *corev1.Pod) {
	if _, ok := h.get(runner); ok {
		return // a pod's imagePullSecrets never change
	}
	seen := seenHookPod{uid: runner.UID, namespace: wf.Namespace}
	prefix := hookrelease.SecretPrefix(runner.Name)
	for _, ref := range wf.Spec.ImagePullSecrets {
		if strings.HasPrefix(ref.Name, prefix) {
			seen.pullSecrets = append(seen.pullSecrets, ref.Name)
		}
	}
	h.m.Store(runnerKey(runner), seen)
}

// get is what was seen of the runner's workflow pod.
func (h *seenHookPods) get(runner *v1alpha1.Runner) (seenHookPod, bool) {
	v, ok := h.m.Load(runnerKey(runner))
	if !ok || v.(seenHookPod).uid != runner.UID {
		return seenHookPod{}, false
	}
	return v.(seenHookPod), true
}

func (h *seenHookPods) forget(key types.NamespacedName) { h.m.Delete(key) }

// hookPodRunner maps a pod the hook made (a workflow or step pod) to its Runner: the
// pool's namespace is on it (gantry.dev/pool-namespace, through the template) and the
// runner's name is its runner-pod label (the runner pod is named after its Runner).
func hookPodRunner(_ context.Context, o ctrl.Object) []reconcile.Request {
	l := o.GetLabels()
	ns, name := l[v1alpha1.LabelPoolNamespace], l[hookrelease.LabelRunnerPod]
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// poolOf is the runner's pool as the cache holds it, nil when it is gone.
func (r *Reconciler) poolOf(ctx context.Context, runner *v1alpha1.Runner) *v1alpha1.RunnerPool {
	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: runner.Namespace, Name: runner.Spec.PoolName}, pool); err != nil {
		return nil
	}
	return pool
}
