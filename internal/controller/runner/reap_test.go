package runner

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Runners that exit together have their pods and Secrets deleted together: one
// deletecollection of each kind for the batch, and nothing of another runner's or of
// an object Gantry does not manage.
func TestExitedRunnersAreReapedInOneRequestPerKind(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	managed := func(runner string) map[string]string {
		return map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelRunner: runner}
	}
	var objs []ctrl.Object
	for _, name := range []string{"linux-a", "linux-b", "linux-c", "linux-busy"} {
		objs = append(objs,
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: managed(name)}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: managed(name)}})
	}
	// Someone else's pod carrying a runner's name, and a runner of the same name in
	// another namespace: neither is this batch's.
	objs = append(objs,
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "not-gantrys", Labels: map[string]string{v1alpha1.LabelRunner: "linux-a"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "linux-a", Labels: managed("linux-a")}})
	var mu sync.Mutex
	calls := map[string]int{}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		DeleteAllOf: func(ctx context.Context, cl ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.DeleteAllOfOption) error {
			mu.Lock()
			calls[typeName(obj)]++
			mu.Unlock()
			return cl.DeleteAllOf(ctx, obj, opts...)
		},
	}).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	var e exitedReaper

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, name := range []string{"linux-a", "linux-b", "linux-c"} {
		wg.Go(func() { errs <- e.reap(t.Context(), c, clk, "ci", name) })
	}
	// The batch waits reapLinger for more runners: nothing is deleted before.
	waitFor(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		b := e.pending["ci"]
		return b != nil && len(b.names) == 3
	})
	if len(calls) != 0 {
		t.Fatalf("deleted before the batch's linger ended: %v", calls)
	}
	clk.Step(reapLinger)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("reap: %v", err)
		}
	}
	if diff := cmp.Diff(map[string]int{"pods": 1, "secrets": 1}, calls); diff != "" {
		t.Errorf("deletecollection requests (-want +got):\n%s", diff)
	}
	var pods corev1.PodList
	var secrets corev1.SecretList
	if err := c.List(t.Context(), &pods); err != nil {
		t.Fatal(err)
	}
	if err := c.List(t.Context(), &secrets); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ci/linux-busy", "ci/not-gantrys", "other/linux-a"}, keys(pods.Items)); diff != "" {
		t.Errorf("pods left (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ci/linux-busy"}, keys(secrets.Items)); diff != "" {
		t.Errorf("Secrets left (-want +got):\n%s", diff)
	}

	// A full batch goes at once, without waiting out the linger.
	done := make(chan error, reapBatch)
	for i := range reapBatch {
		go func() { done <- e.reap(t.Context(), c, clk, "ci", "linux-x"+string(rune('a'+i%26))) }()
	}
	for range reapBatch {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("reap of a full batch: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a full batch waited for its linger")
		}
	}
}

func typeName(obj ctrl.Object) string {
	switch obj.(type) {
	case *corev1.Pod:
		return "pods"
	case *corev1.Secret:
		return "secrets"
	}
	return "other"
}

func keys[T any, P interface {
	*T
	ctrl.Object
}](items []T) []string {
	var out []string
	for i := range items {
		o := P(&items[i])
		out = append(out, o.GetNamespace()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
}
