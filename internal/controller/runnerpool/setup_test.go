package runnerpool

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Events of a pool's Runners reach its queue once the wait is over, as one item however
// many came within it; Runners no RunnerPool controls are not its business.
func TestRunnerEventsWakeTheOwningPoolOnceAfterTheWait(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clk})
	defer q.ShutDown()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{v1alpha1.GroupVersion})
	mapper.Add(v1alpha1.GroupVersion.WithKind("RunnerPool"), meta.RESTScopeNamespace)
	h := enqueueAfter{runnersPool(scheme, mapper), settle}
	ctx := context.Background()
	runner := func(name, apiVersion, kind, owner string) *v1alpha1.Runner {
		r := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name}}
		if kind != "" {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, UID: "u", Controller: ptr.To(true)}}
		}
		return r
	}
	gv := v1alpha1.GroupVersion.String()
	a, b := runner("linux-a", gv, "RunnerPool", "linux"), runner("linux-b", gv, "RunnerPool", "linux")
	h.Create(ctx, event.CreateEvent{Object: a}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: a, ObjectNew: a}, q)
	h.Delete(ctx, event.DeleteEvent{Object: b}, q)
	h.Create(ctx, event.CreateEvent{Object: runner("orphan", "", "", "")}, q)
	h.Create(ctx, event.CreateEvent{Object: runner("foreign", "example.com/v1", "RunnerPool", "other")}, q)
	h.Create(ctx, event.CreateEvent{Object: runner("owned-by-a-job", "batch/v1", "Job", "other")}, q)

	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for q.Len() != want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if q.Len() != want {
			t.Fatalf("queue holds %d, want %d", q.Len(), want)
		}
	}
	clk.Step(settle - time.Millisecond)
	time.Sleep(50 * time.Millisecond) // let the queue's timer loop see the clock
	waitFor(0)
	clk.Step(time.Millisecond)
	// The queue's loop reads the clock and then sets its timer from that reading: a
	// step between the two (a busy machine) leaves the timer set past the wait. The
	// clock moves on until the item comes, so the test fails only if it never does;
	// nothing came before the wait, checked above.
	for deadline := time.Now().Add(5 * time.Second); q.Len() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		clk.Step(10 * time.Millisecond)
	}
	waitFor(1)
	got, _ := q.Get()
	if want := (reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ci", Name: "linux"}}); got != want {
		t.Errorf("queued %v, want %v", got, want)
	}
	q.Done(got)
	clk.Step(time.Hour)
	time.Sleep(50 * time.Millisecond)
	waitFor(0)
}

// A Runner the informer saw, made or already gone, is no longer expected: a Runner
// made and deleted between two reconciles of its pool is not counted as on its way.
func TestRunnerSeenByTheInformerMeetsItsExpectation(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ci", Name: "linux"}
	r := &Reconciler{}
	r.expectations.expect(key, "linux-a", now)
	r.expectations.expect(key, "linux-b", now)
	r.expectations.expect(key, "linux-c", now)
	r.runnerSeen(seenRunner("linux-a", "linux"))
	r.runnerSeen(seenRunner("linux-b", "other")) // another pool's Runner of the same name
	if got := r.expectations.pending(key, r.expectations.mark(), nil, now); got != 2 {
		t.Errorf("after one Runner seen, %d expected, want 2", got)
	}
	r.runnerSeen(seenRunner("linux-b", "linux"))
	r.runnerSeen(seenRunner("linux-c", "linux"))
	if got := r.expectations.pending(key, r.expectations.mark(), nil, now); got != 0 {
		t.Errorf("after every Runner seen, %d expected, want 0", got)
	}
}

// A Runner the informer shows after the reconcile listed the pool's Runners is still
// counted as on its way by that reconcile: dropped when seen, it was counted nowhere,
// and the pool made another.
func TestRunnerSeenAfterTheListStaysExpected(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ci", Name: "linux"}
	r := &Reconciler{}
	r.expectations.expect(key, "linux-a", now)
	r.expectations.expect(key, "linux-b", now)

	mark := r.expectations.mark()
	// The reconcile lists here: neither Runner is in the cache yet. Then the informer
	// adds linux-a and says so, before the reconcile counts.
	r.runnerSeen(seenRunner("linux-a", "linux"))
	if got := r.expectations.pending(key, mark, nil, now); got != 2 {
		t.Fatalf("a Runner seen after the list: %d expected, want 2 (it is in no count)", got)
	}

	// The next reconcile's list shows linux-a.
	mark = r.expectations.mark()
	if got := r.expectations.pending(key, mark, []v1alpha1.Runner{*seenRunner("linux-a", "linux")}, now); got != 1 {
		t.Fatalf("linux-a listed: %d expected, want 1 (linux-b)", got)
	}

	// linux-b was made and is gone again before any list showed it: the reconcile after
	// the informer saw it no longer counts it.
	r.runnerSeen(seenRunner("linux-b", "linux"))
	if got := r.expectations.pending(key, r.expectations.mark(), nil, now); got != 0 {
		t.Errorf("linux-b seen before the list: %d expected, want 0", got)
	}

	// A create that failed is not expected at all.
	r.expectations.expect(key, "linux-c", now)
	r.expectations.forgetCreate(key, "linux-c")
	if got := r.expectations.pending(key, r.expectations.mark(), nil, now); got != 0 {
		t.Errorf("after a failed create: %d expected, want 0", got)
	}
}

func seenRunner(name, pool string) *v1alpha1.Runner {
	return &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: map[string]string{v1alpha1.LabelPool: pool}}}
}
