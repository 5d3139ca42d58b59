package runner

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/source"
)

// secretReader stands for the uncached reader: it has no Secret, and counts lookups.
type secretReader struct{ gets int }

func (c *secretReader) Get(_ context.Context, key ctrl.ObjectKey, _ ctrl.Object, _ ...ctrl.GetOption) error {
	c.gets++
	return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
}

func (c *secretReader) List(context.Context, ctrl.ObjectList, ...ctrl.ListOption) error {
	return errors.New("not in this test")
}

// The uncached Secret lookup before registering is skipped for a Runner this process
// created (no other process can have registered it) and for one whose Secret this
// process wrote (its id is remembered until the status shows it); any other Runner's
// Secret is looked up.
func TestRegisterLooksUpOnlySecretsItCannotKnow(t *testing.T) {
	reader := &secretReader{}
	births := &controller.RunnerBirths{}
	r := &Reconciler{APIReader: reader, Births: births, Sources: &source.Sources{Webhook: &source.Webhook{GitHub: &controller.GitHubResolver{}}},
		Clock: clocktesting.NewFakeClock(metav1.Now().Time)}
	// The pool's URL does not parse: registration stops at the pool's configuration,
	// after the lookup it would make.
	pool := &v1alpha1.RunnerPool{Spec: v1alpha1.RunnerPoolSpec{GitHub: v1alpha1.GitHubSpec{URL: "::"}}}
	runner := func(uid types.UID) *scope {
		rn := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-" + string(uid), UID: uid}}
		return &scope{runner: rn, before: rn.DeepCopy(), pool: pool}
	}
	register := func(s *scope) bool {
		t.Helper()
		_, done, err := r.register(context.Background(), s)
		if err != nil {
			t.Fatalf("register %s: %v", s.runner.Name, err)
		}
		return done
	}

	births.Born(types.NamespacedName{Namespace: "ci", Name: "linux-ours"})
	if register(runner("ours")); reader.gets != 0 {
		t.Errorf("a Runner this process created: %d Secret lookups, want 0", reader.gets)
	}
	if register(runner("foreign")); reader.gets != 1 {
		t.Errorf("a Runner another process created: %d Secret lookups, want 1", reader.gets)
	}

	written := runner("written")
	r.setRegistered(written, 42, false) // a registration this process made earlier
	again := runner("written")
	r.recall(again)
	if !register(again) || reader.gets != 1 {
		t.Fatalf("a Runner this process registered: done false or a lookup (%d in all)", reader.gets)
	}
	if st := again.runner.Status; st.GitHubRunnerID != 42 || st.RegisteredAt == nil {
		t.Errorf("status: id %d, registered at %v; want 42 and set", st.GitHubRunnerID, st.RegisteredAt)
	}
	births.Born(types.NamespacedName{Namespace: "ci", Name: written.runner.Name})
	shown := runner("written")
	shown.runner.Status = again.runner.Status
	shown.before = shown.runner.DeepCopy()
	r.recall(shown)
	if !register(shown) { // its stored status shows the registration now: both memories let go
		t.Fatal("a registered Runner is not done")
	}
	if r.unwritten.get(shown.runner) != nil || births.Ours(types.NamespacedName{Namespace: "ci", Name: written.runner.Name}) {
		t.Error("the Runner is still remembered after its status showed the registration")
	}
}
