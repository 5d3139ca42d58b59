package runnerpool

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// Pools that share a credentials Secret read it once between them, not once each: a new
// pool is taken up with one patch (finalizer and the Secret it holds), the Secret is
// read and held once, and read again only when credentialsRecheck has passed — once,
// whichever pool finds it due.
func TestCredentialsReadOncePerSecretAndPoolsTakenUpInOnePatch(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	const pools = 5
	objs := []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "github-app"}}}
	for i := range pools {
		objs = append(objs, testutil.RunnerPool("ci", poolName(i)).Obj())
	}
	type counts struct{ SecretReads, SecretPatches, PoolPatches int }
	var got counts
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				got.SecretReads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			switch obj.(type) {
			case *corev1.Secret:
				got.SecretPatches++
			case *v1alpha1.RunnerPool:
				got.PoolPatches++
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, APIReader: c, Clock: clk}
	pool := func(i int) *v1alpha1.RunnerPool {
		p := &v1alpha1.RunnerPool{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "ci", Name: poolName(i)}, p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	for i := range pools {
		if err := r.takeUp(ctx, pool(i)); err != nil {
			t.Fatalf("taking up pool %d: %v", i, err)
		}
	}
	if diff := cmp.Diff(counts{SecretReads: 1, SecretPatches: 1, PoolPatches: pools}, got); diff != "" {
		t.Errorf("taking up %d pools of one Secret (-want +got):\n%s", pools, diff)
	}
	for i := range pools {
		p := pool(i)
		if !controllerutil.ContainsFinalizer(p, Finalizer) || p.Annotations[v1alpha1.AnnotationCredentialsSecret] != "github-app" {
			t.Errorf("pool %s: finalizers %v, annotations %v; want the drain finalizer and the Secret it holds", p.Name, p.Finalizers, p.Annotations)
		}
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "ci", Name: "github-app"}, s); err != nil || !controllerutil.ContainsFinalizer(s, v1alpha1.CredentialsFinalizer) {
		t.Errorf("the Secret: %v, finalizers %v; want it held", err, s.Finalizers)
	}
	got = counts{}

	guardAll := func() {
		for i := range pools {
			if err := r.guardCredentials(ctx, pool(i)); err != nil {
				t.Fatalf("guarding pool %d: %v", i, err)
			}
		}
	}
	guardAll()
	if diff := cmp.Diff(counts{}, got); diff != "" {
		t.Errorf("the pools' next passes (-want +got):\n%s", diff)
	}
	clk.Step(credentialsRecheck)
	guardAll()
	if diff := cmp.Diff(counts{SecretReads: 1}, got); diff != "" {
		t.Errorf("after credentialsRecheck (-want +got):\n%s", diff)
	}
}

func poolName(i int) string { return "pool-" + string(rune('a'+i)) }
