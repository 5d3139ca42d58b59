package runnerpool

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// A hook slot goes once it has been idle HookSlotIdle: no runner of the pool holds it, no
// pod has its ServiceAccount, and it was last claimed (here: loaded into the claim
// table) that long ago; its namespace with it. Held and mounted slots stay, a process
// that just loaded the pool's slots deletes none, and a pool looks again only after
// hookSlotPruneEvery.
func TestPruneHookSlots(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.UID = "prune-test"
	slotLabels := func(n int) map[string]string {
		return map[string]string{
			v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelPool: "k8s", v1alpha1.LabelPoolNamespace: "ci",
			v1alpha1.LabelWorkflowPod: v1alpha1.ContainerHookSlot, runner.LabelHookSlot: strconv.Itoa(n),
		}
	}
	slot := func(n int) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ci", Name: v1alpha1.ContainerHookSlotServiceAccountName("k8s", n), Labels: slotLabels(n)}}
	}
	slotNS := func(n int) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ContainerHookSlotNamespace(pool, n), Labels: slotLabels(n)}}
	}
	live := v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "live", Labels: map[string]string{v1alpha1.LabelPool: "k8s"}},
		Spec: v1alpha1.RunnerSpec{PoolName: "k8s"},
		Status: v1alpha1.RunnerStatus{ContainerHook: &v1alpha1.RunnerContainerHook{
			Namespace: v1alpha1.ContainerHookSlotNamespace(pool, 0), ServiceAccount: v1alpha1.ContainerHookSlotServiceAccountName("k8s", 0)}}}
	ending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "ending", Labels: map[string]string{v1alpha1.LabelPool: "k8s"}},
		Spec: corev1.PodSpec{ServiceAccountName: v1alpha1.ContainerHookSlotServiceAccountName("k8s", 3)}}
	objs := []client.Object{pool, live.DeepCopy(), ending, slot(0), slotNS(0), slot(1), slotNS(1), slot(2), slotNS(2), slot(3), slotNS(3)}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.Runner{}).Build()
	clk := clocktesting.NewFakeClock(now)
	r := &Reconciler{Client: c, APIReader: c, Clock: clk, Slots: &runner.HookSlots{}}
	st := &state{pool: pool, runners: []v1alpha1.Runner{live}}
	t.Cleanup(func() { hookSlotsPruned.Delete(pool.UID) })
	remaining := func() (sas []string, namespaces []string) {
		for n := range 4 {
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ci", Name: v1alpha1.ContainerHookSlotServiceAccountName("k8s", n)}, &corev1.ServiceAccount{}); err == nil {
				sas = append(sas, strconv.Itoa(n))
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Name: v1alpha1.ContainerHookSlotNamespace(pool, n)}, &corev1.Namespace{}); err == nil {
				namespaces = append(namespaces, strconv.Itoa(n))
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		return sas, namespaces
	}
	prune := func(wantRequeue time.Duration, wantLeft ...string) {
		t.Helper()
		res, err := r.pruneHookSlots(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		if res != (reconcile.Result{RequeueAfter: wantRequeue}) {
			t.Errorf("result %+v, want a look again after %s", res, wantRequeue)
		}
		sas, namespaces := remaining()
		if diff := cmp.Diff(wantLeft, sas); diff != "" {
			t.Errorf("slot ServiceAccounts left (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantLeft, namespaces); diff != "" {
			t.Errorf("slot namespaces left (-want +got):\n%s", diff)
		}
	}

	// Loaded now: none idle yet.
	prune(hookSlotPruneEvery, "0", "1", "2", "3")
	// The pool looked a moment ago.
	clk.Step(hookSlotPruneEvery - time.Minute)
	prune(time.Minute, "0", "1", "2", "3")
	// It looks, and nothing has been idle HookSlotIdle yet.
	clk.Step(time.Minute)
	prune(hookSlotPruneEvery, "0", "1", "2", "3")
	clk.Step(hookSlotPruneEvery)
	// Slot 0 is held by a live runner, slot 3 mounted by a pod; 1 and 2 go.
	prune(hookSlotPruneEvery, "0", "3")
}
