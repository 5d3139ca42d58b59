package runner

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Environment of the runner container in Kubernetes mode: what GitHub's Kubernetes
// container hooks read (actions/runner-container-hooks, packages/k8s and k8s-novolume).
const (
	EnvContainerHooks        = "ACTIONS_RUNNER_CONTAINER_HOOKS"
	EnvRunnerPodName         = "ACTIONS_RUNNER_POD_NAME"
	EnvKubernetesNamespace   = "ACTIONS_RUNNER_KUBERNETES_NAMESPACE"
	EnvContainerHookTemplate = "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"
	EnvPrepareJobTimeout     = "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS"
	EnvRequireJobContainer   = "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER"
	EnvUseKubeScheduler      = "ACTIONS_RUNNER_USE_KUBE_SCHEDULER"
)

// Volumes Kubernetes mode adds to the runner pod.
const (
	// hookTokenVolume is the ServiceAccount token the hook calls the API server with,
	// mounted where in-cluster clients look for it, in the runner container only.
	hookTokenVolume = "gantry-container-hook-token"
	// HookTokenExpirationSeconds is the token's lifetime; the kubelet renews it at 80%.
	// The API server's minimum is 600.
	HookTokenExpirationSeconds = 3600
	// hookTemplateVolume is the pool's ConfigMap holding the hook's workflow-pod template.
	hookTemplateVolume = "gantry-container-hook-template"
	// HookTemplateDir and HookTemplateKey: the template file is HookTemplateDir/HookTemplateKey.
	HookTemplateDir = "/etc/gantry/container-hook"
	HookTemplateKey = "workflow-pod.yaml"
	// workVolumeName is the runner's work directory volume (workVolume type Ephemeral).
	workVolumeName = "gantry-work"
	// ServiceAccountTokenDir is where in-cluster clients read the token, CA and namespace.
	ServiceAccountTokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// applyContainerMode makes a runner pod of a Kubernetes-mode pool able to run the hook:
// the pool's ServiceAccount and a projected token of it, valid HookTokenExpirationSeconds,
// in the runner container alone (no other container, no other pool, gets a token); the
// hook's environment; the hook template from the pool's ConfigMap; and the work volume.
// A template's automountServiceAccountToken is turned off: the projected token takes the
// place of the automatic one, at the same path. Pools in other modes are left alone.
func applyContainerMode(pod *corev1.Pod, pool *v1alpha1.RunnerPool) {
	cm := pool.Spec.ContainerMode
	if !cm.IsKubernetes() {
		return
	}
	pod.Spec.ServiceAccountName = v1alpha1.ContainerHookServiceAccountName(pool.Name)
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
		c.Env = append(c.Env, HookEnv(cm)...)
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: hookTokenVolume, MountPath: ServiceAccountTokenDir, ReadOnly: true},
			corev1.VolumeMount{Name: hookTemplateVolume, MountPath: HookTemplateDir, ReadOnly: true},
		)
		if work != nil {
			c.VolumeMounts = append(c.VolumeMounts, *work)
		}
	}
}

// HookEnv is the runner container's environment for the hook of a Kubernetes-mode pool.
func HookEnv(cm *v1alpha1.ContainerModeSpec) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: EnvContainerHooks, Value: cm.HookPathOrDefault()},
		{Name: EnvRunnerPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: EnvKubernetesNamespace, Value: cm.Namespace},
		{Name: EnvContainerHookTemplate, Value: HookTemplateDir + "/" + HookTemplateKey},
		{Name: EnvPrepareJobTimeout, Value: strconv.Itoa(int(cm.PrepareJobTimeoutOrDefault().Seconds()))},
		{Name: EnvRequireJobContainer, Value: strconv.FormatBool(cm.RequireJobContainerOrDefault())},
	}
	if cm.UseKubeScheduler {
		env = append(env, corev1.EnvVar{Name: EnvUseKubeScheduler, Value: "true"})
	}
	return env
}
