package runnerpool

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// A pool whose counts move is written at most once per statusInterval; a change of a
// condition's status or reason, or of the scale set's session, is written at once.
func TestStatusWritesOfMovingCountsAreSpaced(t *testing.T) {
	key := types.NamespacedName{Namespace: "ci", Name: "linux"}
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	pool := func(busy int32, ready metav1.ConditionStatus, session v1alpha1.SessionState) *v1alpha1.RunnerPool {
		return &v1alpha1.RunnerPool{Status: v1alpha1.RunnerPoolStatus{
			BusyRunners: busy,
			Conditions:  []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: ready, Reason: "R", Message: fmt.Sprintf("busy %d", busy)}},
			ScaleSet:    &v1alpha1.ScaleSetStatus{ID: 7, Session: session},
		}}
	}
	var w statusWrites
	if d := w.wait(key, pool(1, "True", "Active"), pool(2, "True", "Active"), now); d != 0 {
		t.Errorf("first write waits %v, want 0", d)
	}
	w.wrote(key, now)
	later := now.Add(300 * time.Millisecond)
	if d := w.wait(key, pool(2, "True", "Active"), pool(3, "True", "Active"), later); d != 700*time.Millisecond {
		t.Errorf("a count change 300ms after a write waits %v, want 700ms", d)
	}
	if d := w.wait(key, pool(2, "True", "Active"), pool(2, "True", "Active"), later); d != 0 {
		t.Errorf("no change waits %v, want 0 (nothing is written)", d)
	}
	if d := w.wait(key, pool(2, "True", "Active"), pool(3, "False", "Active"), later); d != 0 {
		t.Errorf("a condition turning False waits %v, want 0", d)
	}
	if d := w.wait(key, pool(2, "True", "Active"), pool(3, "True", "Conflict"), later); d != 0 {
		t.Errorf("a session change waits %v, want 0", d)
	}
	withSession := pool(3, "True", "Active")
	withSession.Status.ScaleSet.SessionID = "0b2c"
	if d := w.wait(key, pool(2, "True", "Active"), withSession, later); d != 0 {
		t.Errorf("a new session id waits %v, want 0: a successor must find it", d)
	}
	scaling := func(busy int32, up metav1.ConditionStatus) *v1alpha1.RunnerPool {
		p := pool(busy, "True", "Active")
		p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionScalingUp, Status: up, Reason: "S"})
		return p
	}
	if d := w.wait(key, scaling(2, "True"), scaling(3, "False"), later); d != 700*time.Millisecond {
		t.Errorf("ScalingUp turning False with the counts waits %v, want 700ms", d)
	}
	if d := w.wait(key, pool(2, "True", "Active"), pool(3, "True", "Active"), now.Add(statusInterval)); d != 0 {
		t.Errorf("a count change a full interval after a write waits %v, want 0", d)
	}
}

