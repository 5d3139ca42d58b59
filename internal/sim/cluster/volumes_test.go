package cluster

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestLocalVolumesPinPods: a claim of the sim's StorageClass waits for its first pod;
// kube-scheduler picks a node, the provisioner makes a volume there, kube-controller-
// manager binds it, the pod runs; the claim's next pod lands on the same node; the
// volume goes with its claim, and stays when its node is deleted.
func TestLocalVolumesPinPods(t *testing.T) {
	ctx, c := startForTest(t, 3*time.Minute, Options{Nodes: 3, PodStartDelay: 200 * time.Millisecond})

	claim := func(name string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To(StorageClass),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if err := c.Client.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		return pvc
	}
	podOf := func(name, claim string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest",
					VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}}},
				Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			},
		}
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	waitRunning := func(p *corev1.Pod) *corev1.Pod {
		t.Helper()
		for ctx.Err() == nil {
			got := &corev1.Pod{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase == corev1.PodRunning {
				return got
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("pod %s never ran", p.Name)
		return nil
	}
	waitGone := func(obj client.Object) {
		t.Helper()
		for ctx.Err() == nil {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s was never removed", obj.GetName())
	}

	pvc := claim("cache-0")
	time.Sleep(time.Second)
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Fatalf("a claim without a pod is %s with volume %q; want Pending, none (WaitForFirstConsumer)", pvc.Status.Phase, pvc.Spec.VolumeName)
	}

	first := waitRunning(podOf("first", pvc.Name))
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim %s while its pod runs; want Bound", pvc.Status.Phase)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	affinity := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values
	if len(affinity) != 1 || affinity[0] != first.Spec.NodeName {
		t.Errorf("volume pinned to %v; want the first pod's node %s", affinity, first.Spec.NodeName)
	}
	t.Logf("claim bound to %s on %s", pv.Name, first.Spec.NodeName)

	// Every later pod of the claim lands on its node.
	if err := c.Client.Delete(ctx, first, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitGone(first)
	for i, name := range []string{"second", "third"} {
		p := waitRunning(podOf(name, pvc.Name))
		if p.Spec.NodeName != first.Spec.NodeName {
			t.Errorf("pod %d of the claim ran on %s; want %s", i+2, p.Spec.NodeName, first.Spec.NodeName)
		}
		if err := c.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		waitGone(p)
	}

	// Its node cordoned, a pod of the claim cannot be placed, and kube-scheduler says
	// why: the volume's node affinity.
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: first.Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	cordon := client.MergeFrom(node.DeepCopy())
	node.Spec.Unschedulable = true
	if err := c.Client.Patch(ctx, node, cordon); err != nil {
		t.Fatal(err)
	}
	// kube-scheduler learns of the cordon from its node watch: a pod created before
	// that event reaches it is still bound to the node. Such a pod is deleted and made
	// again, until the scheduler has seen the cordon.
	blocked := podOf("blocked", pvc.Name)
	why := ""
	for ctx.Err() == nil && why == "" {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(blocked), blocked); err != nil {
			t.Fatal(err)
		}
		if blocked.Spec.NodeName != "" {
			t.Logf("pod bound to %s before kube-scheduler saw the cordon; making it again", blocked.Spec.NodeName)
			if err := c.Client.Delete(ctx, blocked, client.GracePeriodSeconds(0)); err != nil {
				t.Fatal(err)
			}
			waitGone(blocked)
			blocked = podOf("blocked", pvc.Name)
			continue
		}
		for _, cond := range blocked.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				why = cond.Message
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !VolumeBlocked(why) {
		t.Errorf("a pod of a claim pinned to a cordoned node is unschedulable because %q (bound to %q, %s); want the volume's node affinity",
			why, blocked.Spec.NodeName, blocked.Status.Phase)
	}
	t.Logf("pinned to a cordoned node: %s", why)
	if err := c.Client.Delete(ctx, blocked, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitGone(blocked)

	// Reclaim: the claim gone, its volume goes.
	if err := c.Client.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	waitGone(pvc)
	waitGone(pv)

	// A deleted node's volume stays: its claim's owner decides.
	other := claim("cache-1")
	p := waitRunning(podOf("fourth", other.Name))
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: p.Spec.NodeName}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := c.Client.Get(ctx, client.ObjectKey{Name: other.Spec.VolumeName}, &corev1.PersistentVolume{}); err != nil {
		t.Errorf("the volume of a deleted node's claim: %v; want it kept", err)
	}
}
