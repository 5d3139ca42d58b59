package runner

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// The pool prunes a slot through the claim table: only one claimed at least the idle time
// ago, not held by a live runner nor mounted; a slot being pruned is not claimed
// meanwhile; a deletion that failed gives the slot back, one that went through takes
// it out of the table, and a later claim makes it again.
func TestHookSlotsPruneAndClaim(t *testing.T) {
	const idle = 10 * time.Minute
	ctx := context.Background()
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.UID = "pool-uid"
	runner := func(name string) *v1alpha1.Runner {
		return &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: map[string]string{v1alpha1.LabelPool: "k8s"}},
			Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}}
	}
	objs := []ctrl.Object{pool, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci-jobs"}}}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		objs = append(objs, runner(name))
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	h := &HookSlots{}
	r := &Reconciler{Client: c, APIReader: c, Clock: clk, Slots: h}
	claim := func(name string) string {
		t.Helper()
		s := &scope{runner: runner(name), pool: pool}
		if _, done, err := r.claimHookSlot(ctx, s); err != nil || !done {
			t.Fatalf("claim of %s: done %v, err %v", name, done, err)
		}
		return s.runner.Status.ContainerHook.ServiceAccount
	}
	prunable := func(live ...string) []int {
		t.Helper()
		alive := map[string]bool{}
		for _, n := range live {
			alive[n] = true
		}
		got, err := h.Prunable(ctx, c, pool, clk.Now(), idle, alive, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	slot := func(n int) string { return v1alpha1.ContainerHookSlotServiceAccountName("k8s", n) }

	if got := claim("a"); got != slot(0) {
		t.Fatalf("a got %s, want %s", got, slot(0))
	}
	if got := claim("b"); got != slot(1) {
		t.Fatalf("b got %s, want %s", got, slot(1))
	}
	clk.Step(idle - time.Minute)
	if got := prunable(); len(got) != 0 {
		t.Errorf("prunable %v %s after the claims, want none", got, idle-time.Minute)
	}
	clk.Step(time.Minute)
	if diff := cmp.Diff([]int{0}, prunable("b")); diff != "" {
		t.Errorf("prunable with b live (-want +got):\n%s", diff)
	}
	// a is gone, but slot 0 is being pruned: c gets a new slot.
	if err := c.Delete(ctx, runner("a")); err != nil {
		t.Fatal(err)
	}
	if got := claim("c"); got != slot(2) {
		t.Errorf("c got %s while slot 0 is being pruned, want %s", got, slot(2))
	}
	if got := prunable("b", "c"); len(got) != 0 {
		t.Errorf("prunable %v again while pruning, want none", got)
	}
	// The deletion failed: slot 0 is free again, and d takes it.
	h.Pruned(pool.UID, 0, false)
	if got := claim("d"); got != slot(0) {
		t.Errorf("d got %s, want the slot whose pruning failed, %s", got, slot(0))
	}
	// b is gone; slot 1 pruned for good: e makes it again.
	if err := c.Delete(ctx, runner("b")); err != nil {
		t.Fatal(err)
	}
	clk.Step(idle)
	if diff := cmp.Diff([]int{1}, prunable("c", "d")); diff != "" {
		t.Errorf("prunable with c and d live (-want +got):\n%s", diff)
	}
	if err := c.Delete(ctx, slotServiceAccount(pool, 1)); err != nil { // as the pool does
		t.Fatal(err)
	}
	h.Pruned(pool.UID, 1, true)
	if diff := cmp.Diff(map[int]string{0: "d", 2: "c"}, tableHolders(r, pool)); diff != "" {
		t.Errorf("table after slot 1 was pruned (-want +got):\n%s", diff)
	}
	if got := claim("e"); got != slot(1) {
		t.Errorf("e got %s, want slot 1 made again", got)
	}
}
