package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// checkStuck is observe's failure detection for a pod that is not running its agent:
// one rule for every container of the pod — init containers, native sidecars (init
// containers with restartPolicy Always) and the runner — and one deadline for
// everything else. Contract:
//   - an invalid image name, or an init container that exited non-zero, fails the
//     runner at once;
//   - an image that cannot be pulled fails it after imagePullGracePeriod; a container
//     that cannot be configured (a missing Secret, ConfigMap or key), created or kept
//     running (CrashLoopBackOff) after containerErrorGracePeriod, all counted from the
//     pod's creation;
//   - whatever else holds the pod back (unschedulable, a volume that never attaches, a
//     sidecar that never starts) fails it once pendingTimeout has passed, with the
//     pod's own last warning in the message;
//   - a runner container that exited while a sidecar keeps the pod Running ends the
//     runner as the pod's end would.
//
// handled is false when the pod runs its agent normally or has ended: observe goes on.
// Otherwise res, done and err are observe's answer, with a requeue for the next deadline.
func (r *Reconciler) checkStuck(ctx context.Context, s *scope, hasJob bool) (handled bool, res reconcile.Result, done bool, err error) {
	pod := s.pod
	now := r.Clock.Now()
	rs := runnerStatus(pod)
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return false, reconcile.Result{}, false, nil
	case corev1.PodFailed:
		if hasJob || isEvicted(pod) {
			return false, reconcile.Result{}, false, nil
		}
		if ic := failedInitContainer(pod); ic != nil {
			t := ic.State.Terminated
			res, done, err = r.fail(ctx, s, v1alpha1.ReasonInitContainerFailed, fmt.Sprintf(
				"init container %q exited with code %d before the runner started%s; check its logs and template.spec.initContainers[%s]",
				ic.Name, t.ExitCode, detail(t.Reason, t.Message), ic.Name))
			return true, res, done, err
		}
		return false, reconcile.Result{}, false, nil
	case corev1.PodRunning:
		if rs == nil {
			return false, reconcile.Result{}, false, nil
		}
		if t := rs.State.Terminated; t != nil {
			// The runner exited while a sidecar (say Docker-in-Docker as an ordinary
			// container) keeps the pod Running: the runner is done all the same.
			if hasJob && oomKilled(pod) && s.pool.Spec.Disruption.RerunsOOMKilled() {
				res, done, err = r.failOOMKilled(ctx, s)
				return true, res, done, err
			}
			if t.ExitCode == 0 || hasJob {
				s.runner.Status.Phase = v1alpha1.RunnerSucceeded
				res, done, err = r.complete(ctx, s)
				return true, res, done, err
			}
			res, done, err = r.fail(ctx, s, v1alpha1.ReasonExitedWithoutJob, fmt.Sprintf(
				"the runner container exited with code %d before running a job; check its logs", t.ExitCode))
			return true, res, done, err
		}
		if rs.State.Running != nil {
			if hasJob {
				return false, reconcile.Result{}, false, nil
			}
			// The agent runs; a sidecar that keeps crashing would fail every job it takes.
			v := diagnose(pod, s.pool.Spec.Recovery, now, true)
			if v.reason == "" {
				return false, reconcile.Result{}, false, nil
			}
			res, done, err = r.fail(ctx, s, v.reason, v.message)
			return true, res, done, err
		}
	}

	// Pending (or Running on a sidecar while the runner container waits).
	if ranBefore(s, hasJob) {
		// A pod never goes back to Pending, nor a runner container that ran (restartPolicy
		// Never) back to waiting: this pod is a read from a cache behind the one this
		// runner's status was made from — under load the pod watch falls behind, and the
		// pod was read from the API server before. Saying Pending now, and Busy again
		// once the cache catches up, would be two status writes telling a busy runner's
		// history backwards. The pod's next event brings the current one.
		return true, reconcile.Result{RequeueAfter: behindRecheck}, false, nil
	}
	s.runner.Status.Phase = v1alpha1.RunnerPending
	v := diagnose(pod, s.pool.Spec.Recovery, now, false)
	if v.reason == "" {
		return true, reconcile.Result{RequeueAfter: v.wait}, false, nil
	}
	msg := v.message
	if v.reason == v1alpha1.ReasonPendingTimeout || v.reason == v1alpha1.ReasonUnschedulable {
		if w := r.lastPodWarning(ctx, pod); w != "" && !strings.Contains(msg, w) {
			msg += "; the pod's last warning: " + w
		}
	}
	if v.reason == v1alpha1.ReasonUnschedulable {
		msg += platformHint(s.pool)
	}
	res, done, err = r.fail(ctx, s, v.reason, msg)
	return true, res, done, err
}

// verdict is what diagnose makes of a pod: a failure (reason and message), or how long
// until the next deadline it is waiting on (0: none).
type verdict struct {
	reason, message string
	wait            time.Duration
}

