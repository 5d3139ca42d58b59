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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// A hook slot goes once it has been idle HookSlotIdle: no runner of the pool holds it, no
// pod has its ServiceAccount, and it was last claimed that long ago; its namespace with
// it. Held, mounted and recently claimed slots stay, and a pool looks again only after
// hookSlotPruneEvery.
func TestPruneHookSlots(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.UID = "prune-test"
	slot := func(n int, holder string, claimed time.Duration) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ci", Name: v1alpha1.ContainerHookSlotServiceAccountName("k8s", n),
			// The fake client keeps no managed fields: the claim is the creation here
			// (TestLastWritten covers managed fields).
			CreationTimestamp: metav1.NewTime(now.Add(-claimed)),
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelPool: "k8s", v1alpha1.LabelPoolNamespace: "ci",
				v1alpha1.LabelWorkflowPod: v1alpha1.ContainerHookSlot, runner.LabelHookSlot: strconv.Itoa(n), v1alpha1.LabelRunner: holder,
			},
		}}
	}
	slotNS := func(n int) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ContainerHookSlotNamespace(pool, n), Labels: map[string]string{
			v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelPool: "k8s", v1alpha1.LabelPoolNamespace: "ci",
			v1alpha1.LabelWorkflowPod: v1alpha1.ContainerHookSlot}}}
	}
	live := v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "live"}}
	ending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "ending", Labels: map[string]string{v1alpha1.LabelPool: "k8s"}},
		Spec: corev1.PodSpec{ServiceAccountName: v1alpha1.ContainerHookSlotServiceAccountName("k8s", 3)}}
	objs := []client.Object{pool,
		slot(0, "live", time.Hour), slotNS(0),
		slot(1, "gone", HookSlotIdle), slotNS(1),
		slot(2, "gone", HookSlotIdle-time.Minute), slotNS(2),
		slot(3, "ending", time.Hour), slotNS(3), ending,
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	clk := clocktesting.NewFakeClock(now)
	r := &Reconciler{Client: c, APIReader: c, Clock: clk}
	st := &state{pool: pool, runners: []v1alpha1.Runner{live}}
	t.Cleanup(func() { hookSlotsPruned.Delete(pool.UID) })

	res, err := r.pruneHookSlots(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if res != (reconcile.Result{RequeueAfter: hookSlotPruneEvery}) {
		t.Errorf("result %+v, want a look again after %s", res, hookSlotPruneEvery)
	}
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
	sas, namespaces := remaining()
	want := []string{"0", "2", "3"} // held, claimed 9 minutes ago, mounted by a pod
	if diff := cmp.Diff(want, sas); diff != "" {
		t.Errorf("slot ServiceAccounts left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, namespaces); diff != "" {
		t.Errorf("slot namespaces left (-want +got):\n%s", diff)
	}

	// Two minutes on slot 2 is idle long enough, but the pool looked a moment ago.
	clk.Step(2 * time.Minute)
	res, err = r.pruneHookSlots(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if res != (reconcile.Result{RequeueAfter: hookSlotPruneEvery - 2*time.Minute}) {
		t.Errorf("result %+v, want the rest of %s", res, hookSlotPruneEvery)
	}
	if sas, _ := remaining(); len(sas) != 3 {
		t.Errorf("slots left %v: the pool pruned again before %s", sas, hookSlotPruneEvery)
	}
	clk.Step(hookSlotPruneEvery)
	if _, err := r.pruneHookSlots(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if sas, _ := remaining(); !cmp.Equal(sas, []string{"0", "3"}) {
		t.Errorf("slots left %v, want 0 and 3 once slot 2 was idle %s", sas, HookSlotIdle)
	}
}

// An object was last written when its latest managed-fields entry says, else when it was
// created.
func TestLastWritten(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	if got := lastWritten(sa); !got.Equal(created) {
		t.Errorf("no managed fields: %v, want the creation %v", got, created)
	}
	sa.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "gantry", Time: ptr.To(metav1.NewTime(created.Add(3 * time.Minute)))},
		{Manager: "kubectl", Time: ptr.To(metav1.NewTime(created.Add(time.Minute)))},
		{Manager: "other"},
	}
	if got, want := lastWritten(sa), created.Add(3*time.Minute); !got.Equal(want) {
		t.Errorf("lastWritten = %v, want the latest entry %v", got, want)
	}
}
