package nodes

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// realNode is a node as a kubelet of a real cluster reports it: labels of a cloud node
// group, kubelet and CSI annotations, managed fields, taints, four addresses, capacity
// and allocatable, node info, five conditions and fifty images.
func realNode(i int) *corev1.Node {
	now := metav1.NewTime(time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC))
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/250, i%250), UID: "6c0f2a6e-55f4-4b8e-9a1e-2d2b0f1f6d3c",
			ResourceVersion: "123456789", CreationTimestamp: now,
			Labels: map[string]string{
				"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": fmt.Sprintf("ip-10-0-%d-%d", i/250, i%250),
				"node.kubernetes.io/instance-type": "m6i.4xlarge", "topology.kubernetes.io/region": "eu-west-1",
				"topology.kubernetes.io/zone": "eu-west-1a", "karpenter.sh/nodepool": "ci-runners", "karpenter.sh/capacity-type": "spot",
				"eks.amazonaws.com/nodegroup": "ci", "node.kubernetes.io/lifecycle": "spot",
			},
			Annotations: map[string]string{
				"alpha.kubernetes.io/provided-node-ip":                   "10.0.1.2",
				"csi.volume.kubernetes.io/nodeid":                        `{"ebs.csi.aws.com":"i-0123456789abcdef0","efs.csi.aws.com":"i-0123456789abcdef0"}`,
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"karpenter.sh/nodepool-hash":                             "12345678901234567890",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(string(make([]byte, 2400))), Subresource: "status"},
				{Manager: "karpenter", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(string(make([]byte, 600)))},
			},
		},
		Spec: corev1.NodeSpec{
			PodCIDR: "10.1.2.0/24", PodCIDRs: []string{"10.1.2.0/24"}, ProviderID: "aws:///eu-west-1a/i-0123456789abcdef0",
			Taints: []corev1.Taint{{Key: "ci", Value: "runners", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
				corev1.ResourcePods: resource.MustParse("234"), corev1.ResourceEphemeralStorage: resource.MustParse("200Gi"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("15890m"), corev1.ResourceMemory: resource.MustParse("62Gi"),
				corev1.ResourcePods: resource.MustParse("234"), corev1.ResourceEphemeralStorage: resource.MustParse("180Gi"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.0.1.2"}, {Type: corev1.NodeHostName, Address: "ip-10-0-1-2.eu-west-1.compute.internal"},
				{Type: corev1.NodeInternalDNS, Address: "ip-10-0-1-2.eu-west-1.compute.internal"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.7"},
			},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: "ec2e6b7c0a2d4b6f8e1a3c5d7f9b1d3e", SystemUUID: "ec2e6b7c-0a2d-4b6f-8e1a-3c5d7f9b1d3e", BootID: "b7c0a2d4-b6f8-e1a3-c5d7-f9b1d3e5a7c9",
				KernelVersion: "6.1.119-129.201.amzn2023.x86_64", OSImage: "Amazon Linux 2023.6.20241212", ContainerRuntimeVersion: "containerd://1.7.23",
				KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64",
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		},
	}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady, "KernelDeadlock"} {
		status := corev1.ConditionFalse
		if t == corev1.NodeReady {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: t, Status: status, LastHeartbeatTime: now, LastTransitionTime: now,
			Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available",
		})
	}
	for j := range 50 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("ghcr.io/actions/actions-runner@sha256:%064d", j),
				fmt.Sprintf("ghcr.io/actions/actions-runner:2.%d.0", 300+j),
			},
			SizeBytes: 512 << 20,
		})
	}
	return n
}

func TestSlimKeepsWhatGantryReads(t *testing.T) {
	full := realNode(7)
	full.Spec.Unschedulable = true
	got, err := Slim(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: full.Name, UID: full.UID, ResourceVersion: full.ResourceVersion, CreationTimestamp: full.CreationTimestamp,
			Labels: full.Labels,
		},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: full.Spec.Taints},
	}
	for _, c := range full.Status.Conditions {
		want.Status.Conditions = append(want.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Slim (-want +got):\n%s", diff)
	}
	if !Ready(got.(*corev1.Node)) {
		t.Error("Ready(slim) = false, want true: the Ready condition must survive")
	}
}

func TestSlimPassesOtherObjects(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"a": "b"}}}
	got, err := Slim(pod)
	if err != nil || got != pod {
		t.Errorf("Slim(pod) = %v, %v; want the same pod, nil", got, err)
	}
}

// BenchmarkSlim reports what the node informer holds per node, full and slimmed, for
// 5,000 nodes of realNode's shape (bytes of live heap per node after a GC).
func BenchmarkSlim(b *testing.B) {
	const count = 5000
	held := func(slim bool) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		kept := make([]any, count)
		for i := range kept {
			n := realNode(i)
			if slim {
				kept[i], _ = Slim(n)
			} else {
				kept[i] = n
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(kept)
		return float64(after.HeapAlloc-before.HeapAlloc) / count
	}
	var full, slim float64
	for b.Loop() {
		full, slim = held(false), held(true)
	}
	b.ReportMetric(full, "full-B/node")
	b.ReportMetric(slim, "slim-B/node")
	b.ReportMetric(slim*count/(1<<20), "slim-MiB/5000nodes")
}

func TestChanged(t *testing.T) {
	base := func() *corev1.Node {
		n, _ := Slim(realNode(1))
		return n.(*corev1.Node)
	}
	for _, tt := range []struct {
		name string
		edit func(n *corev1.Node)
		want bool
	}{
		{"a status report: heartbeat and resourceVersion only", func(n *corev1.Node) {
			n.ResourceVersion = "2"
			n.Status.Conditions[3].LastTransitionTime = metav1.NewTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
		}, false},
		{"cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		{"a taint added", func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule})
		}, true},
		{"a taint's effect changed", func(n *corev1.Node) { n.Spec.Taints[0].Effect = corev1.TaintEffectNoExecute }, true},
		{"a label changed", func(n *corev1.Node) { n.Labels = map[string]string{"kubernetes.io/arch": "arm64"} }, true},
		{"NotReady", func(n *corev1.Node) { n.Status.Conditions[3].Status = corev1.ConditionFalse }, true},
		{"deleted", func(n *corev1.Node) { now := metav1.Now(); n.DeletionTimestamp = &now }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, cur := base(), base()
			cur.Labels = maps.Clone(old.Labels)
			cur.Spec.Taints = slices.Clone(old.Spec.Taints)
			cur.Status.Conditions = slices.Clone(old.Status.Conditions)
			tt.edit(cur)
			if got := Changed(old, cur); got != tt.want {
				t.Errorf("Changed = %v, want %v", got, tt.want)
			}
		})
	}
}
