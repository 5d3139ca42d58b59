package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	"github.com/gantry-dev/gantry/internal/hookrelease"
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
// reads it; written with the runner's first status write, unwritten.go). With isolation
// Pool: the pool's ServiceAccount and containerMode.namespace. With isolation Runner, a
// hook slot of the pool of its own. Contract:
//
//   - Slot N is the ServiceAccount POOL-container-hook-N (in the pool's namespace, owned
//     by the pool) and the namespace ContainerHookSlotNamespace(pool, N), holding the
//     RoleBinding of ContainerHookClusterRole to that ServiceAccount alone and the runner
//     NetworkPolicy. So one runner's token can read nothing in another runner's
//     namespace: RBAC cannot tell two pods of one ServiceAccount apart, namespaces can.
//   - A claim is an entry of this process's claim table (hookslots.go), made under its
//     lock with no write of its own: only the leader reconciles runners, and a replica
//     that loses the lead exits. It lasts in the runner pod, made right after it and
//     naming the slot's ServiceAccount and namespace, and in status.containerHook
//     (written with the runner's first status write); a process that starts or takes
//     the lead loads the table from those, uncached.
//   - A slot is free when its runner is gone and no pod of the pool has its
//     ServiceAccount: a Runner goes only after its finalizer deleted the pods and
//     Secrets its hook made (removeHookObjects), and a pod's bound token dies with the
//     pod, so a free slot's namespace is empty and no live token reaches it. A slot
//     loaded without a runner, which might hold what the hook of a runner whose claim
//     was never recorded left, is swept before it is given out (sweepSlot).
//   - A new slot takes the lowest N the table does not have; its ServiceAccount is the
//     one write a claim makes (none when a slot is reused).
//   - A runner whose pod could not be made keeps its slot until it is gone, as one
//     whose pod ran: its next pass makes the pod with the same slot.
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
	// Written with the runner's first status write (unwritten.go): till then the claim
	// table, and once made the pod, say it.
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

// hookSlots is the table claims are made in: the one shared with the RunnerPool
// reconciler (Slots), or, when none is given, one of this Reconciler's own.
func (r *Reconciler) hookSlots() *HookSlots {
	r.slotsOnce.Do(func() {
		if r.Slots == nil {
			r.Slots = &HookSlots{}
		}
	})
	return r.Slots
}

// claimSlotServiceAccount claims a slot for the runner (claimHookSlot's contract) and
// returns its ServiceAccount's name and its number. The claim is an entry of the claim
// table (hookslots.go), chosen under its lock: the runner's slot from an earlier pass,
// else the lowest free clean slot, else the lowest free dirty one (swept first), else a
// new slot, whose ServiceAccount is created — the one write a claim may cost.
func (r *Reconciler) claimSlotServiceAccount(ctx context.Context, s *scope) (string, int, error) {
	h := r.hookSlots()
	now := r.Clock.Now()
	h.mu.Lock()
	ps, err := h.pool(ctx, r.APIReader, s.pool, now)
	if err != nil {
		h.mu.Unlock()
		return "", 0, err
	}
	n, held := ps.held[s.runner.Name]
	creating := false
	if !held {
		var found bool
		if n, found, err = r.freeSlot(ctx, s, ps); err != nil {
			h.mu.Unlock()
			return "", 0, err
		}
		if !found {
			if n, err = r.newSlotNumber(s.pool, ps); err != nil {
				h.mu.Unlock()
				return "", 0, err
			}
			ps.slots[n] = &slotState{}
			creating = true
		}
		ps.hold(n, s.runner.Name, now)
	}
	dirty := ps.slots[n].dirty
	h.mu.Unlock()

	name := v1alpha1.ContainerHookSlotServiceAccountName(s.pool.Name, n)
	if creating {
		err := r.Client.Create(ctx, slotServiceAccount(s.pool, n))
		if apierrors.IsAlreadyExists(err) {
			// Made by something other than this table's claims: whatever it held is
			// unknown, so it is swept before use, as a slot loaded without a holder.
			h.mu.Lock()
			ps.slots[n].dirty, dirty, err = true, true, nil
			h.mu.Unlock()
		}
		if err != nil {
			h.mu.Lock()
			ps.release(n)
			delete(ps.slots, n)
			h.mu.Unlock()
			return "", 0, fmt.Errorf("creating the hook ServiceAccount %s: %w", name, err)
		}
	}
	if dirty {
		if err := r.sweepSlot(ctx, s.pool, n); err != nil {
			return "", 0, err // the runner keeps the slot; its next pass sweeps again
		}
		h.swept(s.pool.UID, n)
	}
	log.FromContext(ctx).V(1).Info("Claimed a container hook slot", "serviceAccount", name, "new", creating, "swept", dirty)
	return name, n, nil
}

