package cluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runningPod creates a pod bound to node, owned by owner (so that a drain evicts it
// without --force), with labels, and waits until kwok runs it.
func runningPod(ctx context.Context, t *testing.T, c *Cluster, owner *corev1.ConfigMap, node, name string, labels map[string]string, finalizers ...string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels, Finalizers: finalizers,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest"}}},
	}
	if err := c.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pod %s never ran", name)
	return nil
}

func gone(ctx context.Context, c *Cluster, p *corev1.Pod) bool {
	got := &corev1.Pod{}
	err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), got)
	return apierrors.IsNotFound(err) || (err == nil && got.UID != p.UID)
}

// TestDisruptions plays each disruption on a real control plane: a drain held by a
// PodDisruptionBudget until the budget allows it (and one that times out), a spot
// reclaim, a kubelet eviction and an OOM kill, each read back as Kubernetes writes it.
func TestDisruptions(t *testing.T) {
	ctx, c := startForTest(t, 3*time.Minute, Options{Nodes: 3, PodStartDelay: 200 * time.Millisecond})
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner"}}
	if err := c.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	n0, n1, n2 := NodeName(0), NodeName(1), NodeName(2)

	// A drain evicts the idle pods at once and waits for the busy one, whose budget
	// allows no disruption, until the budget goes. (A budget over pods whose controller
	// has no scale subresource, such as a Runner, takes an integer minAvailable only:
	// kubernetes.io, "Specifying a Disruption Budget for your Application".)
	idle := runningPod(ctx, t, c, owner, n0, "idle", nil)
	busy := runningPod(ctx, t, c, owner, n0, "busy", map[string]string{"busy": "true"})
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "busy"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"busy": "true"}}}}
	if err := c.Client.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	waitPDBObserved(ctx, t, c, pdb)
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(2 * time.Second)
		released <- time.Now()
		if err := c.Client.Delete(ctx, pdb); err != nil {
			t.Error(err)
		}
	}()
	rec, err := c.Drain(ctx, n0, DrainOptions{RetryDelay: 200 * time.Millisecond, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("drain: %v (%+v)", err, rec)
	}
	releasedAt := <-released
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: n0}, node); err != nil || !node.Spec.Unschedulable {
		t.Errorf("node %s after its drain: unschedulable %v, %v; want cordoned", n0, node.Spec.Unschedulable, err)
	}
	if diff := cmp.Diff([]string{"busy"}, rec.WaitedFor()); diff != "" {
		t.Errorf("pods the drain waited for (-want +got):\n%s", diff)
	}
	for _, p := range rec.Pods {
		switch p.Name {
		case "idle":
			if p.Refused != 0 || p.Evicted.After(releasedAt) {
				t.Errorf("idle pod: refused %d, evicted at %s (budget gone at %s); want evicted at once", p.Refused, p.Evicted, releasedAt)
			}
		case "busy":
			if p.Evicted.Before(releasedAt) || p.Gone.Before(p.Evicted) {
				t.Errorf("busy pod: evicted at %s, gone at %s, budget gone at %s; want evicted after the budget went", p.Evicted, p.Gone, releasedAt)
			}
		}
	}
	if !gone(ctx, c, idle) || !gone(ctx, c, busy) || rec.Finished.Before(releasedAt) {
		t.Errorf("drain finished at %s (budget gone at %s) with pods left", rec.Finished, releasedAt)
	}
	if err := c.Cordon(ctx, n0, false); err != nil {
		t.Fatal(err)
	}

	// A drain whose budget never allows it gives up at its timeout.
	held := runningPod(ctx, t, c, owner, n1, "held", map[string]string{"busy": "true"})
	pdb = &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "held"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"busy": "true"}}}}
	if err := c.Client.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	waitPDBObserved(ctx, t, c, pdb)
	rec, err = c.Drain(ctx, n1, DrainOptions{RetryDelay: 200 * time.Millisecond, Timeout: time.Second})
	if err == nil || !rec.TimedOut || gone(ctx, c, held) || len(rec.Pods) != 1 || rec.Pods[0].Refused == 0 {
		t.Errorf("drain held by a budget past its timeout: %v, %+v; want timed out, the pod still there", err, rec)
	}
	if err := c.Client.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}

	// The kubelet evicts a pod under memory pressure: Failed, Evicted, the
	// DisruptionTarget condition, its container killed — and kwok leaves it so.
	evicted := runningPod(ctx, t, c, owner, n2, "evicted", nil)
	if err := c.EvictByKubelet(ctx, client.ObjectKeyFromObject(evicted), corev1.ResourceMemory); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(evicted), evicted); err != nil {
		t.Fatal(err)
	}
	cond := condition(evicted, corev1.DisruptionTarget)
	if evicted.Status.Phase != corev1.PodFailed || evicted.Status.Reason != EvictedReason || cond == nil ||
		cond.Reason != DisruptionTargetByKubelet || cond.Message != evicted.Status.Message || terminated(evicted) != "Error 137" {
		t.Errorf("pod evicted by the kubelet: %+v", evicted.Status)
	}

	// The OOM killer ends the runner container.
	oom := runningPod(ctx, t, c, owner, n2, "oom", nil)
	if err := c.OOMKill(ctx, client.ObjectKeyFromObject(oom), "runner"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(oom), oom); err != nil {
		t.Fatal(err)
	}
	if oom.Status.Phase != corev1.PodFailed || terminated(oom) != "OOMKilled 137" || oom.Status.Reason != "" {
		t.Errorf("OOM-killed pod: %+v", oom.Status)
	}

	// A spot reclaim: the node and its pods go at once, each marked as the pod
	// garbage collector marks them (a finalizer holds one to read it).
	kept := runningPod(ctx, t, c, owner, n2, "kept", nil, "sim.gantry.dev/test")
	spot := runningPod(ctx, t, c, owner, n2, "spot", nil)
	if _, err := c.SpotReclaim(ctx, n2); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: n2}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("reclaimed node %s: %v, want it deleted", n2, err)
	}
	if !gone(ctx, c, spot) {
		t.Error("a pod of the reclaimed node is still there")
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(kept), kept); err != nil {
		t.Fatal(err)
	}
	if cond := condition(kept, corev1.DisruptionTarget); kept.DeletionTimestamp == nil || kept.Status.Phase != corev1.PodFailed ||
		cond == nil || cond.Reason != DisruptionTargetByPodGC || cond.Message != "PodGC: node no longer exists" {
		t.Errorf("pod of the reclaimed node: deleting %v, status %+v", kept.DeletionTimestamp, kept.Status)
	}
	patch := client.MergeFrom(kept.DeepCopy())
	kept.Finalizers = nil
	if err := c.Client.Patch(ctx, kept, patch); err != nil {
		t.Fatal(err)
	}
}

// waitPDBObserved waits until the disruption controller has computed the budget's
// status, which the eviction API reads.
func waitPDBObserved(ctx context.Context, t *testing.T, c *Cluster, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	for ctx.Err() == nil {
		got := &policyv1.PodDisruptionBudget{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pdb), got); err == nil && got.Status.ObservedGeneration >= got.Generation && got.Status.ExpectedPods > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the disruption controller never observed budget %s", pdb.Name)
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// terminated is "REASON EXITCODE" of the pod's first container, "" unless terminated.
func terminated(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
		return ""
	}
	t := p.Status.ContainerStatuses[0].State.Terminated
	return t.Reason + " " + strconv.Itoa(int(t.ExitCode))
}
