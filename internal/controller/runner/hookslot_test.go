package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// TestClaimHookSlot: a runner of a pool with isolation Runner gets a slot no live runner
// holds and no pod of the pool uses, the lowest free one reused before a new one is
// made; a new slot comes with its namespace (containerMode.namespace's Pod Security
// labels), the runner NetworkPolicy and the RoleBinding of that slot's ServiceAccount
// alone. A claim is made in this process's claim table: reusing a slot writes nothing,
// except that a slot loaded from the API server without a runner that holds it is swept
// of what a hook may have left there, once. Isolation Pool shares the pool's
// ServiceAccount and namespace.
func TestClaimHookSlot(t *testing.T) {
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.UID = "pool-uid"
	sharedPool := pool.DeepCopy()
	sharedPool.Spec.ContainerMode.Isolation = v1alpha1.IsolationPool
	base := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci-jobs", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "baseline", "team": "not-copied"}}}
	runner := func(name string) *v1alpha1.Runner {
		return &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: map[string]string{v1alpha1.LabelPool: "k8s"}},
			Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}}
	}
	ns0, ns1 := v1alpha1.ContainerHookSlotNamespace(pool, 0), v1alpha1.ContainerHookSlotNamespace(pool, 1)
	hookOfSlot := func(n int) *v1alpha1.RunnerContainerHook {
		return &v1alpha1.RunnerContainerHook{Namespace: v1alpha1.ContainerHookSlotNamespace(pool, n), ServiceAccount: v1alpha1.ContainerHookSlotServiceAccountName("k8s", n)}
	}
	// holding is a Runner whose stored status names slot n: what a restarted process reads.
	holding := func(name string, n int) *v1alpha1.Runner {
		rn := runner(name)
		rn.Status.ContainerHook = hookOfSlot(n)
		return rn
	}
	slot := func(n int) *corev1.ServiceAccount { return slotServiceAccount(pool, n) }
	podOf := func(name, sa string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, Labels: map[string]string{v1alpha1.LabelPool: "k8s", v1alpha1.LabelRunner: name}},
			Spec: corev1.PodSpec{ServiceAccountName: sa}}
	}
	terminating := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: slotLabels(pool, 0),
			DeletionTimestamp: ptr.To(metav1.Now()), Finalizers: []string{"kubernetes"}}}
	}
	for _, tc := range []struct {
		name    string
		pool    *v1alpha1.RunnerPool
		objs    []ctrl.Object
		watched []string
		// earlier runners claim, in order, before "me"; those in gone are then deleted.
		earlier, gone []string
		want          *v1alpha1.RunnerContainerHook
		wantDone      bool
		// wantHolders: the table's holder of each slot afterwards.
		wantHolders map[int]string
		// wantCreates: ServiceAccounts created, by the claims of earlier runners and me;
		// wantSwept: the namespaces whose hook Secrets were deleted.
		wantCreates int
		wantSwept   []string
		wantSlotNS  []string
		// wantRetry and wantMessage: a runner that waits.
		wantRetry   time.Duration
		wantMessage string
	}{
		{name: "first runner makes slot 0", objs: []ctrl.Object{base},
			want: hookOfSlot(0), wantDone: true, wantHolders: map[int]string{0: "me"}, wantCreates: 1, wantSlotNS: []string{ns0}},
		{name: "a slot this process saw released is reused with no write", objs: []ctrl.Object{base}, earlier: []string{"first"}, gone: []string{"first"},
			want: hookOfSlot(0), wantDone: true, wantHolders: map[int]string{0: "me"}, wantCreates: 1, wantSlotNS: []string{ns0}},
		{name: "a slot held in this process by a live runner is not given", objs: []ctrl.Object{base}, earlier: []string{"other"},
			want: hookOfSlot(1), wantDone: true, wantHolders: map[int]string{0: "other", 1: "me"}, wantCreates: 2, wantSlotNS: []string{ns0, ns1}},
		{name: "a slot claimed by an earlier pass is kept", objs: []ctrl.Object{base}, earlier: []string{"me"},
			want: hookOfSlot(0), wantDone: true, wantHolders: map[int]string{0: "me"}, wantCreates: 1, wantSlotNS: []string{ns0}},
		{name: "loaded: a slot a Runner's status names is held, one no runner names is swept before reuse",
			objs: []ctrl.Object{base, holding("b", 0), slot(0), slot(1), slot(2)},
			want: hookOfSlot(1), wantDone: true, wantHolders: map[int]string{0: "b", 1: "me", 2: ""}, wantSwept: []string{ns1}},
		{name: "loaded: a slot whose Runner is gone is swept before reuse", objs: []ctrl.Object{base, slot(0), holding("gone", 0)}, gone: []string{"gone"},
			want: hookOfSlot(0), wantDone: true, wantHolders: map[int]string{0: "me"}, wantSwept: []string{ns0}},
		{name: "loaded: a slot a pod still uses is not reused", objs: []ctrl.Object{base, slot(0), podOf("gone", "k8s-container-hook-0")},
			want: hookOfSlot(1), wantDone: true, wantHolders: map[int]string{0: "gone", 1: "me"}, wantCreates: 1, wantSlotNS: []string{ns1}},
		{name: "loaded: the pod binds the slot whatever a status says", objs: []ctrl.Object{base, slot(0), runner("b"), podOf("b", "k8s-container-hook-0"), holding("c", 0)},
			want: hookOfSlot(1), wantDone: true, wantHolders: map[int]string{0: "b", 1: "me"}, wantCreates: 1, wantSlotNS: []string{ns1}},
		{name: "a namespaced controller waits for a watched slot", objs: []ctrl.Object{base, holding("b", 0), slot(0)}, watched: []string{"ci", ns0},
			wantHolders: map[int]string{0: "b"}, wantRetry: noFreeSlotRetry, wantMessage: "isolation: Pool"},
		{name: "a slot whose namespace is being deleted waits for it to go", objs: []ctrl.Object{base, terminating(ns0)},
			wantHolders: map[int]string{0: "me"}, wantCreates: 1, wantRetry: slotTerminatingRetry, wantMessage: "to be deleted"},
		{name: "isolation Pool shares the pool's", pool: sharedPool, objs: []ctrl.Object{base},
			want: &v1alpha1.RunnerContainerHook{Namespace: "ci-jobs", ServiceAccount: "k8s-container-hook"}, wantDone: true,
			wantHolders: map[int]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pool
			if tc.pool != nil {
				p = tc.pool
			}
			ctx := context.Background()
			var creates, patches int
			var swept []string
			objs := append(slices.Clone(tc.objs), p.DeepCopy(), runner("me"))
			for _, name := range tc.earlier {
				if name != "me" {
					objs = append(objs, runner(name))
				}
			}
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.Runner{}).
				WithInterceptorFuncs(interceptor.Funcs{
					Create: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.CreateOption) error {
						if _, ok := obj.(*corev1.ServiceAccount); ok {
							creates++
						}
						return c.Create(ctx, obj, opts...)
					},
					Patch: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, patch ctrl.Patch, opts ...ctrl.PatchOption) error {
						if _, ok := obj.(*corev1.ServiceAccount); ok {
							patches++
						}
						return c.Patch(ctx, obj, patch, opts...)
					},
					DeleteAllOf: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.DeleteAllOfOption) error {
						o := &ctrl.DeleteAllOfOptions{}
						o.ApplyOptions(opts)
						swept = append(swept, o.Namespace)
						return c.DeleteAllOf(ctx, obj, opts...)
					},
				}).Build()
			policy := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gantry-runners"}}
			r := &Reconciler{Client: c, APIReader: c, Clock: clock.RealClock{}, Events: events.NewFakeRecorder(10), WatchedNamespaces: tc.watched, HookNetworkPolicy: policy}
			for _, name := range tc.earlier {
				if _, done, err := r.claimHookSlot(ctx, &scope{runner: runner(name), pool: p}); err != nil || !done {
					t.Fatalf("earlier claim of %s: done %v, err %v", name, done, err)
				}
			}
			for _, name := range tc.gone {
				if err := c.Delete(ctx, runner(name)); err != nil {
					t.Fatal(err)
				}
			}
			s := &scope{runner: runner("me"), pool: p}
			res, done, err := r.claimHookSlot(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if done != tc.wantDone {
				t.Errorf("done = %v, want %v (result %+v, message %q)", done, tc.wantDone, res, s.runner.Status.Message)
			}
			if !done && (res != reconcile.Result{RequeueAfter: tc.wantRetry} || !strings.Contains(s.runner.Status.Message, tc.wantMessage)) {
				t.Errorf("waiting: result %+v, message %q; want a retry after %s and a message saying %q", res, s.runner.Status.Message, tc.wantRetry, tc.wantMessage)
			}
			if e := r.unwritten.get(s.runner); tc.want != nil && (e == nil || !cmp.Equal(tc.want, e.containerHook)) {
				t.Errorf("the claim is not remembered for the runner's first status write: %+v", e)
			}
			if diff := cmp.Diff(tc.want, s.runner.Status.ContainerHook); diff != "" {
				t.Errorf("status.containerHook (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantHolders, tableHolders(r, p)); diff != "" {
				t.Errorf("slot holders (-want +got):\n%s", diff)
			}
			if creates != tc.wantCreates || patches != 0 {
				t.Errorf("%d ServiceAccounts created and %d patched, want %d created and none patched (a claim writes nothing)", creates, patches, tc.wantCreates)
			}
			if diff := cmp.Diff(tc.wantSwept, swept); diff != "" {
				t.Errorf("namespaces swept of hook Secrets (-want +got):\n%s", diff)
			}
			for _, ns := range tc.wantSlotNS {
				n := slices.Index([]string{ns0, ns1}, ns)
				checkSlotNamespace(t, c, p, ns, v1alpha1.ContainerHookSlotServiceAccountName("k8s", n))
			}
		})
	}
}