// A scale-set pool's session on its way is not written at once: the pool's first status
// and a restart's "Connecting" wait up to sessionSettle for the session to open, so that
// a start writes one status per pool, not two; an opened session (a new id), a failed
// one and a change of the generation are written at once.
func TestStatusWritesWaitForTheSession(t *testing.T) {
	key := types.NamespacedName{Namespace: "ci", Name: "linux"}
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	pool := func(gen int64, session v1alpha1.SessionState, id string) *v1alpha1.RunnerPool {
		p := &v1alpha1.RunnerPool{Status: v1alpha1.RunnerPoolStatus{ObservedGeneration: gen, ScaleSet: &v1alpha1.ScaleSetStatus{ID: 7, Session: session, SessionID: id}}}
		if gen > 0 {
			reason, status := v1alpha1.ReasonScaleSetUnavailable, metav1.ConditionFalse
			if session == v1alpha1.SessionActive {
				reason, status = v1alpha1.ReasonSessionActive, metav1.ConditionTrue
			}
			p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionScaleSetSession, Status: status, Reason: reason}}
		}
		return p
	}
	unwritten := &v1alpha1.RunnerPool{Status: v1alpha1.RunnerPoolStatus{ScaleSet: &v1alpha1.ScaleSetStatus{ID: 7}}} // the listener recorded the id
	tests := []struct {
		name          string
		before, after *v1alpha1.RunnerPool
		waited        time.Duration // since the change was first seen
		want          time.Duration
	}{
		{name: "first status while the session connects", before: unwritten, after: pool(1, v1alpha1.SessionConnecting, ""), want: sessionSettle},
		{name: "first status, 4s later", before: unwritten, after: pool(1, v1alpha1.SessionConnecting, ""), waited: 4 * time.Second, want: sessionSettle - 4*time.Second},
		{name: "first status once the session is open", before: unwritten, after: pool(1, v1alpha1.SessionActive, "s1"), want: 0},
		{name: "first status of a session that failed", before: unwritten, after: pool(1, v1alpha1.SessionError, ""), want: 0},
		{name: "a restart's reconnect", before: pool(1, v1alpha1.SessionActive, "s0"), after: pool(1, v1alpha1.SessionConnecting, "s0"), want: sessionSettle},
		{name: "the dead session closed", before: pool(1, v1alpha1.SessionActive, "s0"), after: pool(1, v1alpha1.SessionConnecting, ""), want: sessionSettle},
		{name: "still connecting after sessionSettle", before: pool(1, v1alpha1.SessionActive, "s0"), after: pool(1, v1alpha1.SessionConnecting, ""), waited: sessionSettle, want: 0},
		{name: "the new session open", before: pool(1, v1alpha1.SessionActive, "s0"), after: pool(1, v1alpha1.SessionActive, "s1"), want: 0},
		{name: "a conflict", before: pool(1, v1alpha1.SessionActive, "s0"), after: pool(1, v1alpha1.SessionConflict, "s0"), want: 0},
		{name: "a new generation while connecting", before: pool(1, v1alpha1.SessionActive, "s0"), after: pool(2, v1alpha1.SessionConnecting, "s0"), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w statusWrites
			w.wrote(key, now.Add(-time.Hour))
			if tt.waited > 0 {
				w.wait(key, tt.before, tt.after, now.Add(-tt.waited))
			}
			if got := w.wait(key, tt.before, tt.after, now); got != tt.want {
				t.Errorf("wait = %v, want %v", got, tt.want)
			}
		})
	}

	// Once the settling change is written, or gone, the next one waits its own time.
	var w statusWrites
	w.wait(key, pool(1, v1alpha1.SessionActive, "s0"), pool(1, v1alpha1.SessionConnecting, "s0"), now)
	w.wrote(key, now.Add(time.Hour))
	if got := w.wait(key, pool(1, v1alpha1.SessionActive, "s1"), pool(1, v1alpha1.SessionConnecting, "s1"), now.Add(2*time.Hour)); got != sessionSettle {
		t.Errorf("a reconnect after a written one waits %v, want %v", got, sessionSettle)
	}
	w.wait(key, pool(1, v1alpha1.SessionActive, "s1"), pool(1, v1alpha1.SessionActive, "s1"), now.Add(3*time.Hour))
	if got := w.wait(key, pool(1, v1alpha1.SessionActive, "s1"), pool(1, v1alpha1.SessionConnecting, "s1"), now.Add(4*time.Hour)); got != sessionSettle {
		t.Errorf("a reconnect after the status settled unwritten waits %v, want %v", got, sessionSettle)
	}
}

