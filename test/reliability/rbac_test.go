package reliability

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// The controller's RBAC is what it uses, no more. A controller bound only to the
// generated ClusterRole (config/rbac/role.yaml, from internal/controller/rbac.go) runs
// a pool through everything it does — leader election, runners registered, run and
// removed, a runner whose pod is deleted, one evicted, one on a lost node
// (force-deleted), a scale-down, the pool deleted and drained — and the API server's
// audit log shows that no request was forbidden and that every verb granted was used.
//
// A server-side apply that creates an object is authorized as a create too, which the
// audit log records as the request's patch: the runner NetworkPolicy's create counts as
// used when it was applied. Two rules are used by admission rather than by a request: OwnerReferencesPermission
// Enforcement (enabled on this API server) lets the controller set blockOwnerDeletion
// on a pod or Secret owned by a Runner only with update on runners/finalizers, and on a
// Runner owned by a pool only with update on runnerpools/finalizers. They count as used
// when such objects were created, and the test proves the rule is needed: without it
// the API server refuses the object.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.controller("replica-0", nil)
	// A cache: its volumes are created, claimed, released and, with the pool, deleted.
	pool := w.pool("rbac").MinIdle(2).MaxRunners(10).Cache(testutil.CacheSpec("tools"), "/opt/hostedtoolcache").Obj()
	pool.Spec.Recovery = v1alpha1.RecoverySpec{NodeLostTimeout: &metav1.Duration{Duration: 2 * time.Second}}
	// Runner pods labeled with their job for cost tools: a pod patch per job.
	pool.Spec.Usage = &v1alpha1.UsageSpec{PodLabels: true}
	w.create(pool)
	w.leader(60 * time.Second)
	idle := func(n int32) func() bool {
		return func() bool { p := w.getPool("rbac"); return p.Status.IdleRunners == n && p.Status.PendingRunners == 0 }
	}

	// Jobs run; runners are registered, run and removed.
	ids := w.queue(3, time.Second)
	w.eventually("the jobs", time.Minute, func() bool { return w.outstanding(ids) == 0 })
	w.eventually("two idle runners", time.Minute, idle(2))

	// A runner's pod is deleted by someone else; another's is evicted.
	victims := w.idleRunnerPods(2)
	w.fault(victims[0], "pod deleted")
	if err := cp.kube.CoreV1().Pods(w.ns).Delete(context.Background(), victims[0], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	w.fault(victims[1], "evicted")
	w.evict(victims[1])
	w.eventually("the two runners failed and replaced", time.Minute, func() bool {
		return w.failedWith(v1alpha1.ReasonPodDeleted) == 1 && w.failedWith(v1alpha1.ReasonEvicted) == 1 && idle(2)()
	})

	// A node is lost: its pods are force-deleted.
	lost := w.kubelet.podsOn("node-c")
	w.kubelet.loseNode("node-c")
	for _, name := range lost {
		w.fault(name, "node lost")
		_ = cp.kube.CoreV1().Pods(w.ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	w.eventually("the lost node's pods force-deleted", time.Minute, func() bool {
		for _, name := range lost {
			if _, err := cp.kube.CoreV1().Pods(w.ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
				return false
			}
		}
		return true
	})

	// Scale down, then delete the pool: it drains.
	w.patchMinIdle("rbac", 0)
	w.eventually("idle runners retired", time.Minute, idle(0))
	if err := cp.c.Delete(context.Background(), w.getPool("rbac")); err != nil {
		t.Fatal(err)
	}
	w.eventually("the pool drained and gone", time.Minute, func() bool {
		err := cp.c.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: "rbac"}, &v1alpha1.RunnerPool{})
		return apierrors.IsNotFound(err)
	})
	// The namespace's last pool is gone, so is its runner NetworkPolicy (the delete this
	// scenario must reach); the next pool would otherwise race it for the namespace.
	w.eventually("the runner NetworkPolicy deleted with the namespace's last pool", time.Minute, func() bool {
		l, err := cp.kube.NetworkingV1().NetworkPolicies(w.ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: v1alpha1.LabelManagedBy + "=" + v1alpha1.ManagedByValue})
		return err == nil && len(l.Items) == 0
	})

	// A pool without a cache: its runners exit 0 holding nothing, and their pods and
	// Secrets are deleted many at a time (deletecollection).
	w.create(w.pool("plain").MaxRunners(10).Obj())
	ids = w.queue(2, time.Second)
	w.eventually("the plain pool's jobs, pods and Secrets gone", time.Minute, func() bool {
		if w.outstanding(ids) != 0 {
			return false
		}
		sel := metav1.ListOptions{LabelSelector: v1alpha1.LabelPool + "=plain"}
		pods, err := cp.kube.CoreV1().Pods(w.ns).List(context.Background(), sel)
		if err != nil || len(pods.Items) > 0 {
			return false
		}
		secrets, err := cp.kube.CoreV1().Secrets(w.ns).List(context.Background(), sel)
		return err == nil && len(secrets.Items) == 0
	})
	if err := cp.c.Delete(context.Background(), w.getPool("plain")); err != nil {
		t.Fatal(err)
	}

	used, forbidden, events, err := auditOf(w.saUser())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forbidden {
		t.Errorf("forbidden: %s", f)
	}
	// Admission's use of the finalizers rules.
	if used[permission{"", "pods", "create"}] > 0 || used[permission{"", "secrets", "create"}] > 0 {
		used[permission{"gantry.dev", "runners/finalizers", "update"}]++
	}
	if used[permission{"gantry.dev", "runners", "create"}] > 0 {
		used[permission{"gantry.dev", "runnerpools/finalizers", "update"}]++
	}
	// The runner NetworkPolicy is written by server-side apply: the audit log shows a
	// patch, but a patch that creates the object (the first, here: the namespace has no
	// policy before the pool) is authorized as a create as well.
	if used[permission{"networking.k8s.io", "networkpolicies", "patch"}] > 0 {
		used[permission{"networking.k8s.io", "networkpolicies", "create"}]++
	}
	// An informer lists, then watches: client-go 1.36 lists through a watch with
	// sendInitialEvents where the API server allows it, and falls back to list.
	for p, n := range used {
		if p.Verb == "watch" {
			used[permission{p.Group, p.Resource, "list"}] += n
		}
	}
	var unused, usedList []string
	for p := range granted() {
		if used[p] == 0 {
			if why, ok := usedOutsideScenario[p]; ok {
				t.Logf("granted, not reached by the scenario: %s (%s)", p, why)
				continue
			}
			unused = append(unused, p.String())
		}
	}
	for p, n := range used {
		usedList = append(usedList, p.String()+" ×"+itoa(n))
	}
	sort.Strings(unused)
	sort.Strings(usedList)
	t.Logf("permissions used (%d audit events): %s", events, strings.Join(usedList, ", "))
	for _, u := range unused {
		t.Errorf("granted by config/rbac/role.yaml but never used: %s (trim its marker in internal/controller/rbac.go)", u)
	}
	w.fig.measure("permissions_granted", float64(len(granted())))
	w.fig.measure("permissions_used", float64(len(granted())-len(unused)))
	w.fig.measure("permissions_unused", float64(len(unused)))
	w.fig.Lost.Forbidden = len(forbidden)

	w.checkFinalizersRuleIsNeeded()
	w.fig.Notes = append(w.fig.Notes, "every permission of the generated role is used; none was refused")
	w.finish(time.Minute)
	w.fig.write()
}