// tableHolders is the claim table's holder of each of pool's slots.
func tableHolders(r *Reconciler, pool *v1alpha1.RunnerPool) map[int]string {
	h := r.hookSlots()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int]string{}
	if ps := h.pools[pool.UID]; ps != nil {
		for n, st := range ps.slots {
			out[n] = st.holder
		}
	}
	return out
}

// testScheme is client-go's scheme and Gantry's types.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return scheme
}

// checkSlotNamespace checks a slot namespace made for ServiceAccount sa.
func checkSlotNamespace(t *testing.T, c ctrl.Client, pool *v1alpha1.RunnerPool, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	got := &corev1.Namespace{}
	if err := c.Get(ctx, ctrl.ObjectKey{Name: ns}, got); err != nil {
		t.Fatalf("slot namespace %s: %v", ns, err)
	}
	if got.Labels["pod-security.kubernetes.io/enforce"] != "baseline" || got.Labels["team"] != "" ||
		got.Labels[v1alpha1.LabelPool] != pool.Name || got.Labels[v1alpha1.LabelWorkflowPod] != v1alpha1.ContainerHookSlot {
		t.Errorf("namespace %s labels %v: want the pool's, the slot mark and only the Pod Security labels of ci-jobs", ns, got.Labels)
	}
	rb := &rbacv1.RoleBinding{}
	if err := c.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: HookSlotRoleBinding}, rb); err != nil {
		t.Fatalf("role binding in %s: %v", ns, err)
	}
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: pool.Namespace, Name: sa}}
	if diff := cmp.Diff(wantSubjects, rb.Subjects); diff != "" || rb.RoleRef.Name != ContainerHookClusterRole {
		t.Errorf("role binding in %s binds %s to (-want +got):\n%s", ns, rb.RoleRef.Name, diff)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := c.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: "gantry-runners"}, np); err != nil {
		t.Errorf("runner NetworkPolicy in %s: %v", ns, err)
	}
}

