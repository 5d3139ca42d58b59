package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	containerhooks "github.com/gantry-dev/gantry/config/container-hooks"
	"github.com/gantry-dev/gantry/internal/hookrelease"
)

// This file is what Kubernetes mode gives a runner pod: the hook's identity and token, its
// environment, and its configuration (Gantry's wrapper of GitHub's hook and the
// workflow-pod template, from the pool's ConfigMap). What the hook then does is
// hookrelease's table; the pods it makes are watched and removed in hookpods.go, and the
// namespace and ServiceAccount it works with are claimed in hookslot.go.

// Environment of the runner container in Kubernetes mode: what GitHub's Kubernetes
// container hook reads (hookrelease), and the hook Gantry's wrapper runs.
const (
	EnvContainerHooks        = hookrelease.EnvContainerHooks
	EnvRunnerPodName         = hookrelease.EnvPodName
	EnvKubernetesNamespace   = hookrelease.EnvNamespace
	EnvContainerHookTemplate = hookrelease.EnvTemplate
	EnvPrepareJobTimeout     = hookrelease.EnvPrepareJobTimeout
	EnvRequireJobContainer   = hookrelease.EnvRequireJobContainer
	// EnvWrappedHook is the hook Gantry's wrapper (ACTIONS_RUNNER_CONTAINER_HOOKS) runs:
	// containerMode.hookPath.
	EnvWrappedHook = "GANTRY_CONTAINER_HOOK"
)

// Volumes Kubernetes mode adds to the runner pod.
const (
	// hookTokenVolume is the ServiceAccount token the hook calls the API server with,
	// mounted where in-cluster clients look for it, in the runner container only.
	hookTokenVolume = "gantry-container-hook-token"
	// HookTokenExpirationSeconds is the token's lifetime; the kubelet renews it at 80%.
	// The API server's minimum is 600.
	HookTokenExpirationSeconds = 3600
	// hookTemplateVolume is the pool's ConfigMap holding the hook's configuration.
	hookTemplateVolume = "gantry-container-hook-template"
	// HookTemplateDir is where the runner container mounts the pool's hook ConfigMap:
	// the wrapper (HookWrapperKey) and the workflow-pod template (HookTemplateKey).
	HookTemplateDir = "/etc/gantry/container-hook"
	// HookTemplateKey is the template, a PodTemplateSpec written as JSON (which the hook
	// reads as the YAML it is): the wrapper adds to a copy of it.
	HookTemplateKey = "workflow-pod.json"
	// HookWrapperKey is Gantry's wrapper of GitHub's hook (config/container-hooks/hook.js).
	HookWrapperKey = "hook.js"
	// legacyTemplateKey is where Gantry before the wrapper put the template: the runner
	// pods it made, busy with a job through an upgrade, still read it there.
	legacyTemplateKey = "workflow-pod.yaml"
	// HookWrapperPath is ACTIONS_RUNNER_CONTAINER_HOOKS: the wrapper where the runner
	// container mounts it.
	HookWrapperPath = HookTemplateDir + "/" + HookWrapperKey
	// workVolumeName is the runner's work directory volume (workVolume type Ephemeral).
	workVolumeName = "gantry-work"
	// ServiceAccountTokenDir is where in-cluster clients read the token, CA and namespace.
	ServiceAccountTokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// applyContainerMode makes a runner pod of a Kubernetes-mode pool able to run the hook:
// the ServiceAccount of the runner's hook (hookOf: its slot's, or with isolation Pool
// the pool's) and a projected token of it, valid HookTokenExpirationSeconds,
// in the runner container alone (no other container, no other pool, gets a token); the
// hook's environment; the hook template from the pool's ConfigMap; and the work volume.
// A template's automountServiceAccountToken is turned off: the projected token takes the
// place of the automatic one, at the same path. Pools in other modes are left alone.
func applyContainerMode(pod *corev1.Pod, runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) {
	cm := pool.Spec.ContainerMode
	if !cm.IsKubernetes() {
		return
	}
	hook := hookOf(runner, pool)
	pod.Spec.ServiceAccountName = hook.ServiceAccount
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: hookTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o444),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](HookTokenExpirationSeconds)}},
				{ConfigMap: &corev1.ConfigMapProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
				}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
					Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
				}}}},
			},
		}}},
		corev1.Volume{Name: hookTemplateVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: v1alpha1.ContainerHookServiceAccountName(pool.Name)},
		}}},
	)
	wv := cm.WorkVolume
	var work *corev1.VolumeMount
	switch {
	case wv != nil && wv.Type == v1alpha1.WorkVolumeEphemeral && wv.Ephemeral != nil:
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: workVolumeName, VolumeSource: corev1.VolumeSource{
			Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: wv.Ephemeral.StorageClassName,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: wv.Ephemeral.Size,
					}},
				},
			}},
		}})
		work = &corev1.VolumeMount{Name: workVolumeName, MountPath: wv.MountPathOrDefault()}
	case wv != nil && wv.Type == v1alpha1.WorkVolumeCache:
		// cacheVolumes added the pod volume named after the cache.
		work = &corev1.VolumeMount{Name: wv.Cache, MountPath: wv.MountPathOrDefault()}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != v1alpha1.RunnerContainerName {
			continue
		}
		c.Env = append(c.Env, HookEnv(cm, hook.Namespace)...)
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: hookTokenVolume, MountPath: ServiceAccountTokenDir, ReadOnly: true},
			corev1.VolumeMount{Name: hookTemplateVolume, MountPath: HookTemplateDir, ReadOnly: true},
		)
		if work != nil {
			c.VolumeMounts = append(c.VolumeMounts, *work)
		}
	}
}

