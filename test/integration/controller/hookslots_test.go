package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// A controller that starts (or takes the lead) learns who holds each hook slot from the
// API server, since a claim is made in the leader's memory: a runner whose pod uses a
// slot keeps it, and a new runner gets another. A slot whose runner it cannot tell —
// here a Runner removed while no controller ran, its hook's registry Secret left — is
// swept before a new runner's pod is made there: the new runner's hook never sees the
// Secret.
func TestRestartedControllerKeepsHookSlotsApart(t *testing.T) {
	installContainerHookFence(t)
	w := newWorld(t).inNamespace() // a namespace only this test's managers watch
	jobs := jobsNamespace(t)
	opts := stack.ManagerOptions(w.ns)
	opts.Namespaces = append(append(opts.Namespaces, jobs), slotNamespaces(t, w.ns, "k8s", jobs)...)
	first := startGantryWith(t, opts)
	w.create(w.pool("k8s").MinIdle(2).KubernetesMode(jobs).Obj())
	pods := w.boundRunnerPods("k8s", 2, "node-a")
	a, b := pods[0], pods[1]
	nsA, nsB := w.hookNamespace(a), w.hookNamespace(b)
	if nsA == nsB {
		t.Fatalf("runners %s and %s share the hook namespace %s", a, b, nsA)
	}
	w.hookBound(a, nsA)
	secret := hookSecret(a, "aaaabbbb")
	if _, err := as(t, w.runnerToken(a)).CoreV1().Secrets(nsA).Create(w.ctx(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first.stop(t)

	// Runner a goes while no controller runs, its finalizer taken off by hand: what its
	// hook made stays, and nothing says where. (No garbage collector runs here: its pod
	// is deleted too.)
	rn, err := w.getRunner(a)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(rn.DeepCopy())
	rn.Finalizers = nil
	if err := w.c.Patch(w.ctx(), rn, patch); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(w.ctx(), rn); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	pa, err := w.getPod(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(w.ctx(), pa, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}

	startGantryWith(t, opts)
	var c string
	w.eventually("a new runner pod in a's place", func() (bool, error) {
		var list corev1.PodList
		if err := w.c.List(w.ctx(), &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: "k8s"}); err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if !slices.Contains(pods, p.Name) {
				c = p.Name
			}
		}
		return c != "", nil
	})
	// Checked at once: the sweep comes before the claim, and the claim before the pod.
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: nsA, Name: secret.Name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("runner %s's registry Secret in %s: err %v; want it deleted before another runner's pod is made", a, nsA, err)
	}
	nsC := w.hookNamespace(c)
	if nsC == nsB {
		t.Fatalf("the restarted controller gave runner %s the hook namespace %s of runner %s, whose pod still uses it", c, nsB, b)
	}
	if nsC != nsA {
		t.Errorf("runner %s got the hook namespace %s; want %s, the one slot free, reused", c, nsC, nsA)
	}
	if got := w.hookNamespace(b); got != nsB {
		t.Errorf("runner %s's hook namespace is %s after the restart, want %s", b, got, nsB)
	}
}
