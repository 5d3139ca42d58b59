package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testenv"
)

func TestClusterRunsAndCompletesAPod(t *testing.T) {
	ctx, c := startForTest(t, 2*time.Minute, Options{Nodes: 2, PodStartDelay: 500 * time.Millisecond})

	// Gantry's CRDs are installed.
	if err := c.Client.List(ctx, &v1alpha1.RunnerPoolList{}); err != nil {
		t.Fatalf("listing RunnerPools: %v", err)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "runner-1"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest"}},
		},
	}
	created := time.Now()
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitPhase := func(want corev1.PodPhase) *corev1.Pod {
		t.Helper()
		for ctx.Err() == nil {
			got := &corev1.Pod{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase == want {
				return got
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("pod never reached %s", want)
		return nil
	}
	// Admitted as in a real cluster: the namespace's default ServiceAccount and its token.
	if pod.Spec.ServiceAccountName != "default" || tokenVolumes(pod) != 1 {
		t.Errorf("pod admitted with ServiceAccount %q and %d token volumes; want default and 1", pod.Spec.ServiceAccountName, tokenVolumes(pod))
	}
	optOut := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "no-token"},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest"}}},
	}
	if err := c.Client.Create(ctx, optOut); err != nil {
		t.Fatal(err)
	}
	if n := tokenVolumes(optOut); n != 0 {
		t.Errorf("a pod with automountServiceAccountToken: false was given %d token volumes", n)
	}
	// A pod with an image of the registry that never answers waits in
	// ImagePullBackOff; its other containers run.
	unpullable := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unpullable"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{
			{Name: "job", Image: UnpullableRegistry + "/node:22"}, {Name: "postgres", Image: "postgres:17"}}},
	}
	if err := c.Client.Create(ctx, unpullable); err != nil {
		t.Fatal(err)
	}
	running := waitPhase(corev1.PodRunning)
	tookRunning := time.Since(created)
	type state struct{ Name, Waiting, Message string }
	var got []state
	var phase corev1.PodPhase
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p := &corev1.Pod{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(unpullable), p); err != nil {
			t.Fatal(err)
		}
		got, phase = nil, p.Status.Phase
		for _, cs := range p.Status.ContainerStatuses {
			s := state{Name: cs.Name}
			if w := cs.State.Waiting; w != nil {
				s.Waiting, s.Message = w.Reason, w.Message
			}
			got = append(got, s)
		}
		if len(got) > 0 {
			break
		}
	}
	want := []state{{Name: "job", Waiting: "ImagePullBackOff",
		Message: `Back-off pulling image "unpullable.invalid/node:22": ErrImagePull: failed to resolve reference: lookup unpullable.invalid: no such host`}, {Name: "postgres"}}
	if diff := cmp.Diff(want, got); diff != "" || phase != corev1.PodPending {
		t.Errorf("pod with an unpullable image: phase %s, container states (-want +got):\n%s", phase, diff)
	}
	if running.Spec.NodeName == "" {
		t.Error("a Running pod was never scheduled")
	}
	if took := tookRunning; took < 500*time.Millisecond {
		t.Errorf("pod Running after %s, before the configured start delay", took)
	}
	t.Logf("pod scheduled on %s and Running after %s", running.Spec.NodeName, tookRunning.Round(time.Millisecond))

	patch := client.MergeFrom(running.DeepCopy())
	running.Annotations = map[string]string{AnnotationExitCode: "0"}
	if err := c.Client.Patch(ctx, running, patch); err != nil {
		t.Fatal(err)
	}
	done := waitPhase(corev1.PodSucceeded)
	if cs := done.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Errorf("container statuses after exit: %+v", cs)
	}

	if err := c.Client.Delete(ctx, done); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the deleted pod was never removed")
}

func tokenVolumes(p *corev1.Pod) int {
	n := 0
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				n++
			}
		}
	}
	return n
}

// startForTest starts a cluster of opts from the cached binaries, in the test's
// temporary directory, with a context of timeout for the test's calls; both end with
// the test.
func startForTest(t *testing.T, timeout time.Duration, opts Options) (context.Context, *Cluster) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if opts.BinDir, err = testenv.AssetsDir(root); err != nil {
		t.Fatal(err)
	}
	opts.WorkDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
	})
	return ctx, c
}

// Each fake node is registered as a kubelet registers its node — OS, architecture and
// hostname labels, node info — its architecture taken in turn from NodeArchs; a cluster of
// more than 100 nodes gets a kube-controller-manager fast enough to make them schedulable.
func TestFakeNodes(t *testing.T) {
	opts := Options{Nodes: 101, NodeArchs: []string{"amd64", "arm64"}}
	opts.defaults()
	c := &Cluster{opts: opts}
	type shape struct{ OS, Arch, Hostname, InfoOS, InfoArch string }
	var got []shape
	for i := range 3 {
		n := c.node(i, corev1.ResourceList{})
		got = append(got, shape{n.Labels[corev1.LabelOSStable], n.Labels[corev1.LabelArchStable], n.Labels[corev1.LabelHostname],
			n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture})
	}
	want := []shape{
		{"linux", "amd64", "kwok-node-0", "linux", "amd64"},
		{"linux", "arm64", "kwok-node-1", "linux", "arm64"},
		{"linux", "amd64", "kwok-node-2", "linux", "amd64"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fake nodes (-want +got):\n%s", diff)
	}
	if opts.ControllerManagerQPS != 200 {
		t.Errorf("kube-controller-manager's QPS with 101 nodes = %d, want 200", opts.ControllerManagerQPS)
	}
	small := Options{}
	small.defaults()
	if small.ControllerManagerQPS != 0 || len(small.NodeArchs) != 1 || small.NodeArchs[0] != "amd64" {
		t.Errorf("defaults of 10 nodes: QPS %d (want its own, 0), archs %v (want amd64)", small.ControllerManagerQPS, small.NodeArchs)
	}
}
