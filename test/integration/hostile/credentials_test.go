package hostile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// A credentials Secret deleted before its pool stays (Terminating, still readable) until
// the pool is drained: its runners are unregistered from GitHub, none is skipped, and
// then the Secret goes.
func TestCredentialsSecretOutlivesItsPool(t *testing.T) {
	w := newWorld(t)
	w.start()
	pool := w.healthyPool("held")
	pool.Spec.MinIdle = 2
	w.create(pool)
	key := types.NamespacedName{Namespace: w.ns, Name: credsSecret}
	w.eventually("the Secret held and two runners registered on GitHub", func() (bool, error) {
		s := &corev1.Secret{}
		if err := w.c.Get(w.ctx(), key, s); err != nil {
			return false, err
		}
		return controllerutil.ContainsFinalizer(s, v1alpha1.CredentialsFinalizer) && len(w.sim.Runners()) == 2, nil
	})

	if err := w.c.Delete(w.ctx(), &corev1.Secret{ObjectMeta: metaOf(key)}); err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), key, s); err != nil || s.DeletionTimestamp.IsZero() {
		t.Fatalf("the Secret deleted while its pool uses it: %v, deletion %v; want it kept, Terminating", err, s.DeletionTimestamp)
	}

	if err := w.c.Delete(w.ctx(), pool); err != nil {
		t.Fatal(err)
	}
	w.eventually("the pool drained, its runners unregistered and the Secret gone", func() (bool, error) {
		_, perr := w.getPool("held")
		serr := w.c.Get(w.ctx(), key, &corev1.Secret{})
		return apierrors.IsNotFound(perr) && apierrors.IsNotFound(serr) && len(w.sim.Runners()) == 0, nil
	})
	var events corev1.EventList
	if err := w.c.List(w.ctx(), &events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Namespace == w.ns && e.Reason == "UnregisterSkipped" {
			t.Errorf("a runner was not unregistered: %s", e.Message)
		}
	}
}
