package scaleset

import (
	"context"
	"fmt"
	"testing"

	"github.com/actions/scaleset"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/github"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// The scale-set source answers in the Runner controller's one vocabulary: a wait while
// the scale set does not exist, github's AlreadyExists and Busy for the service's
// RunnerExists and JobStillRunning, nothing for a runner already gone.
func TestSourceTranslatesTheServicesAnswers(t *testing.T) {
	ctx := context.Background()
	pool := testutil.RunnerPool("ci", "linux").ScaleSet("").Obj()
	withID := pool.DeepCopy()
	withID.Status.ScaleSet = &v1alpha1.ScaleSetStatus{ID: 9}
	for _, tt := range []struct {
		name    string
		pool    *v1alpha1.RunnerPool
		call    string
		err     error
		do      func(Source, *v1alpha1.RunnerPool) error
		want    func(error) bool
		wantDes string
	}{
		{name: "register before the scale set exists", pool: pool,
			do:   func(s Source, p *v1alpha1.RunnerPool) error { _, err := s.Register(ctx, p, "r"); return err },
			want: func(err error) bool { return source.AsWait(err) != nil }, wantDes: "a WaitError"},
		{name: "register a name taken", pool: withID, call: "GenerateJitRunnerConfig", err: fmt.Errorf("wrapped: %w", scaleset.RunnerExistsError),
			do:   func(s Source, p *v1alpha1.RunnerPool) error { _, err := s.Register(ctx, p, "r"); return err },
			want: github.IsAlreadyExists, wantDes: "AlreadyExists"},
		{name: "register", pool: withID,
			do:   func(s Source, p *v1alpha1.RunnerPool) error { _, err := s.Register(ctx, p, "r"); return err },
			want: func(err error) bool { return err == nil }, wantDes: "nil"},
		{name: "unregister a busy runner", pool: withID, call: "RemoveRunner", err: scaleset.JobStillRunningError,
			do:   func(s Source, p *v1alpha1.RunnerPool) error { return s.Unregister(ctx, p, "r", 5) },
			want: github.IsBusy, wantDes: "Busy"},
		{name: "unregister a runner already gone", pool: withID, call: "RemoveRunner", err: scaleset.RunnerNotFoundError,
			do:   func(s Source, p *v1alpha1.RunnerPool) error { return s.Unregister(ctx, p, "r", 5) },
			want: func(err error) bool { return err == nil }, wantDes: "nil"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := newFakeService()
			if tt.call != "" {
				svc.NextErr(tt.call, tt.err)
			}
			s := Source{Manager: &Manager{Clients: svc}}
			if err := tt.do(s, tt.pool); !tt.want(err) {
				t.Errorf("err = %v, want %s", err, tt.wantDes)
			}
		})
	}
}
