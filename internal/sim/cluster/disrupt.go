package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Involuntary disruptions of the simulated cluster, each as Kubernetes itself does it:
// no PodDisruptionBudget is asked. drain.go holds the voluntary one.

// Messages and reasons the Kubernetes components write, verbatim.
const (
	// EvictedReason is the pod status reason of a kubelet's node-pressure eviction
	// (pkg/kubelet/eviction/helpers.go: Reason).
	EvictedReason = "Evicted"
	// DisruptionTargetByKubelet and DisruptionTargetByPodGC are the reasons of the
	// DisruptionTarget condition the kubelet and the pod garbage collector set
	// (k8s.io/api/core/v1: PodReasonTerminationByKubelet; pkg/controller/podgc).
	DisruptionTargetByKubelet = corev1.PodReasonTerminationByKubelet
	DisruptionTargetByPodGC   = "DeletionByPodGC"
	podGCMessage              = "PodGC: node no longer exists"
	// OOMKilledReason is a container's terminated reason when the kernel's OOM killer
	// ended its main process (exit code 137, SIGKILL).
	OOMKilledReason = "OOMKilled"
	exitSIGKILL     = 137
)

// SpotReclaim plays the reclaim of a spot or preemptible node: the machine is gone at
// once, and so are the node and its pods. The Node object is deleted, as a cloud
// provider's node lifecycle controller deletes the Node of a vanished instance; its pods
// are then marked and force-deleted as kube-controller-manager's pod garbage collector
// does for the pods of a node that no longer exists (pkg/controller/podgc:
// gcOrphaned → markFailedAndDeletePodWithCondition: phase Failed, condition
// DisruptionTarget reason DeletionByPodGC, "PodGC: node no longer exists", then a delete
// with grace period 0) — at once, without the collector's 40 s quarantine, so that the
// node and its pods go together. It returns the runner pods that were on the node.
func (c *Cluster) SpotReclaim(ctx context.Context, node string) ([]corev1.Pod, error) {
	runners, err := c.LoseNode(ctx, node, NodeLossDelete)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, podsOn(node)); err != nil {
		return runners, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: DisruptionTargetByPodGC, Message: podGCMessage, LastTransitionTime: metav1.Now()}
		if err := c.failPod(ctx, p, "", "", cond, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		err := c.Client.Delete(ctx, p, client.GracePeriodSeconds(0))
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return runners, errors.Join(errs...)
}

// EvictByKubelet plays a kubelet's node-pressure eviction of pod (a hard threshold of
// resource, such as memory, crossed): the kubelet kills the pod's containers at once —
// a hard threshold has no grace period — and writes the pod Failed, reason Evicted, with
// its message and the DisruptionTarget condition reason TerminationByKubelet
// (pkg/kubelet/eviction: evictPod); its containers end with exit code 137, reason Error
// (what a container runtime reports for a non-zero exit). No PodDisruptionBudget is
// asked. The caller stops the pod's processes (the simulated runner).
func (c *Cluster) EvictByKubelet(ctx context.Context, pod client.ObjectKey, resource corev1.ResourceName) error {
	p := &corev1.Pod{}
	if err := c.Client.Get(ctx, pod, p); err != nil {
		return fmt.Errorf("reading pod %s: %w", pod, err)
	}
	// The kubelet's message (helpers.go: nodeLowMessageFmt, thresholdMetMessageFmt,
	// containerMessageFmt), with the simulated node's figures.
	msg := fmt.Sprintf("The node was low on resource: %v. Threshold quantity: %v, available: %v. ", resource, "100Mi", "96Mi")
	for _, ctr := range p.Spec.Containers {
		req := ctr.Resources.Requests[resource]
		msg += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ", ctr.Name, "2Gi", req.String(), resource)
	}
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: DisruptionTargetByKubelet, Message: msg, LastTransitionTime: metav1.Now()}
	return c.failPod(ctx, p, EvictedReason, msg, cond, func(string) string { return "Error" })
}

// OOMKill plays the kernel's OOM killer ending the main process of pod's container:
// the container terminates OOMKilled, exit code 137, and a pod that never restarts
// (restartPolicy Never, a runner's) is Failed. The caller stops the process.
func (c *Cluster) OOMKill(ctx context.Context, pod client.ObjectKey, container string) error {
	p := &corev1.Pod{}
	if err := c.Client.Get(ctx, pod, p); err != nil {
		return fmt.Errorf("reading pod %s: %w", pod, err)
	}
	return c.failPod(ctx, p, "", "", corev1.PodCondition{}, func(name string) string {
		if name == container {
			return OOMKilledReason
		}
		return ""
	})
}

// failPod writes pod p's status Failed, with reason and message at the pod level, cond
// (when it has a type) among its conditions, and — when terminated is set — every
// container named by it terminated with exit code 137 and the reason it returns ("":
// left as it was).
func (c *Cluster) failPod(ctx context.Context, p *corev1.Pod, reason, msg string, cond corev1.PodCondition, terminated func(container string) string) error {
	base := p.DeepCopy()
	now := metav1.NewTime(time.Now())
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, reason, msg
	if cond.Type != "" {
		p.Status.Conditions = append(p.Status.Conditions, cond)
	}
	for i := range p.Status.Conditions {
		if t := p.Status.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, now
		}
	}
	if terminated != nil {
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			r := terminated(cs.Name)
			if r == "" {
				continue
			}
			started := now
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitSIGKILL, Reason: r, StartedAt: started, FinishedAt: now}}
			cs.Ready, cs.Started = false, ptr.To(false)
		}
	}
	if err := c.Client.Status().Patch(ctx, p, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("writing the status of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// podsOn selects the pods bound to node.
func podsOn(node string) client.MatchingFieldsSelector {
	return client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node)}
}
