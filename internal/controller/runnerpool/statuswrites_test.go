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