// freeSlot is the lowest slot of ps free for the runner, clean ones before dirty ones;
// found false when none is. Free: not being pruned, its namespace watched, no pod of
// the pool using its ServiceAccount, and its holder gone (a holder seen gone is
// forgotten, so that it is read once). Called with the table's lock held.
func (r *Reconciler) freeSlot(ctx context.Context, s *scope, ps *poolSlots) (int, bool, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, ctrl.InNamespace(s.runner.Namespace), ctrl.MatchingLabels{v1alpha1.LabelPool: s.pool.Name}); err != nil {
		return 0, false, fmt.Errorf("listing the pool's pods: %w", err)
	}
	mounted := map[string]bool{}
	for _, p := range pods.Items {
		mounted[p.Spec.ServiceAccountName] = true
	}
	dirty, foundDirty := 0, false
	for _, n := range slices.Sorted(maps.Keys(ps.slots)) {
		st := ps.slots[n]
		if st.pruning || mounted[v1alpha1.ContainerHookSlotServiceAccountName(s.pool.Name, n)] ||
			!r.slotUsable(v1alpha1.ContainerHookSlotNamespace(s.pool, n)) {
			continue
		}
		if st.holder != "" {
			held, err := r.runnerExists(ctx, s.runner.Namespace, st.holder)
			if err != nil {
				return 0, false, err
			}
			if held {
				continue
			}
			ps.release(n)
		}
		if !st.dirty {
			return n, true, nil
		}
		if !foundDirty {
			dirty, foundDirty = n, true
		}
	}
	return dirty, foundDirty, nil
}

// newSlotNumber is the lowest slot number ps does not have, whose namespace the
// controller watches: errNoWatchedSlot when a namespaced controller watches none. Called
// with the table's lock held.
func (r *Reconciler) newSlotNumber(pool *v1alpha1.RunnerPool, ps *poolSlots) (int, error) {
	n := 0
	for ps.slots[n] != nil || !r.slotUsable(v1alpha1.ContainerHookSlotNamespace(pool, n)) {
		if ps.slots[n] == nil && n > len(r.WatchedNamespaces)+len(ps.slots) {
			// A namespaced controller: the slots it may use are the watched ones,
			// numbered below the count of watched namespaces and slots made.
			return 0, errNoWatchedSlot
		}
		n++
	}
	return n, nil
}

// sweepSlot deletes whatever a runner's hook left in slot n's namespace, before the
// slot is given to another runner: the hook's pods the cache shows there and, by one
// deletecollection, every Secret labeled runner-pod (the hook's, and the only ones a
// hook's token may create: the admission policy). Only dirty slots are swept (a slot
// known to the table without a holder).
func (r *Reconciler) sweepSlot(ctx context.Context, pool *v1alpha1.RunnerPool, n int) error {
	ns := v1alpha1.ContainerHookSlotNamespace(pool, n)
	hookMade := ctrl.HasLabels{hookrelease.LabelRunnerPod}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, ctrl.InNamespace(ns), hookMade); err != nil {
		return fmt.Errorf("listing the hook pods left in %s: %w", ns, err)
	}
	log.FromContext(ctx).V(1).Info("Sweeping a container hook namespace before reusing it", "namespace", ns, "pods", len(pods.Items))
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil {
			if err := r.Client.Delete(ctx, p, ctrl.GracePeriodSeconds(0)); ctrl.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the hook pod %s/%s left in the slot: %w", ns, p.Name, err)
			}
		}
	}
	if err := r.Client.DeleteAllOf(ctx, &corev1.Secret{}, ctrl.InNamespace(ns), hookMade); ctrl.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the hook Secrets left in %s: %w", ns, err)
	}
	return nil
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

// slotServiceAccount is slot n's ServiceAccount: owned by the pool (it goes with it),
// and with no token of its own (the runner pod projects one). It names no runner: who
// holds the slot is the claim table's (hookslots.go), the runner pod's and the Runner's
// status.
func slotServiceAccount(pool *v1alpha1.RunnerPool, n int) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pool.Namespace, Name: v1alpha1.ContainerHookSlotServiceAccountName(pool.Name, n), Labels: slotLabels(pool, n),
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
	if _, ok := r.defaultServiceAccounts.Load(ns); ok {
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
	r.defaultServiceAccounts.Store(ns, true)
	return nil
}
