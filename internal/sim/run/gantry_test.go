package run

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
)

// The workload waits until the controller has reconciled each pool's generation, and
// no longer than its timeout.
func TestWaitPoolsTakenUp(t *testing.T) {
	sc := Scenarios["burst"]
	a, b := newPool(sc, "http://sim", "a"), newPool(sc, "http://sim", "b")
	a.Generation, b.Generation = 2, 1
	a.Status.ObservedGeneration = 1 // reconciled before its last change
	b.Status.ObservedGeneration = 1
	c := fake.NewClientBuilder().WithScheme(manager.Scheme()).WithObjects(a, b).WithStatusSubresource(a, b).Build()
	ctx := context.Background()

	var out bytes.Buffer
	waitPoolsTakenUp(ctx, c, []string{"a", "b"}, 200*time.Millisecond, &out)
	if !strings.Contains(out.String(), "took up 1 of its 2 pools within 200ms; the workload starts anyway") {
		t.Errorf("wait with pool a not reconciled said %q", out.String())
	}

	got := &v1alpha1.RunnerPool{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil {
		t.Fatal(err)
	}
	got.Status.ObservedGeneration = got.Generation
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	waitPoolsTakenUp(ctx, c, []string{"a", "b"}, time.Minute, &out)
	if !strings.Contains(out.String(), "took up its 2 pool(s)") {
		t.Errorf("wait with both pools reconciled said %q", out.String())
	}
}
