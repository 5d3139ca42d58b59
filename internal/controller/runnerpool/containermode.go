package runnerpool

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/hookrelease"
)

// ContainerHookClusterRole is runner.ContainerHookClusterRole, the ClusterRole the
// controller binds where a hook works.
const ContainerHookClusterRole = runner.ContainerHookClusterRole

// ContainerHookRules are ContainerHookClusterRole's rules, as shipped: exactly the hook's
// requiredPermissions (hookrelease.Permissions), a rule each, in its order.
var ContainerHookRules = func() []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, p := range hookrelease.Permissions {
		res := p.Resource
		if p.Subresource != "" {
			res += "/" + p.Subresource
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{res}, Verbs: slices.Clone(p.Verbs)})
	}
	return rules
}()

// ReasonIgnoredField is the reason of the Warning event a pool gets, once per generation,
// for a field Gantry keeps in its API but ignores: containerMode.useKubeScheduler.
const ReasonIgnoredField = "IgnoredField"

// useKubeSchedulerIgnored is the message of that event.
const useKubeSchedulerIgnored = "containerMode.useKubeScheduler is deprecated and ignored: GitHub's container hook " +
	hookrelease.Release + " never reads ACTIONS_RUNNER_USE_KUBE_SCHEDULER nor the runner pod; the scheduler places every " +
	"workflow pod, within containerMode.workflowPodTemplate's nodeSelector and tolerations. Remove the field"

// fieldManager names Gantry's server-side applies.
const fieldManager = "gantry"

// containerModeApplied remembers, per pool UID, the generation whose hook identity and
// configuration this process applied: a pool is reconciled at every runner change, and
// the objects change only with the spec.
var containerModeApplied sync.Map

// warnIgnoredFields tells the pool's owner, once per generation this process applies,
// of the fields it sets that Gantry ignores (a Warning event ReasonIgnoredField).
func (r *Reconciler) warnIgnoredFields(pool *v1alpha1.RunnerPool) {
	if pool.Spec.ContainerMode.UseKubeScheduler {
		r.Events.Eventf(pool, nil, corev1.EventTypeWarning, ReasonIgnoredField, "ContainerMode", "%s", useKubeSchedulerIgnored)
	}
}

// ensureContainerMode gives a Kubernetes-mode pool what its runners' hook needs, before
// any runner pod asks for it: in the pool's namespace the ServiceAccount and the
// ConfigMap with Gantry's wrapper of the hook and the workflow-pod template
// (runner.HookConfigData; both owned by the pool, so they go with it), and in containerMode.namespace a RoleBinding of ContainerHookClusterRole to that
// ServiceAccount (another namespace: it cannot be owned by the pool; drain removes
// it). Applied with server-side apply once per pool generation. A containerMode.namespace
// that is the pool's own, that the controller does not watch (WatchedNamespaces: it
// could not see the workflow pods there), or that does not exist, is a
// *controller.ConfigError: the pool is not Ready, Degraded, and creates no runner. Pools
// in other modes: nothing.
func (r *Reconciler) ensureContainerMode(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	cm := pool.Spec.ContainerMode
	if !cm.IsKubernetes() {
		return nil
	}
	if cm.Namespace == pool.Namespace {
		return &controller.ConfigError{Reason: v1alpha1.ReasonSameNamespace, Message: fmt.Sprintf(
			"containerMode.namespace is the pool's own namespace %q: the hook's token may read every Secret where it works, "+
				"so the runners' JIT configurations and the pool's credentials would be within job code's reach; "+
				"name a namespace of its own, such as %s-jobs", pool.Namespace, pool.Namespace)}
	}
	if cm.IsolatesRunners() {
		return r.ensureRunnerIsolation(ctx, pool)
	}
	if len(r.WatchedNamespaces) > 0 && !slices.Contains(r.WatchedNamespaces, cm.Namespace) {
		return &controller.ConfigError{Reason: v1alpha1.ReasonNamespaceNotWatched, Message: fmt.Sprintf(
			"containerMode.namespace %q is not among the namespaces the controller watches (%s): it could not see the "+
				"workflow pods there; add %q to the controller's --namespaces flag (the Helm chart's watchNamespaces value)",
			cm.Namespace, strings.Join(r.WatchedNamespaces, ", "), cm.Namespace)}
	}
	if v, ok := containerModeApplied.Load(pool.UID); ok && v.(int64) == pool.Generation && pool.Generation != 0 {
		return nil
	}
	log.FromContext(ctx).V(1).Info("Applying the container hook's identity and template", "namespace", cm.Namespace)
	if err := r.Client.Apply(ctx, hookRoleBinding(pool), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsNotFound(err) {
			return &controller.ConfigError{Reason: v1alpha1.ReasonNamespaceNotFound, Message: fmt.Sprintf(
				"containerMode.namespace %q does not exist: create it (with a Pod Security level, such as "+
					"pod-security.kubernetes.io/enforce: baseline) for the pool's workflow pods", cm.Namespace)}
		}
		return &controller.ConfigError{Reason: v1alpha1.ReasonContainerModeFailed, Message: "binding the container hook's role in " + cm.Namespace + ": " + err.Error()}
	}
	owner := metav1ac.OwnerReference().WithAPIVersion(v1alpha1.GroupVersion.String()).WithKind("RunnerPool").
		WithName(pool.Name).WithUID(pool.UID).WithController(true).WithBlockOwnerDeletion(true)
	for what, obj := range map[string]runtime.ApplyConfiguration{
		"ServiceAccount": hookServiceAccount(pool).WithOwnerReferences(owner),
		"ConfigMap":      hookConfigMap(pool).WithOwnerReferences(owner),
	} {
		if err := r.Client.Apply(ctx, obj, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return &controller.ConfigError{Reason: v1alpha1.ReasonContainerModeFailed, Message: "applying the container hook's " + what + ": " + err.Error()}
		}
	}
	containerModeApplied.Store(pool.UID, pool.Generation)
	r.warnIgnoredFields(pool)
	return nil
}

