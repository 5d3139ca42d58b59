package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// ContainerHookClusterRole is the ClusterRole holding exactly the verbs GitHub's
// no-volume Kubernetes hook checks with SelfSubjectAccessReview before every command
// (hookrelease.Permissions: actions/runner-container-hooks v0.8.1, packages/k8s,
// requiredPermissions). It is installed with Gantry
// (config/rbac/container_hook_role.yaml, the chart); the controller only binds it where
// a hook works: `bind` on this one ClusterRole is all it needs, no `escalate` and no
// exec of its own.
const ContainerHookClusterRole = "gantry-container-hook"

// HookSlotRoleBinding names the RoleBinding of a hook slot's ServiceAccount in the
// slot's namespace.
const HookSlotRoleBinding = "gantry-container-hook"

// LabelHookSlot numbers a hook slot's ServiceAccount and namespace.
const LabelHookSlot = "gantry.dev/hook-slot"

// noFreeSlotRetry is how soon a runner waiting for a hook slot asks again, when every
// slot the controller may use is held (a namespaced controller watches only some).
const noFreeSlotRetry = 10 * time.Second

// errSlotTerminating: the claimed slot's namespace is being deleted (the pool pruned
// the slot); the runner waits until it is gone and then makes it again.
var errSlotTerminating = errors.New("the container hook namespace is being deleted")

// slotTerminatingRetry is how soon a runner whose slot's namespace is being deleted
// looks again.
const slotTerminatingRetry = 2 * time.Second

// errNoWatchedSlot: every hook slot the controller watches is held.
var errNoWatchedSlot = errors.New("no free hook namespace among those the controller watches")

// claimHookSlot gives a Kubernetes-mode runner, before its pod is made, the
// ServiceAccount and namespace its hook works with, in status.containerHook (buildPod
// reads it; written with the runner's first status write, unwritten.go). With isolation Pool: the pool's ServiceAccount and containerMode.namespace.
// With isolation Runner, a hook slot of the pool of its own. Contract:
//
//   - Slot N is the ServiceAccount POOL-container-hook-N (in the pool's namespace, owned
//     by the pool) and the namespace ContainerHookSlotNamespace(pool, N), holding the
//     RoleBinding of ContainerHookClusterRole to that ServiceAccount alone and the runner
//     NetworkPolicy. So one runner's token can read nothing in another runner's
//     namespace: RBAC cannot tell two pods of one ServiceAccount apart, namespaces can.
//   - A claim is the label gantry.dev/runner=RUNNER on the ServiceAccount, written by a
//     patch carrying the resourceVersion an uncached list read: of two runners claiming
//     one slot the API server lets one write and refuses the other (409), which moves on.
//   - A slot is free when the runner named is gone and no pod of the pool has its
//     ServiceAccount: a Runner goes only after its finalizer deleted the pods and
//     Secrets its hook made (removeHookObjects), and a pod's bound token dies
//     with the pod, so a free slot's namespace is empty and no live token reaches it.
//   - A new slot takes the lowest N not taken, created already claimed: the API
//     server's AlreadyExists keeps two runners from making the same one.
//   - A controller watching some namespaces only (--namespaces) uses only the slots
//     whose namespace it watches; with none free the runner waits.
//
// A runner whose pod exists takes what its pod says. Done once set; pools in other modes:
// done at once.
func (r *Reconciler) claimHookSlot(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	cm := s.pool.Spec.ContainerMode
	if !cm.IsKubernetes() || s.runner.Status.ContainerHook != nil {
		return reconcile.Result{}, true, nil
	}
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.runner.Namespace, Name: s.runner.Name}, pod); err == nil {
		s.runner.Status.ContainerHook = hookOfPod(pod) // made by an earlier pass
		return reconcile.Result{}, true, nil
	}
	if !cm.IsolatesRunners() {
		s.runner.Status.ContainerHook = &v1alpha1.RunnerContainerHook{
			Namespace: cm.Namespace, ServiceAccount: v1alpha1.ContainerHookServiceAccountName(s.pool.Name),
		}
		r.unwritten.rememberContainerHook(s.runner, &s.runner.Status, r.Clock.Now())
		return reconcile.Result{}, true, nil
	}
	sa, n, err := r.claimSlotServiceAccount(ctx, s)
	if errors.Is(err, errNoWatchedSlot) {
		s.runner.Status.Message = waitingForSlot + "a free container hook namespace: the controller watches " +
			strings.Join(r.WatchedNamespaces, ", ") + " only (--namespaces); watch more of " +
			v1alpha1.ContainerHookSlotNamespace(s.pool, 0) + ", …-1, … or set containerMode.isolation: Pool"
		return reconcile.Result{RequeueAfter: noFreeSlotRetry}, false, nil
	}
	if err != nil {
		return reconcile.Result{}, false, err
	}
	ns := v1alpha1.ContainerHookSlotNamespace(s.pool, n)
	if err := r.ensureHookSlot(ctx, s.pool, ns, sa, n); errors.Is(err, errSlotTerminating) {
		s.runner.Status.Message = waitingForSlot + "the container hook namespace " + ns + " to be deleted, to make it again"
		return reconcile.Result{RequeueAfter: slotTerminatingRetry}, false, nil
	} else if err != nil {
		return reconcile.Result{}, false, err
	}
	s.runner.Status.ContainerHook = &v1alpha1.RunnerContainerHook{Namespace: ns, ServiceAccount: sa}
	// Written with the runner's first status write (unwritten.go): till then the claim on
	// the ServiceAccount, and once made the pod's environment, say it.
	r.unwritten.rememberContainerHook(s.runner, &s.runner.Status, r.Clock.Now())
	if strings.HasPrefix(s.runner.Status.Message, waitingForSlot) {
		s.runner.Status.Message = ""
	}
	return reconcile.Result{}, true, nil
}

