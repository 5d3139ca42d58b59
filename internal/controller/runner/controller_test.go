package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestRunPhasesMergesEveryPhasesRequeue(t *testing.T) {
	type step struct {
		after time.Duration
		done  bool
		err   error
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		steps     []step
		wantRes   reconcile.Result
		wantErr   error
		wantCalls int
	}{
		{
			name:      "all done, none requeues",
			steps:     []step{{done: true}, {done: true}},
			wantCalls: 2,
		},
		{
			// containerHooks with a Pending workflow pod inside imagePullGracePeriod,
			// then observe with nothing to wait for.
			name:      "a done phase's requeue survives the later phases",
			steps:     []step{{done: true}, {after: 3 * time.Second, done: true}, {done: true}},
			wantRes:   reconcile.Result{RequeueAfter: 3 * time.Second},
			wantCalls: 3,
		},
		{
			name:      "the sooner requeue wins",
			steps:     []step{{after: 3 * time.Second, done: true}, {after: time.Second, done: true}, {after: 5 * time.Second, done: true}},
			wantRes:   reconcile.Result{RequeueAfter: time.Second},
			wantCalls: 3,
		},
		{
			name:      "a phase not done stops the rest, its requeue merged with the earlier ones",
			steps:     []step{{after: 2 * time.Second, done: true}, {after: time.Minute}, {after: time.Millisecond, done: true}},
			wantRes:   reconcile.Result{RequeueAfter: 2 * time.Second},
			wantCalls: 2,
		},
		{
			name:      "a phase not done keeps its own requeue",
			steps:     []step{{done: true}, {after: time.Minute}, {done: true}},
			wantRes:   reconcile.Result{RequeueAfter: time.Minute},
			wantCalls: 2,
		},
		{
			name:      "an error returns the failing phase's result",
			steps:     []step{{after: time.Second, done: true}, {err: boom}, {done: true}},
			wantErr:   boom,
			wantCalls: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var phases []phase
			for _, st := range tc.steps {
				phases = append(phases, func(context.Context, *scope) (reconcile.Result, bool, error) {
					calls++
					return reconcile.Result{RequeueAfter: st.after}, st.done, st.err
				})
			}
			res, err := runPhases(context.Background(), &scope{}, phases...)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantRes, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if calls != tc.wantCalls {
				t.Errorf("phases run = %d, want %d", calls, tc.wantCalls)
			}
		})
	}
}
