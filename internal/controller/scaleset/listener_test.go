package scaleset

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/testutil"
	"github.com/gantry-dev/gantry/internal/warm"
)

// listenerWorld is one Manager on a recording fake of the Actions service, leading.
type listenerWorld struct {
	svc  *fakeService
	m    *Manager
	c    client.Client
	pool *v1alpha1.RunnerPool
	key  types.NamespacedName
}

func newListenerWorld(t *testing.T, pool *v1alpha1.RunnerPool, setup func(*fakeService)) *listenerWorld {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool).WithStatusSubresource(pool).Build()
	svc := newFakeService()
	if setup != nil {
		setup(svc)
	}
	clk := clock.RealClock{}
	m := &Manager{Clients: svc, Client: c, Tracker: demand.NewTracker(demand.NewRouter(), clk), Warm: &warm.Observations{},
		Clock: clk, Owner: "gantry-0", Log: logr.Discard(), BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		GatherWindow: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &listenerWorld{svc: svc, m: m, c: c, pool: pool, key: types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}}
}

func (w *listenerWorld) waitSession(t *testing.T, want v1alpha1.SessionState) v1alpha1.ScaleSetStatus {
	t.Helper()
	var st v1alpha1.ScaleSetStatus
	testutil.Poll(t, "session "+string(want), 10*time.Second, 5*time.Millisecond, func() (bool, error) {
		st, _, _ = w.m.Status(w.key)
		return st.Session == want, nil
	}, func() { t.Logf("status %+v; calls %v", st, w.svc.Calls()) })
	return st
}

func (w *listenerWorld) waitAssigned(t *testing.T, want int) {
	t.Helper()
	testutil.Poll(t, "assigned jobs", 10*time.Second, 5*time.Millisecond, func() (bool, error) {
		n, ok := w.m.Assigned(w.key)
		return ok && n == want, nil
	}, func() { n, ok := w.m.Assigned(w.key); t.Logf("assigned %d (%v), want %d", n, ok, want) })
}

