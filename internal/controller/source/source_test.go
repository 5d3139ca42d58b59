package source

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// recordingSource records the pools it was told to forget and whether it was wired.
type recordingSource struct {
	Webhook
	forgot []types.NamespacedName
	wired  bool
}

func (s *recordingSource) Forget(key types.NamespacedName)              { s.forgot = append(s.forgot, key) }
func (s *recordingSource) SetNotify(func(types.NamespacedName))         { s.wired = true }
func (s *recordingSource) Status(*v1alpha1.RunnerPool) (string, string) { return "", "" }

// A pool's source is chosen once, from spec.demand.source; a pool that is gone is
// forgotten by every source, and only the sources that wake pools are wired.
func TestSourcesChooseOncePerPool(t *testing.T) {
	webhook, scaleSet := &recordingSource{}, &recordingSource{}
	srcs := &Sources{Webhook: &Webhook{}, ScaleSet: scaleSet}
	for _, tt := range []struct {
		name string
		pool *v1alpha1.RunnerPool
		want Source
	}{
		{name: "default", pool: testutil.RunnerPool("ci", "a").Obj(), want: srcs.Webhook},
		{name: "scale set", pool: testutil.RunnerPool("ci", "b").ScaleSet("").Obj(), want: scaleSet},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := srcs.For(tt.pool); got != tt.want {
				t.Errorf("For = %T %p, want %T %p", got, got, tt.want, tt.want)
			}
		})
	}

	srcs.Webhook = webhook
	key := types.NamespacedName{Namespace: "ci", Name: "gone"}
	srcs.Forget(key)
	srcs.SetNotify(func(types.NamespacedName) {})
	got := [][]types.NamespacedName{webhook.forgot, scaleSet.forgot}
	if diff := cmp.Diff([][]types.NamespacedName{{key}, {key}}, got); diff != "" {
		t.Errorf("forgotten (-want +got):\n%s", diff)
	}
	if !webhook.wired || !scaleSet.wired {
		t.Errorf("wired: webhook %t, scale set %t; want both", webhook.wired, scaleSet.wired)
	}
}

func TestWaitError(t *testing.T) {
	err := fmt.Errorf("registering: %w", NewWaitError("waiting for the scale set", 2*time.Second))
	w := AsWait(err)
	if w == nil || w.Message != "waiting for the scale set" || w.After != 2*time.Second {
		t.Fatalf("AsWait = %+v, want the wait", w)
	}
	if AsWait(errors.New("other")) != nil {
		t.Error("AsWait of another error is not nil")
	}
	if _, err := (&Webhook{}).Remove(context.Background(), nil); err != nil {
		t.Errorf("Webhook.Remove: %v", err)
	}
}