// hookOf is where the runner's hook works: status.containerHook (claimHookSlot), or,
// for a runner of a pool with isolation Pool that has none recorded, the pool's
// ServiceAccount and containerMode.namespace.
func hookOf(runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) v1alpha1.RunnerContainerHook {
	if runner != nil && runner.Status.ContainerHook != nil {
		return *runner.Status.ContainerHook
	}
	return v1alpha1.RunnerContainerHook{
		Namespace:      pool.Spec.ContainerMode.Namespace,
		ServiceAccount: v1alpha1.ContainerHookServiceAccountName(pool.Name),
	}
}

// HookEnv is the runner container's environment for the hook of a Kubernetes-mode pool
// working in namespace: the runner runs Gantry's wrapper, which runs containerMode.hookPath.
// No ACTIONS_RUNNER_USE_KUBE_SCHEDULER: the hook of v0.8.1 never reads it
// (containerMode.useKubeScheduler is ignored).
func HookEnv(cm *v1alpha1.ContainerModeSpec, namespace string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: EnvContainerHooks, Value: HookWrapperPath},
		{Name: EnvWrappedHook, Value: cm.HookPathOrDefault()},
		{Name: EnvRunnerPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: EnvKubernetesNamespace, Value: namespace},
		{Name: EnvContainerHookTemplate, Value: HookTemplateDir + "/" + HookTemplateKey},
		{Name: EnvPrepareJobTimeout, Value: strconv.Itoa(int(cm.PrepareJobTimeoutOrDefault().Seconds()))},
		{Name: EnvRequireJobContainer, Value: strconv.FormatBool(cm.RequireJobContainerOrDefault())},
	}
}

// HookConfigData is the data of a Kubernetes-mode pool's hook ConfigMap
// (<pool>-container-hook), which every runner pod of the pool mounts at HookTemplateDir:
// Gantry's wrapper and the workflow-pod template. Written once per pool generation: the
// wrapper's per-job changes (port mappings, service names) cost no write.
func HookConfigData(pool *v1alpha1.RunnerPool) map[string]string {
	tmpl := string(WorkflowPodTemplateJSON(pool))
	return map[string]string{
		HookWrapperKey:    containerhooks.Wrapper,
		HookTemplateKey:   tmpl,
		legacyTemplateKey: tmpl, // JSON is YAML
	}
}

// WorkflowPodTemplateJSON is the hook template (ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE) of a
// Kubernetes-mode pool: a PodTemplateSpec the hook merges into each workflow pod and step
// pod (hookrelease: labels added, pod spec fields replaced, "$job" merged into the job
// container). Gantry's part, which the pool's workflowPodTemplate cannot take away:
//   - the labels the controller's pod cache and the runner NetworkPolicy select
//     (app.kubernetes.io/managed-by: gantry, gantry.dev/runner, empty: the hook knows the
//     runner, by its runner-pod label), the pool and its namespace, and
//     gantry.dev/container-hook: workflow;
//   - the runner pod's security defaults: no ServiceAccount token, no Service
//     variables, seccomp RuntimeDefault and the hook's own fsGroup 1001 (the template's
//     securityContext replaces the hook's) and, for the job container, no privilege
//     escalation, unless the pool's template sets a securityContext.
func WorkflowPodTemplateJSON(pool *v1alpha1.RunnerPool) []byte {
	t := pool.Spec.ContainerMode.WorkflowPodTemplate
	if t == nil {
		t = &v1alpha1.WorkflowPodTemplate{}
	}
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	for k, v := range HookLabels(pool) {
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
		spec.SecurityContext = &corev1.PodSecurityContext{
			FSGroup:        ptr.To(hookFSGroup),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	job := corev1.Container{Name: hookrelease.ExtensionPrefix + hookrelease.JobContainer, SecurityContext: t.JobContainerSecurityContext}
	if job.SecurityContext == nil {
		job.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}
	}
	if t.Resources != nil {
		job.Resources = *t.Resources
	}
	spec.Containers = []corev1.Container{job}
	out, err := json.Marshal(corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: t.Annotations}, Spec: spec})
	if err != nil {
		// A PodTemplateSpec always marshals.
		panic(err)
	}
	return out
}

// hookFSGroup is the fsGroup the hook of v0.8.1 gives the workflow pod (createJobPod).
const hookFSGroup int64 = 1001

// HookLabels are the labels of what Gantry makes for a Kubernetes-mode pool's hook: its
// ServiceAccount and ConfigMap, its RoleBinding, and the hook's pods (through the template).
func HookLabels(pool *v1alpha1.RunnerPool) map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy:     v1alpha1.ManagedByValue,
		v1alpha1.LabelPool:          pool.Name,
		v1alpha1.LabelPoolNamespace: pool.Namespace,
	}
}

// poolPodHash is TemplateHash of the pool's template, and in Kubernetes mode of its
// containerMode and of the shape Gantry gives the hook (hookShape) too, which shape the
// runner pod as much (its environment, token and work volume): a changed containerMode,
// or a Gantry that runs the hook differently, makes the pool's idle and pending runners
// outdated, as a changed template does. Pools in other modes keep TemplateHash of their
// template alone, so an upgrade outdates none of their runners.
func poolPodHash(pool *v1alpha1.RunnerPool) string {
	h := TemplateHash(pool.Spec.Template)
	if !pool.Spec.ContainerMode.IsKubernetes() || h == "" {
		return h
	}
	b, err := json.Marshal(pool.Spec.ContainerMode)
	if err != nil {
		return h
	}
	sum := sha256.Sum256(append([]byte(h+hookShape), b...))
	return hex.EncodeToString(sum[:8])
}

// hookShape names how Gantry runs the hook; a new one outdates the idle runners of
// Kubernetes-mode pools made by an earlier Gantry (they ran GitHub's hook directly).
const hookShape = "wrapper/1"