// waitingForSlot begins the messages of a runner waiting for its hook slot.
const waitingForSlot = "waiting for "

// hookOfPod is where the hook of a runner pod works, as the pod says: its
// ServiceAccount and its hook's namespace variable. nil for a pod without the hook.
func hookOfPod(pod *corev1.Pod) *v1alpha1.RunnerContainerHook {
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == EnvKubernetesNamespace && e.Value != "" {
				return &v1alpha1.RunnerContainerHook{Namespace: e.Value, ServiceAccount: pod.Spec.ServiceAccountName}
			}
		}
	}
	return nil
}

// slotUsable reports whether the controller may put a hook in namespace ns: it
// watches every namespace, or that one.
func (r *Reconciler) slotUsable(ns string) bool {
	return len(r.WatchedNamespaces) == 0 || slices.Contains(r.WatchedNamespaces, ns)
}

// hookSlots is this process's view of every pool's hook slots, so that runners of a
// burst, reconciled side by side, each take a different slot at the first write rather
// than racing for the lowest and retrying (the API server still arbitrates: see
// claimSlotServiceAccount).
type hookSlots struct {
	mu    sync.Mutex
	pools map[types.UID]*poolSlots
	// serviceAccounts are the hook namespaces whose default ServiceAccount this process
	// saw or made (ensureDefaultServiceAccount).
	serviceAccounts sync.Map
}

// poolSlots are one pool's slots as last listed and since claimed by this process.
type poolSlots struct {
	loaded bool
	slots  map[int]*slotState
}

// slotState is one slot's ServiceAccount: the runner holding it, and the
// resourceVersion a claim must carry.
type slotState struct {
	holder, resourceVersion string
	// reserved: a claim or creation by this process is under way.
	reserved bool
}

// forget drops what is known of a pool's slots: the next claim lists them.
func (h *hookSlots) forget(pool types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pools, pool)
}

// claimSlotServiceAccount claims a slot's ServiceAccount for the runner (claimHookSlot's
// contract) and returns its name and number. Slots are chosen under this process's
// lock from its view of the pool's slots (listed uncached once, and again after the
// API server refused a claim or a creation); the claim itself is a write the API
// server may refuse.
func (r *Reconciler) claimSlotServiceAccount(ctx context.Context, s *scope) (string, int, error) {
	for attempt := 0; ; attempt++ {
		name, n, retry, err := r.tryClaimSlot(ctx, s)
		if !retry || attempt == 3 {
			return name, n, err
		}
		r.slots.forget(s.pool.UID) // another process wrote since the list: list again
	}
}

