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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// ContainerHookClusterRole is runner.ContainerHookClusterRole, the ClusterRole the
// controller binds where a hook works.
const ContainerHookClusterRole = runner.ContainerHookClusterRole

// ContainerHookRules are ContainerHookClusterRole's rules, as shipped.
var ContainerHookRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"get", "create"}},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "delete"}},
}

// fieldManager names Gantry's server-side applies.
const fieldManager = "gantry"

// containerModeApplied remembers, per pool UID, the generation whose hook identity and
// template this process applied: a pool is reconciled at every runner change, and the
// objects change only with the spec.
var containerModeApplied sync.Map

// ensureContainerMode gives a Kubernetes-mode pool what its runners' hook needs, before
// any runner pod asks for it: in the pool's namespace the ServiceAccount and the
// ConfigMap with the workflow-pod template (both owned by the pool, so they go with
// it), and in containerMode.namespace a RoleBinding of ContainerHookClusterRole to that
// ServiceAccount (another namespace: it cannot be owned by the pool; drain removes
// it). Applied with server-side apply once per pool generation. A containerMode.namespace
// that is the pool's own, that the controller does not watch (WatchedNamespaces: it
// could not see the anchors and workflow pods there), or that does not exist, is a
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
		"ConfigMap":      hookTemplateConfigMap(pool).WithOwnerReferences(owner),
	} {
		if err := r.Client.Apply(ctx, obj, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return &controller.ConfigError{Reason: v1alpha1.ReasonContainerModeFailed, Message: "applying the container hook's " + what + ": " + err.Error()}
		}
	}
	containerModeApplied.Store(pool.UID, pool.Generation)
	return nil
}

// ensureRunnerIsolation is ensureContainerMode for isolation Runner: the runners'
// hook slots (runner/hookslot.go) are made as runners claim them; the pool gives them
// the workflow-pod template (a ConfigMap owned by the pool). containerMode.namespace,
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
	if err := r.Client.Apply(ctx, hookTemplateConfigMap(pool).WithOwnerReferences(owner), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return &controller.ConfigError{Reason: v1alpha1.ReasonContainerModeFailed, Message: "applying the container hook's ConfigMap: " + err.Error()}
	}
	containerModeApplied.Store(pool.UID, pool.Generation)
	return nil
}

// removeContainerMode deletes, as the pool goes (its runners gone), the RoleBinding of
// the pool's hook identity in containerMode.namespace (isolation Pool) and its runners'
// hook namespaces (isolation Runner), found by label wherever the pool's spec pointed
// before. ServiceAccounts and the ConfigMap go with the pool (owner references).
func (r *Reconciler) removeContainerMode(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	containerModeApplied.Delete(pool.UID)
	hookSlotsPruned.Delete(pool.UID)
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

func hookLabels(pool *v1alpha1.RunnerPool) map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy:     v1alpha1.ManagedByValue,
		v1alpha1.LabelPool:          pool.Name,
		v1alpha1.LabelPoolNamespace: pool.Namespace,
	}
}

func hookServiceAccount(pool *v1alpha1.RunnerPool) *corev1ac.ServiceAccountApplyConfiguration {
	// The runner pod mounts a projected token of its own; nothing else gets one.
	return corev1ac.ServiceAccount(v1alpha1.ContainerHookServiceAccountName(pool.Name), pool.Namespace).
		WithLabels(hookLabels(pool)).WithAutomountServiceAccountToken(false)
}

func hookRoleBinding(pool *v1alpha1.RunnerPool) *rbacv1ac.RoleBindingApplyConfiguration {
	return rbacv1ac.RoleBinding(HookRoleBindingName(pool), pool.Spec.ContainerMode.Namespace).
		WithLabels(hookLabels(pool)).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(ContainerHookClusterRole)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(pool.Namespace).
			WithName(v1alpha1.ContainerHookServiceAccountName(pool.Name)))
}

func hookTemplateConfigMap(pool *v1alpha1.RunnerPool) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(v1alpha1.ContainerHookServiceAccountName(pool.Name), pool.Namespace).
		WithLabels(hookLabels(pool)).
		WithData(map[string]string{runner.HookTemplateKey: string(WorkflowPodTemplateYAML(pool))})
}

// WorkflowPodTemplateYAML is the hook template (ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE)
// of a Kubernetes-mode pool: a PodTemplateSpec the hook merges into each workflow pod.
// Gantry's part, which the pool's workflowPodTemplate cannot take away:
//   - the labels the controller's pod cache and the runner NetworkPolicy select
//     (app.kubernetes.io/managed-by: gantry, gantry.dev/runner, empty: the hook knows the
//     runner, by its runner-pod label), the pool and its namespace, and
//     gantry.dev/container-hook: workflow;
//   - the runner pod's security defaults: no ServiceAccount token, no Service
//     variables, seccomp RuntimeDefault and, for the job container, no privilege
//     escalation, unless the pool's template sets a securityContext.
func WorkflowPodTemplateYAML(pool *v1alpha1.RunnerPool) []byte {
	t := pool.Spec.ContainerMode.WorkflowPodTemplate
	if t == nil {
		t = &v1alpha1.WorkflowPodTemplate{}
	}
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	for k, v := range hookLabels(pool) {
		labels[k] = v
	}
	labels[v1alpha1.LabelRunner] = ""
	labels[v1alpha1.LabelWorkflowPod] = v1alpha1.ContainerHookWorkflow
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		NodeSelector:                 t.NodeSelector,
		Tolerations:                  t.Tolerations,
		SecurityContext:              t.SecurityContext,
		PriorityClassName:            t.PriorityClassName,
		RuntimeClassName:             t.RuntimeClassName,
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	}
	job := corev1.Container{Name: "$job", SecurityContext: t.JobContainerSecurityContext}
	if job.SecurityContext == nil {
		job.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}
	}
	if t.Resources != nil {
		job.Resources = *t.Resources
	}
	spec.Containers = []corev1.Container{job}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: t.Annotations}, Spec: spec}
	out, err := yaml.Marshal(tmpl)
	if err != nil {
		// A PodTemplateSpec always marshals.
		panic(err)
	}
	return out
}
