package runner

import (
	"context"
	"errors"
	"fmt"
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
)

// ContainerHookClusterRole is the ClusterRole holding exactly the verbs GitHub's
// no-volume Kubernetes hook checks with SelfSubjectAccessReview before every command
// (actions/runner-container-hooks, packages/k8s-novolume). It is installed with Gantry
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

// errNoWatchedSlot: every hook slot the controller watches is held.
var errNoWatchedSlot = errors.New("no free hook namespace among those the controller watches")

// claimHookSlot gives a Kubernetes-mode runner, before its pod is made, the
// ServiceAccount and namespace its hook works with, in status.containerHook (buildPod
// reads it). With isolation Pool: the pool's ServiceAccount and containerMode.namespace.
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
//     ServiceAccount: a Runner goes only after its finalizer deleted its anchor,
//     workflow pods and step Secrets (removeHookObjects), and a pod's bound token dies
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
		return reconcile.Result{}, true, nil
	}
	sa, n, err := r.claimSlotServiceAccount(ctx, s)
	if errors.Is(err, errNoWatchedSlot) {
		s.runner.Status.Message = "waiting for a free container hook namespace: the controller watches " +
			strings.Join(r.WatchedNamespaces, ", ") + " only (--namespaces); watch more of " +
			v1alpha1.ContainerHookSlotNamespace(s.pool, 0) + ", …-1, … or set containerMode.isolation: Pool"
		return reconcile.Result{RequeueAfter: noFreeSlotRetry}, false, nil
	}
	if err != nil {
		return reconcile.Result{}, false, err
	}
	ns := v1alpha1.ContainerHookSlotNamespace(s.pool, n)
	if err := r.ensureHookSlot(ctx, s.pool, ns, sa, n); err != nil {
		return reconcile.Result{}, false, err
	}
	s.runner.Status.ContainerHook = &v1alpha1.RunnerContainerHook{Namespace: ns, ServiceAccount: sa}
	return reconcile.Result{}, true, nil
}

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

// claimSlotServiceAccount claims a slot's ServiceAccount for the runner (claimHookSlot's
// contract) and returns its name and number.
func (r *Reconciler) claimSlotServiceAccount(ctx context.Context, s *scope) (string, int, error) {
	var sas corev1.ServiceAccountList
	if err := r.APIReader.List(ctx, &sas, ctrl.InNamespace(s.runner.Namespace), ctrl.MatchingLabels{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelPool: s.pool.Name,
		v1alpha1.LabelWorkflowPod: v1alpha1.ContainerHookSlot,
	}); err != nil {
		return "", 0, fmt.Errorf("listing the pool's hook ServiceAccounts: %w", err)
	}
	taken := map[int]bool{}
	for _, sa := range sas.Items {
		n, err := strconv.Atoi(sa.Labels[LabelHookSlot])
		if err != nil {
			continue
		}
		taken[n] = true
		if sa.Labels[v1alpha1.LabelRunner] == s.runner.Name {
			return sa.Name, n, nil // claimed by an earlier pass
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, ctrl.InNamespace(s.runner.Namespace), ctrl.MatchingLabels{v1alpha1.LabelPool: s.pool.Name}); err != nil {
		return "", 0, fmt.Errorf("listing the pool's pods: %w", err)
	}
	mounted := map[string]bool{}
	for _, p := range pods.Items {
		mounted[p.Spec.ServiceAccountName] = true
	}
	slices.SortFunc(sas.Items, func(a, b corev1.ServiceAccount) int {
		x, _ := strconv.Atoi(a.Labels[LabelHookSlot])
		y, _ := strconv.Atoi(b.Labels[LabelHookSlot])
		return x - y
	})
	for i := range sas.Items {
		sa := &sas.Items[i]
		n, err := strconv.Atoi(sa.Labels[LabelHookSlot])
		if err != nil || mounted[sa.Name] || !r.slotUsable(v1alpha1.ContainerHookSlotNamespace(s.pool, n)) {
			continue
		}
		if held, err := r.runnerExists(ctx, s.runner.Namespace, sa.Labels[v1alpha1.LabelRunner]); err != nil || held {
			if err != nil {
				return "", 0, err
			}
			continue
		}
		before := sa.DeepCopy()
		sa.Labels[v1alpha1.LabelRunner] = s.runner.Name
		err = r.Client.Patch(ctx, sa, ctrl.MergeFromWithOptions(before, ctrl.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			log.FromContext(ctx).V(1).Info("Claimed a container hook slot", "serviceAccount", sa.Name)
			return sa.Name, n, nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			continue // another runner was first
		default:
			return "", 0, fmt.Errorf("claiming the hook ServiceAccount %s: %w", sa.Name, err)
		}
	}
	for n := 0; ; n++ {
		if taken[n] {
			continue
		}
		ns := v1alpha1.ContainerHookSlotNamespace(s.pool, n)
		if !r.slotUsable(ns) {
			// A namespaced controller: the slots it may use are the watched ones, so
			// numbered below the count of watched namespaces and slots made.
			if n > len(r.WatchedNamespaces)+len(taken) {
				return "", 0, errNoWatchedSlot
			}
			continue
		}
		sa := slotServiceAccount(s.pool, n, s.runner.Name)
		err := r.Client.Create(ctx, sa)
		switch {
		case err == nil:
			log.FromContext(ctx).V(1).Info("Made a container hook slot", "serviceAccount", sa.Name, "namespace", ns)
			return sa.Name, n, nil
		case apierrors.IsAlreadyExists(err):
			taken[n] = true // made by another runner since the list
		default:
			return "", 0, fmt.Errorf("creating the hook ServiceAccount %s: %w", sa.Name, err)
		}
	}
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
// is (its RoleBinding, made last, exists): the namespace with containerMode.namespace's
// Pod Security labels, its default ServiceAccount, the runner NetworkPolicy, and the RoleBinding of
// ContainerHookClusterRole to sa. A namespace of that name that is not this slot's is
// refused, not used.
func (r *Reconciler) ensureHookSlot(ctx context.Context, pool *v1alpha1.RunnerPool, ns, sa string, n int) error {
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: HookSlotRoleBinding}, &rbacv1.RoleBinding{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the hook's role binding in %s: %w", ns, err)
	}
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
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}
	if err := r.Client.Create(ctx, nsObj); apierrors.IsAlreadyExists(err) {
		existing := &corev1.Namespace{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: ns}, existing); err != nil {
			return fmt.Errorf("reading namespace %s: %w", ns, err)
		}
		if existing.Labels[v1alpha1.LabelPool] != pool.Name || existing.Labels[v1alpha1.LabelPoolNamespace] != pool.Namespace ||
			existing.Labels[v1alpha1.LabelWorkflowPod] != v1alpha1.ContainerHookSlot {
			return fmt.Errorf("namespace %s exists and is not a container hook namespace of pool %s/%s: Gantry will not put a runner's hook there", ns, pool.Namespace, pool.Name)
		}
	} else if err != nil {
		return fmt.Errorf("creating the container hook namespace %s: %w", ns, err)
	}
	// The namespace's default ServiceAccount, which the anchor and the workflow pods
	// name: the API server admits no pod before it exists, and kube-controller-manager
	// makes it only a moment after the namespace. Made here, it mounts no token.
	sa0 := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}, AutomountServiceAccountToken: ptr.To(false)}
	if err := r.Client.Create(ctx, sa0); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default ServiceAccount of %s: %w", ns, err)
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
// slot's namespace holds it: workflow pods carry the labels it selects. It is labelled
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