// tryClaimSlot is one attempt of claimSlotServiceAccount; retry says the API server
// refused the write because this process's view was stale.
func (r *Reconciler) tryClaimSlot(ctx context.Context, s *scope) (string, int, bool, error) {
	r.slots.mu.Lock()
	ps, err := r.poolSlots(ctx, s)
	if err != nil {
		r.slots.mu.Unlock()
		return "", 0, false, err
	}
	for n, st := range ps.slots {
		if st.holder == s.runner.Name && !st.reserved {
			r.slots.mu.Unlock()
			return v1alpha1.ContainerHookSlotServiceAccountName(s.pool.Name, n), n, false, nil // an earlier pass's
		}
	}
	n, st, err := r.freeSlot(ctx, s, ps)
	if err != nil {
		r.slots.mu.Unlock()
		return "", 0, false, err
	}
	creating := st == nil
	if creating {
		n = 0
		for ps.slots[n] != nil || !r.slotUsable(v1alpha1.ContainerHookSlotNamespace(s.pool, n)) {
			if ps.slots[n] == nil && n > len(r.WatchedNamespaces)+len(ps.slots) {
				// A namespaced controller: the slots it may use are the watched ones,
				// numbered below the count of watched namespaces and slots made.
				r.slots.mu.Unlock()
				return "", 0, false, errNoWatchedSlot
			}
			n++
		}
		st = &slotState{}
		ps.slots[n] = st
	}
	previous := *st
	st.holder, st.reserved = s.runner.Name, true
	r.slots.mu.Unlock()

	sa := slotServiceAccount(s.pool, n, s.runner.Name)
	if creating {
		err = r.Client.Create(ctx, sa)
	} else {
		before := sa.DeepCopy()
		before.Labels[v1alpha1.LabelRunner] = previous.holder
		before.ResourceVersion = previous.resourceVersion
		sa.ResourceVersion = previous.resourceVersion
		err = r.Client.Patch(ctx, sa, ctrl.MergeFromWithOptions(before, ctrl.MergeFromWithOptimisticLock{}))
	}
	r.slots.mu.Lock()
	defer r.slots.mu.Unlock()
	st.reserved = false
	switch {
	case err == nil:
		st.resourceVersion = sa.ResourceVersion
		log.FromContext(ctx).V(1).Info("Claimed a container hook slot", "serviceAccount", sa.Name, "new", creating)
		return sa.Name, n, false, nil
	case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		*st = previous
		return "", 0, true, fmt.Errorf("claiming the hook ServiceAccount %s: %w", sa.Name, err)
	}
	*st = previous
	if creating {
		delete(ps.slots, n)
	}
	return "", 0, false, fmt.Errorf("claiming the hook ServiceAccount %s: %w", sa.Name, err)
}

// poolSlots is the pool's slots as this process knows them, listed (uncached) when it
// knows none. Called with r.slots.mu held.
func (r *Reconciler) poolSlots(ctx context.Context, s *scope) (*poolSlots, error) {
	if r.slots.pools == nil {
		r.slots.pools = map[types.UID]*poolSlots{}
	}
	ps := r.slots.pools[s.pool.UID]
	if ps != nil && ps.loaded {
		return ps, nil
	}
	var sas corev1.ServiceAccountList
	if err := r.APIReader.List(ctx, &sas, ctrl.InNamespace(s.runner.Namespace), HookSlotsOf(s.pool)); err != nil {
		return nil, fmt.Errorf("listing the pool's hook ServiceAccounts: %w", err)
	}
	ps = &poolSlots{loaded: true, slots: map[int]*slotState{}}
	for _, sa := range sas.Items {
		if n, err := strconv.Atoi(sa.Labels[LabelHookSlot]); err == nil {
			ps.slots[n] = &slotState{holder: sa.Labels[v1alpha1.LabelRunner], resourceVersion: sa.ResourceVersion}
		}
	}
	r.slots.pools[s.pool.UID] = ps
	return ps, nil
}

