package testutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// PodStarted sets in pod's status what a kubelet writes once the runner container
// started: the tests that play the kubelet write it with the status subresource.
func PodStarted(pod *corev1.Pod) {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: v1alpha1.RunnerContainerName, Ready: true, Image: pod.Spec.Containers[0].Image,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}
}

// PodExited sets in pod's status what a kubelet writes once the runner container
// exited with code: Succeeded for 0, Failed otherwise.
func PodExited(pod *corev1.Pod, code int32) {
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:  v1alpha1.RunnerContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed"}},
	}}
}
