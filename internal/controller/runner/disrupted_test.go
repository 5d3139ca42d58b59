package runner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Failures the cluster caused do not count toward the pool's backoff; a node-pressure
// eviction and every other failure do.
func TestDisrupted(t *testing.T) {
	withTarget := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason,
		}}}}
	}
	pressure := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}}
	tests := []struct {
		name   string
		reason string
		pod    *corev1.Pod
		want   bool
	}{
		{"node lost", v1alpha1.ReasonNodeLost, nil, true},
		{"node deleted", v1alpha1.ReasonNodeDeleted, nil, true},
		{"drain bound", v1alpha1.ReasonDrainTimeout, nil, true},
		{"OOM-killed job", v1alpha1.ReasonOOMKilled, nil, true},
		{"drain (Eviction API)", v1alpha1.ReasonEvicted, withTarget("EvictionByEvictionAPI"), true},
		{"preempted", v1alpha1.ReasonEvicted, withTarget("PreemptionByScheduler"), true},
		{"taint manager", v1alpha1.ReasonEvicted, withTarget("DeletionByTaintManager"), true},
		{"node pressure", v1alpha1.ReasonEvicted, pressure, false},
		{"kubelet termination", v1alpha1.ReasonEvicted, withTarget("TerminationByKubelet"), false},
		{"image pull", v1alpha1.ReasonImagePullFailed, withTarget("EvictionByEvictionAPI"), false},
		{"exited", v1alpha1.ReasonExitedWithoutJob, nil, false},
	}
	for _, tt := range tests {
		if got := disrupted(tt.reason, tt.pod); got != tt.want {
			t.Errorf("%s: disrupted = %v, want %v", tt.name, got, tt.want)
		}
	}
}