// A namespace that happens to have a slot's name and is not that slot's is not used.
func TestClaimHookSlotRefusesAForeignNamespace(t *testing.T) {
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.ContainerHookSlotNamespace(pool, 0)}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool, foreign,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci-jobs"}}).Build()
	r := &Reconciler{Client: c, APIReader: c, Clock: clock.RealClock{}}
	s := &scope{runner: &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "me"}, Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}}, pool: pool}
	_, done, err := r.claimHookSlot(context.Background(), s)
	if err == nil || done || !strings.Contains(err.Error(), "is not a container hook namespace of pool ci/k8s") {
		t.Fatalf("claim into a foreign namespace: done %v, err %v; want an error naming it", done, err)
	}
	if s.runner.Status.ContainerHook != nil {
		t.Errorf("status.containerHook = %+v, want none", s.runner.Status.ContainerHook)
	}
	if err := c.Get(context.Background(), ctrl.ObjectKey{Namespace: foreign.Name, Name: HookSlotRoleBinding}, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("role binding in the foreign namespace: err %v, want none made", err)
	}
}

// Runners of a burst, reconciled side by side, each get a slot of their own with one
// write each, the slot's ServiceAccount: no two hold one, and none retries against
// another's creation. Once they are gone, a second burst reuses those slots with no
// write at all (they were released in this process, so clean: no sweep).
func TestClaimHookSlotBurst(t *testing.T) {
	pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("ci-jobs").Obj()
	pool.UID = "pool-uid"
	const n = 40
	objs := []ctrl.Object{pool, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci-jobs"}}}
	burst := func(name string) []*v1alpha1.Runner {
		var out []*v1alpha1.Runner
		for i := range n {
			out = append(out, &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: fmt.Sprintf("%s%02d", name, i)}, Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}})
		}
		return out
	}
	first, second := burst("a"), burst("b")
	for _, rn := range append(slices.Clone(first), second...) {
		objs = append(objs, rn)
	}
	var saWrites, secretDeletes atomic.Int64
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.CreateOption) error {
			if _, ok := obj.(*corev1.ServiceAccount); ok && obj.GetName() != "default" {
				saWrites.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, patch ctrl.Patch, opts ...ctrl.PatchOption) error {
			if _, ok := obj.(*corev1.ServiceAccount); ok {
				saWrites.Add(1)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.DeleteAllOfOption) error {
			secretDeletes.Add(1)
			return c.DeleteAllOf(ctx, obj, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, APIReader: c, Clock: clock.RealClock{}}
	claimAll := func(runners []*v1alpha1.Runner) []string {
		got := make([]string, len(runners))
		var wg sync.WaitGroup
		for i, rn := range runners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := &scope{runner: rn.DeepCopy(), pool: pool}
				if _, done, err := r.claimHookSlot(context.Background(), s); err != nil || !done {
					t.Errorf("runner %s: done %v, err %v", rn.Name, done, err)
					return
				}
				got[i] = s.runner.Status.ContainerHook.ServiceAccount
			}()
		}
		wg.Wait()
		seen := map[string]bool{}
		for i, sa := range got {
			if seen[sa] {
				t.Errorf("runner %s got slot %s, already another's", runners[i].Name, sa)
			}
			seen[sa] = true
		}
		return got
	}
	made := claimAll(first)
	if w := saWrites.Load(); w != n {
		t.Errorf("first burst: %d ServiceAccount writes for %d runners, want one create each", w, n)
	}
	for _, rn := range first {
		if err := c.Delete(context.Background(), rn); err != nil {
			t.Fatal(err)
		}
	}
	saWrites.Store(0)
	got := claimAll(second)
	if w, d := saWrites.Load(), secretDeletes.Load(); w != 0 || d != 0 {
		t.Errorf("second burst: %d ServiceAccount writes and %d sweeps, want none: the first burst's slots are reused", w, d)
	}
	for _, sa := range got {
		if !slices.Contains(made, sa) {
			t.Errorf("second burst got slot %s, not one of the first's", sa)
		}
	}
}

// A hook namespace's default ServiceAccount, which the hook's pods name, is looked at once
// per namespace: kube-controller-manager's is left alone, a missing one is made without a
// token.
func TestEnsureDefaultServiceAccount(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	made := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "made", Name: "default"}}
	var creates, gets int
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(made).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c ctrl.WithWatch, obj ctrl.Object, opts ...ctrl.CreateOption) error {
			creates++
			return c.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c ctrl.WithWatch, key ctrl.ObjectKey, obj ctrl.Object, opts ...ctrl.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, APIReader: c}
	for range 2 {
		for _, ns := range []string{"made", "missing"} {
			if err := r.ensureDefaultServiceAccount(context.Background(), ns); err != nil {
				t.Fatal(err)
			}
		}
	}
	sa := &corev1.ServiceAccount{}
	if err := c.Get(context.Background(), ctrl.ObjectKey{Namespace: "missing", Name: "default"}, sa); err != nil {
		t.Fatal(err)
	}
	if creates != 1 || gets != 3 || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("%d creates, %d reads (then 1 to check), automount %v: want 1 create, 2 reads, no token", creates, gets, sa.AutomountServiceAccountToken)
	}
}
