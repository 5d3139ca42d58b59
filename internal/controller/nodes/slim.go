package nodes

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Slim is the Node informer's transform (cache.ByObject.Transform): it keeps of a node
// what Gantry reads and drops the rest before the node enters the cache. Kept:
//   - name, UID, resourceVersion, generation, creation and deletion timestamps, and
//     labels (the platform's OS and architecture, a pod's node selector and affinity);
//   - spec.unschedulable (the cordon) and spec.taints (what a pod must tolerate, and the
//     taints autoscalers put on a node they are about to remove);
//   - status.conditions, each without its message and reason (Ready, and the pressure
//     conditions under which the kubelet evicts).
//
// Dropped: annotations (nothing of Gantry reads them; autoscalers mark a node they
// remove with a taint), managedFields, owner references, spec.podCIDR(s), providerID and config
// source, and the status's capacity, allocatable, addresses, daemon endpoints, node
// info, images (the bulk of a node: up to 50 image names and digests), volumes and
// features. A full node of a real cluster is 5–15 KB as the informer would hold it;
// BenchmarkSlim measures what is kept.
//
// Anything that is not a *corev1.Node passes unchanged (the informer's tombstones).
func Slim(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              n.Name,
			UID:               n.UID,
			ResourceVersion:   n.ResourceVersion,
			Generation:        n.Generation,
			CreationTimestamp: n.CreationTimestamp,
			DeletionTimestamp: n.DeletionTimestamp,
			Labels:            n.Labels,
		},
		Spec: corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
	}
	if len(n.Status.Conditions) > 0 {
		out.Status.Conditions = make([]corev1.NodeCondition, len(n.Status.Conditions))
		for i, c := range n.Status.Conditions {
			out.Status.Conditions[i] = corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}
		}
	}
	return out, nil
}

// Ready says whether the node's Ready condition is True.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Changed says whether a node update changed anything Gantry decides on: its labels,
// cordon, taints, deletion, or the status of a condition. Most node updates are the
// kubelet's status reports, which change none of these once slimmed.
func Changed(old, cur *corev1.Node) bool {
	if old.Spec.Unschedulable != cur.Spec.Unschedulable || !maps.Equal(old.Labels, cur.Labels) ||
		old.DeletionTimestamp.IsZero() != cur.DeletionTimestamp.IsZero() ||
		!slices.EqualFunc(old.Spec.Taints, cur.Spec.Taints, func(a, b corev1.Taint) bool { return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect }) ||
		len(old.Status.Conditions) != len(cur.Status.Conditions) {
		return true
	}
	for i, c := range old.Status.Conditions {
		if d := cur.Status.Conditions[i]; c.Type != d.Type || c.Status != d.Status {
			return true
		}
	}
	return false
}