// ensureRunnerIsolation is ensureContainerMode for isolation Runner: the runners'
// hook slots (runner/hookslot.go) are made as runners claim them; the pool gives them
// the hook's configuration (a ConfigMap owned by the pool). containerMode.namespace,
// whose Pod Security labels the slots' namespaces copy, must exist, and a controller
// that watches some namespaces only must watch at least the pool's first slot's.
func (r *Reconciler) ensureRunnerIsolation(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	cm := pool.Spec.ContainerMode
	if first := v1alpha1.ContainerHookSlotNamespace(pool, 0); len(r.WatchedNamespaces) > 0 && !slices.Contains(r.WatchedNamespaces, first) {
		return &controller.ConfigError{Reason: v1alpha1.ReasonNamespaceNotWatched, Message: fmt.Sprintf(
			"containerMode.isolation Runner gives each runner a namespace of its own (%s, then …-1, …-2), and the controller "+
				"watches only %s: it could not see the workflow pods there; let it watch every namespace (no --namespaces), "+
				"add those namespaces to --namespaces (the Helm chart's watchNamespaces), or set containerMode.isolation: Pool",
			first, strings.Join(r.WatchedNamespaces, ", "))}
	}
	if v, ok := containerModeApplied.Load(pool.UID); ok && v.(int64) == pool.Generation && pool.Generation != 0 {
		return nil
	}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: cm.Namespace}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
		return &controller.ConfigError{Reason: v1alpha1.ReasonNamespaceNotFound, Message: fmt.Sprintf(
			"containerMode.namespace %q does not exist: create it with a Pod Security level, such as "+
				"pod-security.kubernetes.io/enforce: baseline; each runner's hook namespace copies it", cm.Namespace)}
	} else if err != nil {
		return fmt.Errorf("reading containerMode.namespace %s: %w", cm.Namespace, err)
	}
	owner := metav1ac.OwnerReference().WithAPIVersion(v1alpha1.GroupVersion.String()).WithKind("RunnerPool").
		WithName(pool.Name).WithUID(pool.UID).WithController(true).WithBlockOwnerDeletion(true)
	if err := r.Client.Apply(ctx, hookConfigMap(pool).WithOwnerReferences(owner), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return &controller.ConfigError{Reason: v1alpha1.ReasonContainerModeFailed, Message: "applying the container hook's ConfigMap: " + err.Error()}
	}
	containerModeApplied.Store(pool.UID, pool.Generation)
	r.warnIgnoredFields(pool)
	return nil
}

// removeContainerMode deletes, as the pool goes (its runners gone), the RoleBinding of
// the pool's hook identity in containerMode.namespace (isolation Pool) and its runners'
// hook namespaces (isolation Runner), found by label wherever the pool's spec pointed
// before. ServiceAccounts and the ConfigMap go with the pool (owner references).
func (r *Reconciler) removeContainerMode(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	containerModeApplied.Delete(pool.UID)
	hookSlotsPruned.Delete(pool.UID)
	if r.Slots != nil {
		r.Slots.Forget(pool.UID)
	}
	if !pool.Spec.ContainerMode.IsKubernetes() {
		return nil
	}
	var slots corev1.NamespaceList
	if err := r.APIReader.List(ctx, &slots, runner.HookSlotsOf(pool)); err != nil {
		return fmt.Errorf("listing the pool's container hook namespaces: %w", err)
	}
	for i := range slots.Items {
		if ns := &slots.Items[i]; ns.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the container hook namespace %s: %w", ns.Name, err)
			}
		}
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: pool.Spec.ContainerMode.Namespace, Name: HookRoleBindingName(pool)}}
	if err := r.Client.Delete(ctx, binding); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the container hook's role binding: %w", err)
	}
	return nil
}

// HookRoleBindingName is the RoleBinding of a pool's hook identity in
// containerMode.namespace: it names the pool's namespace too, as pools of several
// namespaces may send workflow pods to one namespace.
func HookRoleBindingName(pool *v1alpha1.RunnerPool) string {
	return "gantry-container-hook." + pool.Namespace + "." + pool.Name
}

func hookServiceAccount(pool *v1alpha1.RunnerPool) *corev1ac.ServiceAccountApplyConfiguration {
	// The runner pod mounts a projected token of its own; nothing else gets one.
	return corev1ac.ServiceAccount(v1alpha1.ContainerHookServiceAccountName(pool.Name), pool.Namespace).
		WithLabels(runner.HookLabels(pool)).WithAutomountServiceAccountToken(false)
}

func hookRoleBinding(pool *v1alpha1.RunnerPool) *rbacv1ac.RoleBindingApplyConfiguration {
	return rbacv1ac.RoleBinding(HookRoleBindingName(pool), pool.Spec.ContainerMode.Namespace).
		WithLabels(runner.HookLabels(pool)).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(ContainerHookClusterRole)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(pool.Namespace).
			WithName(v1alpha1.ContainerHookServiceAccountName(pool.Name)))
}

// hookConfigMap is the pool's hook ConfigMap (runner.HookConfigData), which its runner
// pods mount.
func hookConfigMap(pool *v1alpha1.RunnerPool) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(v1alpha1.ContainerHookServiceAccountName(pool.Name), pool.Namespace).
		WithLabels(runner.HookLabels(pool)).WithData(runner.HookConfigData(pool))
}
