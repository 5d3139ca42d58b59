package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestFailureBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := &FailureBackoff{Clock: clk, Threshold: 3, Base: 30 * time.Second, Max: 2 * time.Minute}
	pool := types.NamespacedName{Namespace: "ci", Name: "p"}
	wantWait := []time.Duration{0, 0, 30 * time.Second, time.Minute, 2 * time.Minute, 2 * time.Minute}
	for i, want := range wantWait {
		b.RecordFailure(pool, "ImagePullFailed", "cannot pull")
		got := b.Get(pool)
		var wait time.Duration
		if !got.Until.IsZero() {
			wait = got.Until.Sub(clk.Now())
		}
		if wait != want {
			t.Errorf("after failure %d: backoff %s, want %s", i+1, wait, want)
		}
		if got.Degraded(3) != (i+1 >= 3) {
			t.Errorf("after failure %d: Degraded = %v", i+1, got.Degraded(3))
		}
	}
	clk.Step(3 * time.Minute)
	if got := b.Get(pool); !got.Until.IsZero() || got.Consecutive != 6 {
		t.Errorf("after the wait: %+v, want no backoff and the count kept", got)
	}
	b.RecordSuccess(pool)
	if got := b.Get(pool); got.Consecutive != 0 || got.Degraded(3) {
		t.Errorf("after a success: %+v, want reset", got)
	}
}

func TestFailureBackoffForgetsADeletedPool(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := &FailureBackoff{Clock: clk, Threshold: 1, Base: time.Minute, Max: time.Hour}
	pool := types.NamespacedName{Namespace: "ci", Name: "p"}
	other := types.NamespacedName{Namespace: "ci", Name: "q"}
	b.RecordFailure(pool, "PodDeleted", "gone")
	b.RecordFailure(other, "PodDeleted", "gone")
	b.Forget(pool)
	if got := b.Get(pool); got.Consecutive != 0 || !got.Until.IsZero() {
		t.Errorf("after Forget: %+v, want a clean record", got)
	}
	if got := b.Get(other); got.Consecutive != 1 {
		t.Errorf("another pool's record: %+v, want it kept", got)
	}
}