// freeSlot is the lowest slot of ps free for the runner, nil when none is: not being
// claimed, its runner gone, no pod of the pool with its ServiceAccount, and its
// namespace watched. Called with r.slots.mu held.
func (r *Reconciler) freeSlot(ctx context.Context, s *scope, ps *poolSlots) (int, *slotState, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, ctrl.InNamespace(s.runner.Namespace), ctrl.MatchingLabels{v1alpha1.LabelPool: s.pool.Name}); err != nil {
		return 0, nil, fmt.Errorf("listing the pool's pods: %w", err)
	}
	mounted := map[string]bool{}
	for _, p := range pods.Items {
		mounted[p.Spec.ServiceAccountName] = true
	}
	for _, n := range slices.Sorted(maps.Keys(ps.slots)) {
		st := ps.slots[n]
		if st.reserved || mounted[v1alpha1.ContainerHookSlotServiceAccountName(s.pool.Name, n)] ||
			!r.slotUsable(v1alpha1.ContainerHookSlotNamespace(s.pool, n)) {
			continue
		}
		held, err := r.runnerExists(ctx, s.runner.Namespace, st.holder)
		if err != nil {
			return 0, nil, err
		}
		if !held {
			return n, st, nil
		}
	}
	return 0, nil, nil
}

// runnerExists reports whether the Runner named holds on: in the cache, or, missing
// there, in the API server (a Runner created a moment ago may not be cached yet).
func (r *Reconciler) runnerExists(ctx context.Context, namespace, name string) (bool, error) {
	if name == "" {
		return false, nil
	}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	err := r.Client.Get(ctx, key, &v1alpha1.Runner{})
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, &v1alpha1.Runner{})
	}
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading runner %s: %w", name, err)
}

// HookSlotsOf selects the ServiceAccounts and namespaces of pool's hook slots.
func HookSlotsOf(pool *v1alpha1.RunnerPool) ctrl.MatchingLabels {
	return ctrl.MatchingLabels{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelPool: pool.Name,
		v1alpha1.LabelPoolNamespace: pool.Namespace, v1alpha1.LabelWorkflowPod: v1alpha1.ContainerHookSlot,
	}
}

// IsHookSlotOf reports whether ns is a hook slot's namespace of pool, by its labels.
func IsHookSlotOf(ns *corev1.Namespace, pool *v1alpha1.RunnerPool) bool {
	for k, v := range HookSlotsOf(pool) {
		if ns.Labels[k] != v {
			return false
		}
	}
	return true
}

// slotLabels are the labels of slot n's ServiceAccount and namespace.
func slotLabels(pool *v1alpha1.RunnerPool, n int) map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy:     v1alpha1.ManagedByValue,
		v1alpha1.LabelPool:          pool.Name,
		v1alpha1.LabelPoolNamespace: pool.Namespace,
		v1alpha1.LabelWorkflowPod:   v1alpha1.ContainerHookSlot,
		LabelHookSlot:               strconv.Itoa(n),
	}
}

// slotServiceAccount is slot n's ServiceAccount, claimed by runner: owned by the pool
// (it goes with it), and with no token of its own (the runner pod projects one).
func slotServiceAccount(pool *v1alpha1.RunnerPool, n int, runner string) *corev1.ServiceAccount {
	labels := slotLabels(pool, n)
	labels[v1alpha1.LabelRunner] = runner
	return &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pool.Namespace, Name: v1alpha1.ContainerHookSlotServiceAccountName(pool.Name, n), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "RunnerPool", Name: pool.Name, UID: pool.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		AutomountServiceAccountToken: ptr.To(false),
	}
}

// podSecurityLabelPrefix starts the Pod Security admission labels a slot namespace
// copies from containerMode.namespace.
const podSecurityLabelPrefix = "pod-security.kubernetes.io/"