// A new pool: the listener finds no scale set, creates it, records its id in the pool's
// status, opens the session and follows the statistics of each answer; it acknowledges
// every message; stopping it closes the session.
func TestListenerCreatesScaleSetAndFollowsStatistics(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").MaxRunners(10).Obj()
	w := newListenerWorld(t, pool, func(f *fakeService) { f.stats = scaleset.RunnerScaleSetStatistic{TotalAssignedJobs: 3} })
	w.m.Ensure(pool, 1)
	st := w.waitSession(t, v1alpha1.SessionActive)
	w.waitAssigned(t, 3)
	if diff := cmp.Diff([]string{"GetRunnerGroupByName", "GetRunnerScaleSet", "CreateRunnerScaleSet", "OpenSession"}, w.svc.Calls()[:4]); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if st.ID == 0 || w.m.ScaleSetID(pool) != st.ID {
		t.Errorf("scale set id %d, ScaleSetID %d; want the created one", st.ID, w.m.ScaleSetID(pool))
	}
	stored := &v1alpha1.RunnerPool{}
	if err := w.c.Get(context.Background(), w.key, stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.ScaleSet == nil || stored.Status.ScaleSet.ID != st.ID {
		t.Errorf("stored status.scaleSet = %+v, want id %d recorded at once", stored.Status.ScaleSet, st.ID)
	}

	sess := w.svc.session()
	sess.send(7, 5)
	w.waitAssigned(t, 5)
	testutil.Poll(t, "the message acknowledged", 5*time.Second, 5*time.Millisecond, func() (bool, error) {
		return w.svc.Count("DeleteMessage") == 1, nil
	}, nil)

	w.m.Forget(w.key)
	if !sess.isClosed() {
		t.Error("the session is still open after the listener stopped")
	}
}

// A same-named scale set the pool did not create is refused, never taken over.
func TestListenerRefusesForeignScaleSet(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").Obj()
	w := newListenerWorld(t, pool, func(f *fakeService) {
		f.sets[42] = &scaleset.RunnerScaleSet{ID: 42, Name: "linux", RunnerGroupID: 1}
	})
	w.m.Ensure(pool, 0)
	w.waitSession(t, v1alpha1.SessionError)
	if _, reason, _ := w.m.Status(w.key); reason != v1alpha1.ReasonScaleSetNameTaken {
		t.Errorf("reason %q, want %q", reason, v1alpha1.ReasonScaleSetNameTaken)
	}
	for _, c := range []string{"CreateRunnerScaleSet", "OpenSession"} {
		if n := w.svc.Count(c); n != 0 {
			t.Errorf("%s called %d times, want 0", c, n)
		}
	}
}

// The service holds another session (409): the listener says so and tries again until
// it gets in.
func TestListenerRetriesSessionConflict(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").Obj()
	w := newListenerWorld(t, pool, func(f *fakeService) {
		for range 3 {
			f.NextErr("OpenSession", conflictErr())
		}
	})
	w.m.Ensure(pool, 0)
	w.waitSession(t, v1alpha1.SessionActive)
	if n := w.svc.Count("OpenSession"); n != 4 {
		t.Errorf("OpenSession called %d times, want 4 (three conflicts, then in)", n)
	}
}

// The scale set recorded in the pool's status is gone from the service: it is created
// again.
func TestListenerRecreatesDeletedScaleSet(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").Obj()
	pool.Status.ScaleSet = &v1alpha1.ScaleSetStatus{ID: 7, Name: "linux"}
	w := newListenerWorld(t, pool, nil)
	w.m.Ensure(pool, 0)
	st := w.waitSession(t, v1alpha1.SessionActive)
	if st.ID == 7 || st.ID == 0 {
		t.Errorf("scale set id %d, want a new one", st.ID)
	}
	if diff := cmp.Diff([]string{"GetRunnerScaleSetByID", "GetRunnerGroupByName", "GetRunnerScaleSet", "CreateRunnerScaleSet", "OpenSession"},
		w.svc.Calls()[:5]); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// A previous leader recorded its session in the pool's status and died without closing
// it: the new listener closes it before opening its own, and records its own.
func TestListenerClosesTheDeadLeadersSession(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").Obj()
	pool.Status.ScaleSet = &v1alpha1.ScaleSetStatus{ID: 7, Name: "linux", SessionID: "dead-1"}
	w := newListenerWorld(t, pool, func(f *fakeService) {
		f.sets[7] = &scaleset.RunnerScaleSet{ID: 7, Name: "linux", RunnerGroupID: 1, Labels: labelsOf(pool)}
	})
	if st, _, _ := w.m.Status(w.key); st.SessionID != "" {
		t.Fatalf("status before Ensure = %+v", st)
	}
	w.m.Ensure(pool, 0)
	st := w.waitSession(t, v1alpha1.SessionActive)
	calls := w.svc.Calls()
	if diff := cmp.Diff([]string{"GetRunnerScaleSetByID", "CloseSession dead-1", "OpenSession"}, calls[:3]); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if want := w.svc.session().session.SessionID.String(); st.SessionID != want {
		t.Errorf("status.sessionID = %q, want the new session's %q", st.SessionID, want)
	}

	// Stopped, the listener closes its own session and says so.
	w.m.Forget(w.key)
	if !w.svc.session().isClosed() {
		t.Error("the session is still open after the listener stopped")
	}
}

// The previous leader's record reaches the listener only after it started without one
// (the pool was read before its status was written): the id and the session recorded
// with it are adopted together, so the dead session is closed rather than waited out.
func TestListenerAdoptsTheDeadSessionRecordedLate(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").Obj()
	l := newPoolListener(&Manager{}, types.NamespacedName{Namespace: "ci", Name: "linux"}, configOf(pool), pool)
	l.adoptID(7, "dead-1")
	l.adoptID(8, "dead-2") // an id once known stays, and so does its session
	if l.id != 7 || l.dead != "dead-1" || l.status.ID != 7 || l.status.SessionID != "dead-1" {
		t.Errorf("after adopting: id %d, dead %q, status %+v; want id 7 and the dead session dead-1", l.id, l.dead, l.status)
	}
}

// Closing the dead session fails: the listener goes on and opens its own (which meets
// the service's 409 until the dead one expires), and tries to close it again next time.
func TestListenerClosingTheDeadSessionFails(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").Obj()
	pool.Status.ScaleSet = &v1alpha1.ScaleSetStatus{ID: 7, Name: "linux", SessionID: "dead-1"}
	w := newListenerWorld(t, pool, func(f *fakeService) {
		f.sets[7] = &scaleset.RunnerScaleSet{ID: 7, Name: "linux", RunnerGroupID: 1, Labels: labelsOf(pool)}
		f.NextErr("CloseSession dead-1", fmt.Errorf(`status="503 Service Unavailable"`))
		f.NextErr("OpenSession", conflictErr())
	})
	w.m.Ensure(pool, 0)
	w.waitSession(t, v1alpha1.SessionActive)
	if diff := cmp.Diff([]string{"GetRunnerScaleSetByID", "CloseSession dead-1", "OpenSession", "GetRunnerScaleSetByID", "CloseSession dead-1", "OpenSession"},
		w.svc.Calls()[:6]); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// labelsOf are the labels the listener wants on the pool's scale set.
func labelsOf(pool *v1alpha1.RunnerPool) []scaleset.Label {
	var out []scaleset.Label
	for _, l := range scaleSetLabels(pool) {
		out = append(out, scaleset.Label{Name: l, Type: "System"})
	}
	return out
}
