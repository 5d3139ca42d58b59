package runner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Which failures of a runner running a job killed it for the infrastructure — and so
// are re-run where the pool says so — and which are the job's own.
func TestKilledByInfrastructure(t *testing.T) {
	kubeletEvicted := func(msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: msg}}
	}
	tests := []struct {
		name   string
		reason string
		pod    *corev1.Pod
		want   bool
	}{
		{"node lost", v1alpha1.ReasonNodeLost, nil, true},
		{"node deleted (spot reclaim)", v1alpha1.ReasonNodeDeleted, nil, true},
		{"drain bound reached", v1alpha1.ReasonDrainTimeout, nil, true},
		{"OOM-killed, where the pool re-runs it", v1alpha1.ReasonOOMKilled, nil, true},
		{"evicted through the eviction API", v1alpha1.ReasonEvicted, &corev1.Pod{}, true},
		{"node pressure", v1alpha1.ReasonEvicted, kubeletEvicted("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "), true},
		{"over the pod's own storage limit", v1alpha1.ReasonEvicted, kubeletEvicted("Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. "), false},
		{"over a container's storage limit", v1alpha1.ReasonEvicted, kubeletEvicted(`Container runner exceeded its local ephemeral storage limit "1Gi". `), false},
		{"over an emptyDir's limit", v1alpha1.ReasonEvicted, kubeletEvicted(`Usage of EmptyDir volume "work" exceeds the limit "2Gi". `), false},
		{"pod deleted by someone", v1alpha1.ReasonPodDeleted, nil, false},
		{"exited without a job", v1alpha1.ReasonExitedWithoutJob, nil, false},
		{"image pull", v1alpha1.ReasonImagePullFailed, nil, false},
	}
	for _, tt := range tests {
		if got := killedByInfrastructure(tt.reason, tt.pod); got != tt.want {
			t.Errorf("%s: killedByInfrastructure = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A node is leaving when it is emptied on purpose: deleted, tainted by an autoscaler
// about to remove it, or cordoned; a mere candidate is not.
func TestLeaving(t *testing.T) {
	node := func(mutate func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		mutate(n)
		return n
	}
	taint := func(key, value string, effect corev1.TaintEffect) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
		}
	}
	now := metav1.Now()
	tests := []struct {
		name string
		node *corev1.Node
		want string
	}{
		{"schedulable", node(func(*corev1.Node) {}), ""},
		{"cordoned (kubectl drain, an upgrade)", node(func(n *corev1.Node) { n.Spec.Unschedulable = true }), "node n1 is cordoned (a drain or an upgrade)"},
		{"cluster-autoscaler scale-down", node(taint("ToBeDeletedByClusterAutoscaler", "1700000000", corev1.TaintEffectNoSchedule)),
			"cluster-autoscaler is removing node n1 (taint ToBeDeletedByClusterAutoscaler)"},
		{"cluster-autoscaler candidate only", node(taint("DeletionCandidateOfClusterAutoscaler", "1700000000", corev1.TaintEffectPreferNoSchedule)), ""},
		{"Karpenter v1", node(taint("karpenter.sh/disrupted", "", corev1.TaintEffectNoSchedule)), "Karpenter is disrupting node n1 (taint karpenter.sh/disrupted)"},
		{"Karpenter v1beta1", node(taint("karpenter.sh/disruption", "disrupting", corev1.TaintEffectNoSchedule)), "Karpenter is disrupting node n1 (taint karpenter.sh/disruption)"},
		{"being deleted", node(func(n *corev1.Node) { n.DeletionTimestamp = &now; n.Finalizers = []string{"karpenter.sh/termination"} }), "node n1 is being deleted"},
		{"unreachable (not a drain)", node(taint("node.kubernetes.io/unreachable", "", corev1.TaintEffectNoExecute)), ""},
	}
	for _, tt := range tests {
		if got := leaving(tt.node); got != tt.want {
			t.Errorf("%s: leaving = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The last state of a deleted runner pod says whether its node went with it.
func TestPodEnds(t *testing.T) {
	var ends podEnds
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-aaaaa", UID: "u1",
		Labels: map[string]string{v1alpha1.LabelRunner: "linux-aaaaa"}}}
	pod.Spec.NodeName = "spot-1"
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: podGCDisruption}}
	ends.deleted(pod)
	key := runnerKey(&v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-aaaaa"}})
	got, ok := ends.get(key)
	if !ok || got.node != "spot-1" || got.disruption != podGCDisruption || got.ownLimit {
		t.Errorf("end = %+v, %v", got, ok)
	}
	ends.forget(key)
	if _, ok := ends.get(key); ok {
		t.Error("forgotten end still there")
	}
}
