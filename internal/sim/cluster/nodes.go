package cluster

import (
	"context"
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// NodeLoss is how a node is lost.
type NodeLoss string

const (
	// NodeLossHeartbeat stops the node's heartbeat, as when a machine dies or is cut
	// off: the Node object stays, kube-controller-manager marks it NotReady after the
	// grace period and taints it unreachable, its pods are evicted once their
	// toleration ends — and stay Terminating, since no kubelet confirms anything.
	NodeLossHeartbeat NodeLoss = "heartbeat"
	// NodeLossDelete deletes the Node object, as a cloud provider's node controller
	// does for a vanished VM; kube-controller-manager's pod GC then deletes its pods.
	NodeLossDelete NodeLoss = "delete"
)

// lostHolder is the lease holder that takes a lost node's lease away from kwok.
const lostHolder = "gantry-sim-node-lost"

// LoseNode loses node name the way how says and returns the Gantry runner pods that
// were on it. For NodeLossHeartbeat it takes the node's lease from kwok for a day: kwok
// then stops renewing it, stops updating the node, and leaves its pods alone.
func (c *Cluster) LoseNode(ctx context.Context, name string, how NodeLoss) ([]corev1.Pod, error) {
	pods, err := c.RunnerPodsOn(ctx, name)
	if err != nil {
		return nil, err
	}
	switch how {
	case NodeLossDelete:
		err := c.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if err != nil {
			return nil, fmt.Errorf("deleting node %s: %w", name, err)
		}
	case NodeLossHeartbeat, "":
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			lease := &coordinationv1.Lease{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, lease); err != nil {
				return err
			}
			holder, day := lostHolder, int32(24*3600)
			now := metav1.NewMicroTime(time.Now())
			lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &holder, &day, &now
			return c.Client.Update(ctx, lease)
		})
		if err != nil {
			return nil, fmt.Errorf("stopping the heartbeat of node %s: %w", name, err)
		}
	default:
		return nil, fmt.Errorf("unknown node loss %q: use %q or %q", how, NodeLossHeartbeat, NodeLossDelete)
	}
	return pods, nil
}

// RunnerPodsOn lists the Gantry runner pods bound to node name, in every namespace.
func (c *Cluster) RunnerPodsOn(ctx context.Context, name string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := c.Client.List(ctx, &pods, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue},
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", name)})
	if err != nil {
		return nil, fmt.Errorf("listing the runner pods on node %s: %w", name, err)
	}
	return pods.Items, nil
}

// BusiestNode is the Ready node with the most running Gantry runner pods (the lowest
// name among equals), or an error when there is no node.
func (c *Cluster) BusiestNode(ctx context.Context) (string, error) {
	var nodes corev1.NodeList
	if err := c.Client.List(ctx, &nodes); err != nil {
		return "", err
	}
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}); err != nil {
		return "", err
	}
	count := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			count[p.Spec.NodeName]++
		}
	}
	var names []string
	for _, n := range nodes.Items {
		if nodeReady(&n) {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return "", apierrors.NewNotFound(corev1.Resource("nodes"), "any Ready node")
	}
	sort.Slice(names, func(i, j int) bool {
		if count[names[i]] != count[names[j]] {
			return count[names[i]] > count[names[j]]
		}
		return names[i] < names[j]
	})
	return names[0], nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// taintedNotReady reports whether the node still has the taint kube-controller-manager
// puts on a node that is not (or not yet) Ready or is unreachable.
func taintedNotReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return true
		}
	}
	return false
}