// Pools whose counts move together share countWritesPerSecond: the first take the
// budget's burst at once, the others wait their turn in the order they asked and keep it
// when they ask again; the last pool to take a turn that writes for another reason, or
// has nothing left to write, gives it back.
func TestCountWritesOfManyPoolsTakeTurns(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	counts := func(busy int32) *v1alpha1.RunnerPool {
		return &v1alpha1.RunnerPool{Status: v1alpha1.RunnerPoolStatus{ObservedGeneration: 1, BusyRunners: busy}}
	}
	key := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "ci", Name: fmt.Sprintf("p%d", i)}
	}
	var w statusWrites
	step := time.Second / countWritesPerSecond
	const pools = countWritesPerSecond + 3
	for i := range pools {
		want := time.Duration(max(0, i-countWritesPerSecond+1)) * step
		if got := w.wait(key(i), counts(1), counts(2), now); got != want {
			t.Errorf("pool %d waits %v, want %v", i, got, want)
		}
	}
	later := now.Add(step / 2)
	lastTurn := 3*step - step/2
	if got := w.wait(key(pools-1), counts(1), counts(3), later); got != lastTurn {
		t.Errorf("the last pool asked again waits %v, want %v (its turn)", got, lastTurn)
	}
	w.wrote(key(pools-1), later) // a condition changed: written at once
	if got := w.wait(key(pools), counts(1), counts(2), later); got != lastTurn {
		t.Errorf("a pool asking after that turn was given back waits %v, want %v", got, lastTurn)
	}
	w.wait(key(pools), counts(2), counts(2), later) // nothing left to write
	if got := w.wait(key(pools+1), counts(1), counts(2), later); got != lastTurn {
		t.Errorf("a pool asking after an unused turn waits %v, want %v", got, lastTurn)
	}
	// A pool's own interval comes first: one that just wrote waits statusInterval.
	w.wrote(key(0), later)
	if got := w.wait(key(0), counts(2), counts(3), later); got != statusInterval {
		t.Errorf("a pool that just wrote waits %v, want %v", got, statusInterval)
	}
}

// Until the cache shows a status write, the pool as the write returned it stands in for
// the cached one (so a pass in between neither chooses the platform again nor writes the
// same status again); once the cache has it, or a later version, the cache is newest.
func TestNewestIsTheLastWriteUntilTheCacheHasIt(t *testing.T) {
	key := types.NamespacedName{Namespace: "ci", Name: "linux"}
	at := func(rv string, busy int32) *v1alpha1.RunnerPool {
		return &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}, Status: v1alpha1.RunnerPoolStatus{BusyRunners: busy}}
	}
	var w statusWrites
	if got := w.newest(key, at("4", 1)); got.ResourceVersion != "4" {
		t.Errorf("nothing written: newest is rv %s, want the cache's 4", got.ResourceVersion)
	}
	w.remember(key, at("15", 2))
	for _, tt := range []struct {
		name   string
		cached *v1alpha1.RunnerPool
		want   string
	}{
		{name: "the cache behind the write", cached: at("9", 1), want: "15"},
		{name: "still behind", cached: at("14", 1), want: "15"},
		{name: "the cache has it", cached: at("15", 2), want: "15"},
		{name: "written and caught up: the cache from now on", cached: at("9", 1), want: "9"},
	} {
		if got := w.newest(key, tt.cached); got.ResourceVersion != tt.want {
			t.Errorf("%s: newest is rv %s, want %s", tt.name, got.ResourceVersion, tt.want)
		}
	}
	w.remember(key, at("20", 2))
	if got := w.newest(key, at("21", 3)); got.ResourceVersion != "21" || got.Status.BusyRunners != 3 {
		t.Errorf("the cache has a later version: newest is rv %s, want the cache's 21", got.ResourceVersion)
	}
	w.remember(key, at("30", 2))
	if got := w.newest(key, at("not-a-number", 3)); got.ResourceVersion != "not-a-number" {
		t.Errorf("a resourceVersion that does not compare: newest is rv %s, want the cache's", got.ResourceVersion)
	}
	w.remember(key, at("40", 2))
	w.forget(key)
	if got := w.newest(key, at("4", 1)); got.ResourceVersion != "4" {
		t.Errorf("forgotten: newest is rv %s, want the cache's 4", got.ResourceVersion)
	}
	// What newest returns is a copy: a pass may change it.
	w.remember(key, at("50", 2))
	w.newest(key, at("45", 1)).Status.BusyRunners = 9
	if got := w.newest(key, at("45", 1)); got.Status.BusyRunners != 2 {
		t.Errorf("a pass changed the remembered write: busy %d, want 2", got.Status.BusyRunners)
	}
}