// usedOutsideScenario are the permissions the controller needs that the scenario
// cannot reach on demand, each with why.
var usedOutsideScenario = map[permission]string{
	{"events.k8s.io", "events", "patch"}:                    "client-go's event broadcaster patches an event series when the same event recurs within six minutes",
	{"", "events", "list"}:                                  "listed once, by the pod's name, when a runner pod fails PendingTimeout, to quote its last warning; TestStuckPods reaches it",
	{"", "persistentvolumes", "get"}:                        "read only for a cache volume bound to a node-local PersistentVolume, to skip one whose node is gone or NotReady; this API server binds no volume (TestCacheIsolationAndTopology reaches the node check)",
	{"", "nodes", "get"}:                                    "read fresh only for a cache volume pinned to a node the nodes' cache does not hold, before the volume is deleted; this API server pins no volume (TestCacheIsolationAndTopology reaches it)",
	{"", "serviceaccounts", "create"}:                       "Kubernetes-mode pools only (spec.containerMode): the pool's hook ServiceAccount; test/integration/controller's containermode tests reach it",
	{"", "serviceaccounts", "patch"}:                        "Kubernetes-mode pools only: server-side apply of the hook ServiceAccount",
	{"", "configmaps", "create"}:                            "Kubernetes-mode pools only: the hook template ConfigMap",
	{"", "configmaps", "patch"}:                             "Kubernetes-mode pools only: server-side apply of the hook template ConfigMap",
	{"rbac.authorization.k8s.io", "rolebindings", "create"}: "Kubernetes-mode pools only: the hook's RoleBinding in containerMode.namespace",
	{"rbac.authorization.k8s.io", "rolebindings", "patch"}:  "Kubernetes-mode pools only: server-side apply of that RoleBinding",
	{"rbac.authorization.k8s.io", "rolebindings", "delete"}: "Kubernetes-mode pools only: that RoleBinding, when the pool is deleted",
	{"rbac.authorization.k8s.io", "clusterroles", "bind"}:   "Kubernetes-mode pools only: binding the gantry-container-hook ClusterRole (authorized at the RoleBinding's write)",
	{"", "secrets", "deletecollection"}:                     "Kubernetes-mode pools only: the hook's Secrets of a runner that ended, by their runner-pod label",
	{"", "serviceaccounts", "list"}:                         "Kubernetes-mode pools with isolation Runner only: the pool's hook slots, listed before a runner claims one",
	{"", "namespaces", "create"}:                            "Kubernetes-mode pools with isolation Runner only: a new hook slot's namespace",
	{"", "namespaces", "get"}:                               "Kubernetes-mode pools only: containerMode.namespace, read for its Pod Security labels, and a slot namespace of that name found existing",
	{"", "namespaces", "list"}:                              "Kubernetes-mode pools with isolation Runner only: the pool's hook namespaces, by label, when the pool is deleted",
	{"", "namespaces", "delete"}:                            "Kubernetes-mode pools with isolation Runner only: the pool's hook namespaces, when the pool is deleted",
	{"rbac.authorization.k8s.io", "rolebindings", "get"}:    "Kubernetes-mode pools with isolation Runner only: a hook slot's RoleBinding, read to tell a slot ready",
	{"", "serviceaccounts", "delete"}:                       "Kubernetes-mode pools with isolation Runner only: a hook slot idle ten minutes",
}

