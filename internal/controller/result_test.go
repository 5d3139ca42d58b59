package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestLowestNonZeroResult(t *testing.T) {
	after := func(d time.Duration) reconcile.Result { return reconcile.Result{RequeueAfter: d} }
	for _, tt := range []struct {
		name string
		a, b reconcile.Result
		want reconcile.Result
	}{
		{name: "both zero", want: after(0)},
		{name: "first only", a: after(time.Second), want: after(time.Second)},
		{name: "second only", b: after(time.Second), want: after(time.Second)},
		{name: "second sooner", a: after(time.Minute), b: after(time.Second), want: after(time.Second)},
		{name: "first sooner", a: after(time.Second), b: after(time.Minute), want: after(time.Second)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, LowestNonZeroResult(tt.a, tt.b)); diff != "" {
				t.Errorf("LowestNonZeroResult (-want +got):\n%s", diff)
			}
		})
	}
}