// diagnose applies the rule of checkStuck to a pod's status. It is a pure function of
// the pod, the pool's recovery bounds and now. With agentRunning only crash-looping
// init containers and sidecars are looked at: the pod already runs its agent.
func diagnose(pod *corev1.Pod, rec v1alpha1.RecoverySpec, now time.Time, agentRunning bool) verdict {
	created := pod.CreationTimestamp.Time
	pullGrace := rec.ImagePullGracePeriodOrDefault()
	errGrace := rec.ContainerErrorGracePeriodOrDefault()
	pending := rec.PendingTimeoutOrDefault()

	var next time.Duration
	wait := func(deadline time.Time) {
		if left := deadline.Sub(now); left > 0 && (next == 0 || left < next) {
			next = left
		}
	}
	for _, c := range podContainers(pod) {
		w := c.status.State.Waiting
		if w == nil || (agentRunning && w.Reason != "CrashLoopBackOff") {
			continue
		}
		var reason, what string
		var grace time.Duration
		switch w.Reason {
		case "InvalidImageName":
			if c.isRunner() {
				return verdict{reason: v1alpha1.ReasonInvalidImageName, message: "the runner image name is invalid: " + w.Message + "; fix template.spec.containers[runner].image"}
			}
			return verdict{reason: v1alpha1.ReasonInvalidImageName, message: fmt.Sprintf(
				"the image name of %s is invalid%s; fix template.spec.%s[%s].image", c, detail("", w.Message), c.field, c.status.Name)}
		case "ErrImagePull", "ImagePullBackOff":
			reason, grace = v1alpha1.ReasonImagePullFailed, pullGrace
			what = fmt.Sprintf("the image of %s could not be pulled for %s", c, humanDuration(grace))
		case "CreateContainerConfigError":
			reason, grace = v1alpha1.ReasonContainerConfigError, errGrace
			what = fmt.Sprintf("%s could not be configured for %s", c, humanDuration(grace))
		case "CreateContainerError", "RunContainerError":
			reason, grace = v1alpha1.ReasonContainerCreateFailed, errGrace
			what = fmt.Sprintf("%s could not be created or started for %s", c, humanDuration(grace))
		case "CrashLoopBackOff":
			reason, grace = v1alpha1.ReasonCrashLoop, errGrace
			what = fmt.Sprintf("%s kept crashing for %s", c, humanDuration(grace)) + lastExit(c.status)
		default:
			continue
		}
		deadline := created.Add(grace)
		if !now.Before(deadline) && reason == v1alpha1.ReasonImagePullFailed && c.isRunner() {
			return verdict{reason: reason, message: fmt.Sprintf("the runner image could not be pulled for %s: %s", humanDuration(grace), w.Message)}
		}
		if !now.Before(deadline) {
			return verdict{reason: reason, message: what + detail(w.Reason, w.Message) + fixHint(reason, c)}
		}
		wait(deadline)
	}
	if agentRunning {
		return verdict{wait: next}
	}
	if c := podCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
		deadline := c.LastTransitionTime.Add(pending)
		if !now.Before(deadline) {
			return verdict{reason: v1alpha1.ReasonUnschedulable, message: fmt.Sprintf("the runner pod could not be scheduled for %s: %s", humanDuration(pending), c.Message)}
		}
		wait(deadline)
		return verdict{wait: next}
	}
	deadline := created.Add(pending)
	if !now.Before(deadline) {
		return verdict{reason: v1alpha1.ReasonPendingTimeout, message: fmt.Sprintf(
			"the runner pod did not start the runner agent within pendingTimeout (%s): %s", humanDuration(pending), podSummary(pod))}
	}
	wait(deadline)
	return verdict{wait: next}
}

// podContainer is one container's status and where the template declares it.
type podContainer struct {
	status *corev1.ContainerStatus
	// field is initContainers or containers; sidecar is an init container with
	// restartPolicy Always.
	field   string
	sidecar bool
}

func (c podContainer) isRunner() bool {
	return c.field == "containers" && c.status.Name == v1alpha1.RunnerContainerName
}

func (c podContainer) String() string {
	switch {
	case c.sidecar:
		return fmt.Sprintf("sidecar %q", c.status.Name)
	case c.field == "initContainers":
		return fmt.Sprintf("init container %q", c.status.Name)
	}
	return fmt.Sprintf("container %q", c.status.Name)
}

// podContainers lists the statuses of the pod's init containers (sidecars included) and
// containers, in the order the kubelet starts them.
func podContainers(pod *corev1.Pod) []podContainer {
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	var out []podContainer
	for i := range pod.Status.InitContainerStatuses {
		cs := &pod.Status.InitContainerStatuses[i]
		out = append(out, podContainer{status: cs, field: "initContainers", sidecar: sidecars[cs.Name]})
	}
	for i := range pod.Status.ContainerStatuses {
		out = append(out, podContainer{status: &pod.Status.ContainerStatuses[i], field: "containers"})
	}
	return out
}

// failedInitContainer is the init container (not a sidecar) whose non-zero exit failed
// the pod, or nil.
func failedInitContainer(pod *corev1.Pod) *corev1.ContainerStatus {
	for _, c := range podContainers(pod) {
		if c.field != "initContainers" || c.sidecar {
			continue
		}
		if t := c.status.State.Terminated; t != nil && t.ExitCode != 0 {
			return c.status
		}
	}
	return nil
}