// checkFinalizersRuleIsNeeded proves the admission plugin is on and the rule matters:
// a ServiceAccount bound to the generated role minus runners/finalizers may not create
// a Secret with a blockOwnerDeletion owner reference to a Runner; with it, it may.
func (w *world) checkFinalizersRuleIsNeeded() {
	w.t.Helper()
	ctx := context.Background()
	owner := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "owner"}, Spec: v1alpha1.RunnerSpec{PoolName: "none"}}
	w.create(owner)
	trimmed := cp.role.DeepCopy()
	trimmed.ObjectMeta = metav1.ObjectMeta{Name: "gantry-trimmed-" + w.ns}
	var rules []rbacv1.PolicyRule
	for _, r := range trimmed.Rules {
		var res []string
		for _, x := range r.Resources {
			if x != "runners/finalizers" {
				res = append(res, x)
			}
		}
		if len(res) > 0 {
			r.Resources = res
			rules = append(rules, r)
		}
	}
	trimmed.Rules = rules
	w.create(trimmed)
	w.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "trimmed"}})
	w.create(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: trimmed.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: trimmed.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: w.ns, Name: "trimmed"}},
	})
	w.t.Cleanup(func() {
		_ = cp.c.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: trimmed.Name}})
		_ = cp.c.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: trimmed.Name}})
	})
	owned := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "Runner", Name: owner.Name, UID: owner.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}}}
	}
	as := func(sa string) client.Client {
		cfg := rest.CopyConfig(cp.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + w.ns + ":" + sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + w.ns, "system:authenticated"}}
		c, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
		if err != nil {
			w.t.Fatal(err)
		}
		return c
	}
	// RBAC caches settle within a moment of the binding's creation.
	var err error
	for range 50 {
		if err = as("trimmed").Create(ctx, owned("refused")); apierrors.IsForbidden(err) && strings.Contains(err.Error(), "finalizers") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "finalizers") {
		w.t.Errorf("without update on runners/finalizers, creating a Secret owned by a Runner: %v; want Forbidden by OwnerReferencesPermissionEnforcement", err)
	}
	if err := as(serviceAccount).Create(ctx, owned("allowed")); err != nil {
		w.t.Errorf("with the generated role, creating a Secret owned by a Runner: %v", err)
	}
	_ = cp.c.Delete(ctx, owned("allowed"))
	// The Runner has no finalizer (no controller watches this namespace's pool "none"
	// any more): delete it.
	_ = cp.c.Delete(ctx, owner)
}

// evict evicts a pod through the Eviction API, as a drain does.
func (w *world) evict(name string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cp.kube.CoreV1().Pods(w.ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}); err != nil {
		w.t.Fatalf("evicting %s: %v", name, err)
	}
}