// ensureHookSlot makes slot n's namespace ns ready for the ServiceAccount sa, unless it
// is (it exists and its RoleBinding, made last, too): the namespace with containerMode.namespace's
// Pod Security labels, the runner NetworkPolicy, and the RoleBinding of
// ContainerHookClusterRole to sa. Its default ServiceAccount, which the hook's pods need,
// is kube-controller-manager's to make (ensureDefaultServiceAccount looks later). A namespace of that name that is not this slot's is
// refused, not used.
func (r *Reconciler) ensureHookSlot(ctx context.Context, pool *v1alpha1.RunnerPool, ns, sa string, n int) error {
	existing := &corev1.Namespace{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Name: ns}, existing)
	switch {
	case err == nil:
		if !IsHookSlotOf(existing, pool) {
			return fmt.Errorf("namespace %s exists and is not a container hook namespace of pool %s/%s: Gantry will not put a runner's hook there", ns, pool.Namespace, pool.Name)
		}
		if existing.DeletionTimestamp != nil {
			return errSlotTerminating // pruned a moment ago (runnerpool's pruneHookSlots)
		}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: HookSlotRoleBinding}, &rbacv1.RoleBinding{}); err == nil {
			return nil
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading the hook's role binding in %s: %w", ns, err)
		}
	case apierrors.IsNotFound(err):
		base := &corev1.Namespace{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: pool.Spec.ContainerMode.Namespace}, base); err != nil {
			return fmt.Errorf("reading containerMode.namespace %s for its Pod Security labels: %w", pool.Spec.ContainerMode.Namespace, err)
		}
		labels := slotLabels(pool, n)
		for k, v := range base.Labels {
			if strings.HasPrefix(k, podSecurityLabelPrefix) {
				labels[k] = v
			}
		}
		log.FromContext(ctx).V(1).Info("Making a container hook namespace", "namespace", ns)
		if err := r.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			// AlreadyExists: made since the read; the next pass reads it.
			return fmt.Errorf("creating the container hook namespace %s: %w", ns, err)
		}
	default:
		return fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	if r.HookNetworkPolicy != nil {
		np := slotNetworkPolicy(r.HookNetworkPolicy, ns)
		if err := r.Client.Create(ctx, np); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the runner NetworkPolicy in %s: %w", ns, err)
		}
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: HookSlotRoleBinding, Labels: slotLabels(pool, n)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ContainerHookClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: pool.Namespace, Name: sa}},
	}
	if err := r.Client.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the container hook's role in %s: %w", ns, err)
	}
	return nil
}

// slotNetworkPolicy is the runner NetworkPolicy (the installed template) as a hook
// slot's namespace holds it: workflow pods carry the labels it selects. It is labeled
// as the slot's, so the NetworkPolicy controller, which removes the policy from
// namespaces without pools, leaves it; it goes with the namespace.
func slotNetworkPolicy(tmpl *networkingv1.NetworkPolicy, ns string) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name, Namespace: ns, Labels: map[string]string{}, Annotations: tmpl.Annotations},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	for k, v := range tmpl.Labels {
		p.Labels[k] = v
	}
	p.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	p.Labels[v1alpha1.LabelWorkflowPod] = v1alpha1.ContainerHookSlot
	return p
}

// ensureDefaultServiceAccount makes sure namespace ns, where a runner's hook works, has
// its default ServiceAccount before the hook makes a pod there: the API server admits no
// pod naming a ServiceAccount that does not exist, and every pod the hook makes names
// "default". kube-controller-manager makes it a moment after the namespace — seconds
// later on a busy control plane — so by the time the runner pod runs it is there, and
// this is a read, once per namespace and process; where it is not (a cluster without
// that controller, or one far behind), it is made here, mounting no token.
func (r *Reconciler) ensureDefaultServiceAccount(ctx context.Context, ns string) error {
	if _, ok := r.slots.serviceAccounts.Load(ns); ok {
		return nil
	}
	key := types.NamespacedName{Namespace: ns, Name: "default"}
	err := r.APIReader.Get(ctx, key, &corev1.ServiceAccount{})
	if apierrors.IsNotFound(err) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}, AutomountServiceAccountToken: ptr.To(false)}
		if err = r.Client.Create(ctx, sa); apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("making sure %s has its default ServiceAccount: %w", ns, err)
	}
	r.slots.serviceAccounts.Store(ns, true)
	return nil
}