// podSummary says, for a message, what each container that is not running waits on.
func podSummary(pod *corev1.Pod) string {
	var parts []string
	for _, c := range podContainers(pod) {
		switch st := c.status.State; {
		case st.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting%s", c, detail(st.Waiting.Reason, st.Waiting.Message)))
		case st.Running == nil && st.Terminated == nil:
			parts = append(parts, fmt.Sprintf("%s not started", c))
		case c.sidecar && c.status.Started != nil && !*c.status.Started:
			parts = append(parts, fmt.Sprintf("%s not started", c))
		}
	}
	if len(parts) == 0 {
		if pod.Spec.NodeName == "" {
			return "the pod was not scheduled"
		}
		return fmt.Sprintf("the pod, on node %s, has not started its containers", pod.Spec.NodeName)
	}
	return strings.Join(parts, "; ")
}

// detail is ": reason: message" with the empty parts left out.
func detail(reason, message string) string {
	var parts []string
	for _, p := range []string{reason, strings.TrimSpace(message)} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ": ")
}

func lastExit(cs *corev1.ContainerStatus) string {
	if t := cs.LastTerminationState.Terminated; t != nil {
		return fmt.Sprintf(" (last exit code %d, %d restarts)", t.ExitCode, cs.RestartCount)
	}
	return fmt.Sprintf(" (%d restarts)", cs.RestartCount)
}

func fixHint(reason string, c podContainer) string {
	switch reason {
	case v1alpha1.ReasonImagePullFailed:
		return fmt.Sprintf("; check template.spec.%s[%s].image and the pull secret", c.field, c.status.Name)
	case v1alpha1.ReasonContainerConfigError:
		return fmt.Sprintf("; create the Secret or ConfigMap (or key) that template.spec.%s[%s] names, or fix the template", c.field, c.status.Name)
	case v1alpha1.ReasonContainerCreateFailed:
		return fmt.Sprintf("; check template.spec.%s[%s] (command, mounts, security context)", c.field, c.status.Name)
	case v1alpha1.ReasonCrashLoop:
		return fmt.Sprintf("; check the logs of %s (kubectl logs --previous)", c)
	}
	return ""
}

// maxWarningLen bounds the pod's warning quoted in a runner's message: an event holds
// 1 KiB.
const maxWarningLen = 300

// lastPodWarning is the message of the pod's most recent Warning event (FailedMount,
// FailedAttachVolume, FailedCreatePodSandBox...), read uncached once when the runner
// fails, or "" when there is none or it cannot be read.
func (r *Reconciler) lastPodWarning(ctx context.Context, pod *corev1.Pod) string {
	var list corev1.EventList
	if err := r.APIReader.List(ctx, &list, ctrl.InNamespace(pod.Namespace),
		ctrl.MatchingFields{"involvedObject.name": pod.Name}); err != nil {
		return ""
	}
	var last *corev1.Event
	var lastAt time.Time
	for i := range list.Items {
		e := &list.Items[i]
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != "Pod" || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != pod.UID) {
			continue
		}
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		if last == nil || at.After(lastAt) {
			last, lastAt = e, at
		}
	}
	if last == nil {
		return ""
	}
	msg := last.Reason + ": " + strings.TrimSpace(last.Message)
	if len(msg) > maxWarningLen {
		msg = msg[:maxWarningLen] + "…"
	}
	return msg
}

// ranBefore reports whether the runner is known to have run its agent: it has a job,
// or its status says Idle or Busy (set only once GitHub listed it online or gave it a
// job).
func ranBefore(s *scope, hasJob bool) bool {
	switch s.runner.Status.Phase {
	case v1alpha1.RunnerIdle, v1alpha1.RunnerBusy:
		return true
	}
	return hasJob
}

// platformHint names the architecture pin Gantry added where the template names none
// (PinPlatform): the one status.platform recorded, read from the cluster's nodes, or
// amd64 where none was seen. Where the nodes of that architecture are full, tainted
// or gone, that pin alone keeps every runner pod Unschedulable, and the scheduler's
// message ("didn't match Pod's node affinity/selector") does not say which selector or why.
func platformHint(pool *v1alpha1.RunnerPool) string {
	if _, arch := pool.Spec.TemplatePlatform(); pool.Spec.NoDefaultLabels || arch != "" {
		return ""
	}
	_, arch := pool.Platform()
	why := "no node was seen to read it from, so amd64 is assumed"
	if st := pool.Status.Platform; st != nil && st.Source == v1alpha1.PlatformFromNodes && st.Message != "" {
		why = st.Message
	}
	return fmt.Sprintf("; the template names no %s, so Gantry pinned the pod to %s=%s (the architecture its runner registers; %s):"+
		" to run elsewhere set template.spec.nodeSelector %s, e.g. arm64 (the runners then register ARM64)",
		v1alpha1.NodeLabelArch, v1alpha1.NodeLabelArch, arch, why, v1alpha1.NodeLabelArch)
}
