package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ContainerModeType says how a pool's runners run jobs that declare container: or
// services:.
// +kubebuilder:validation:Enum=None;Kubernetes
type ContainerModeType string

const (
	// ContainerModeNone runs no container hooks: a job with container: or services:
	// needs a Docker daemon in the pod (the Docker-in-Docker examples).
	ContainerModeNone ContainerModeType = "None"
	// ContainerModeKubernetes runs GitHub's Kubernetes container hook (the no-volume
	// hook of actions/runner-container-hooks v0.8.1, which the official runner image ships
	// as /home/runner/k8s-novolume) behind Gantry's wrapper: the runner creates a workflow
	// pod (the job container and one container per service) in containerMode.namespace and
	// runs the steps in it, and image actions in step pods, without privileged Docker.
	ContainerModeKubernetes ContainerModeType = "Kubernetes"
)

// ContainerHookIsolation says what one runner's hook token can reach of the others'.
// +kubebuilder:validation:Enum=Runner;Pool
type ContainerHookIsolation string

const (
	// IsolationRunner: each runner's hook works with a ServiceAccount and in a namespace
	// of its own, reused by later runners only once it is empty.
	IsolationRunner ContainerHookIsolation = "Runner"
	// IsolationPool: the pool's runners share one ServiceAccount and
	// containerMode.namespace.
	IsolationPool ContainerHookIsolation = "Pool"
)

// WorkVolumeType says where the runner's work directory (/home/runner/_work) lives.
// +kubebuilder:validation:Enum=None;Ephemeral;Cache
type WorkVolumeType string

const (
	// WorkVolumeNone keeps the work directory on the runner container's own filesystem.
	WorkVolumeNone WorkVolumeType = "None"
	// WorkVolumeEphemeral puts it on a generic ephemeral volume (a PersistentVolumeClaim
	// made with the pod and deleted with it) of containerMode.workVolume.ephemeral.
	WorkVolumeEphemeral WorkVolumeType = "Ephemeral"
	// WorkVolumeCache puts it on a volume of the pool's cache named
	// containerMode.workVolume.cache: a warm checkout kept between jobs.
	WorkVolumeCache WorkVolumeType = "Cache"
)

// Defaults of Kubernetes mode.
const (
	// DefaultContainerHookPath is the no-volume Kubernetes hook (actions/runner-container-hooks
	// v0.8.1) where the official runner image (ghcr.io/actions/actions-runner) unpacks it.
	DefaultContainerHookPath = "/home/runner/k8s-novolume/index.js"
	// DefaultWorkVolumeMountPath is the runner's work directory in the official image.
	DefaultWorkVolumeMountPath = "/home/runner/_work"
	// DefaultPrepareJobTimeout bounds how long the hook waits for the workflow pod.
	DefaultPrepareJobTimeout = 5 * time.Minute
	// LabelHookRunnerPod is the label the hook puts on every pod and Secret it creates,
	// with the runner pod's name (ACTIONS_RUNNER_POD_NAME) as its value.
	LabelHookRunnerPod = "runner-pod"
	// LabelPoolNamespace names the pool's namespace on objects Gantry makes for the hook
	// outside it (slot namespaces, RoleBindings) and on the hook's pods (through the hook
	// template).
	LabelPoolNamespace = "gantry.dev/pool-namespace"
	// LabelWorkflowPod marks the objects of Kubernetes mode: "workflow" on the pods the
	// hook creates (workflow and step pods, set through the hook template), "slot" on a
	// hook slot's ServiceAccount and namespace (isolation Runner).
	LabelWorkflowPod = "gantry.dev/container-hook"
	// ContainerHookWorkflow and ContainerHookSlot are LabelWorkflowPod's values.
	ContainerHookWorkflow = "workflow"
	ContainerHookSlot     = "slot"
)

// ContainerModeSpec says how jobs that declare container: or services: run.
//
// In Kubernetes mode the runner runs GitHub's no-volume Kubernetes hook, behind Gantry's
// wrapper (which turns port mappings into container ports and names services, so that
// no hostPort reaches the cluster), with a ServiceAccount token of the pool's own
// (mounted only in this mode and valid one hour). The hook works in containerMode.namespace, never in the pool's
// namespace: the runners' JIT configurations and the pool's credentials stay where the
// runner's token can read nothing, and an admission policy lets that token create only
// the runner's own workflow pod and Secrets (docs/container-jobs.md, docs/security.md).
// +kubebuilder:validation:XValidation:rule="self.type == 'Kubernetes' || (!has(self.namespace) && !has(self.isolation) && !has(self.workVolume) && !has(self.workflowPodTemplate) && !has(self.prepareJobTimeout) && !has(self.requireJobContainer) && !has(self.hookPath) && !has(self.useKubeScheduler))",message="containerMode: namespace, isolation, workVolume, workflowPodTemplate, prepareJobTimeout, requireJobContainer, hookPath and useKubeScheduler apply only with type: Kubernetes; set type: Kubernetes or remove them"
// +kubebuilder:validation:XValidation:rule="self.type != 'Kubernetes' || (has(self.namespace) && size(self.namespace) > 0)",message="containerMode.namespace must name the namespace where workflow pods run when type is Kubernetes, such as ci-jobs: it must not be the pool's namespace, so job code cannot reach the runners' JIT configurations or the pool's credentials"
type ContainerModeSpec struct {
	// type is None (the default: no container hooks) or Kubernetes.
	// +optional
	// +kubebuilder:default=None
	Type ContainerModeType `json:"type,omitempty"`

	// namespace is where the hook creates workflow pods and their Secrets. It must exist
	// and must not be the pool's namespace. Give it a Pod Security level
	// (pod-security.kubernetes.io/enforce: baseline suits most job images).
	//
	// With isolation Runner (the default) it is the model of the namespaces the hook
	// works in, one per concurrent runner: Gantry makes NAMESPACE-HASH-N (HASH names the
	// pool) with this namespace's Pod Security labels, the runner NetworkPolicy and the
	// RoleBinding of that runner's own ServiceAccount; workflow pods never run in it
	// itself. With isolation Pool the hook of every runner of the pool works in it.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="containerMode.namespace must be a namespace name: lower-case letters, digits and dashes, such as ci-jobs"
	Namespace string `json:"namespace,omitempty"`

	// isolation is what a runner's hook token can read: Runner (the default) gives each
	// runner a ServiceAccount and a namespace of its own for its life, so job code reads
	// nothing of any other runner, of this pool or another; Pool lets the pool's runners
	// share one ServiceAccount and containerMode.namespace, so each can read the others'
	// workflow pods, logs and step Secrets. Runner needs a controller that watches every
	// namespace and may create namespaces (the cluster-wide install); choose Pool for a
	// namespaced install (--namespaces), and keep such a pool for one trust domain.
	// Unset: Runner.
	// +optional
	Isolation ContainerHookIsolation `json:"isolation,omitempty"`

	// workVolume is where the runner's work directory lives: None (the container's own
	// filesystem, the default), Ephemeral (a volume made with the pod) or Cache (a
	// volume of one of the pool's caches). The workflow pod never mounts it: the
	// no-volume hook copies the workspace in and out of it through exec.
	// +optional
	WorkVolume *WorkVolumeSpec `json:"workVolume,omitempty"`

	// workflowPodTemplate is merged into every workflow pod through the hook's template
	// (ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE), after Gantry's own defaults.
	// +optional
	WorkflowPodTemplate *WorkflowPodTemplate `json:"workflowPodTemplate,omitempty"`

	// prepareJobTimeout is how long the hook waits for the workflow pod to run
	// (ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS; the hook's own default is 10m). Gantry
	// ends the runner sooner when the workflow pod cannot start: an invalid image at
	// once, an image pull failure after recovery.imagePullGracePeriod, an
	// unschedulable pod after recovery.pendingTimeout. A duration from 10s to 1h;
	// default 5m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('10s') && duration(self) <= duration('1h')",message="containerMode.prepareJobTimeout must be a duration from 10s to 1h written with units, such as \"5m\" (a bare number such as \"600\" is refused)"
	PrepareJobTimeout *metav1.Duration `json:"prepareJobTimeout,omitempty"`

	// requireJobContainer refuses jobs without container: (ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER),
	// so no step runs in the runner container, next to the hook's token. Default true.
	// +optional
	RequireJobContainer *bool `json:"requireJobContainer,omitempty"`

	// hookPath is GitHub's hook script in the runner image, which Gantry's wrapper
	// (ACTIONS_RUNNER_CONTAINER_HOOKS) runs. Default: /home/runner/k8s-novolume/index.js,
	// where the official image unpacks the no-volume hook of runner-container-hooks
	// v0.8.1. The volume hook of v0.7.0 (/home/runner/k8s/index.js) cannot work: it
	// checks batch Jobs rights the hook's ClusterRole does not grant, reads the runner
	// pod, and mounts the runner's claim, which is in another namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="containerMode.hookPath must be an absolute path in the runner image, such as /home/runner/k8s-novolume/index.js"
	HookPath string `json:"hookPath,omitempty"`

	// useKubeScheduler is deprecated and ignored: the pool gets a Warning event
	// (IgnoredField) while it is set. It set ACTIONS_RUNNER_USE_KUBE_SCHEDULER, which only
	// the volume hook of v0.7.0 reads; the no-volume hook never reads it nor the runner
	// pod, and the scheduler places every workflow pod (use workflowPodTemplate's
	// nodeSelector and tolerations to steer it). Kept so that pools setting it stay valid.
	// +optional
	UseKubeScheduler bool `json:"useKubeScheduler,omitempty"`
}

// WorkVolumeSpec is where the runner's work directory lives.
// +kubebuilder:validation:XValidation:rule="self.type != 'Ephemeral' || has(self.ephemeral)",message="containerMode.workVolume.ephemeral must be set with type: Ephemeral, such as {size: 20Gi}"
// +kubebuilder:validation:XValidation:rule="self.type == 'Ephemeral' || !has(self.ephemeral)",message="containerMode.workVolume.ephemeral applies only with type: Ephemeral; remove it or set type: Ephemeral"
// +kubebuilder:validation:XValidation:rule="self.type != 'Cache' || (has(self.cache) && size(self.cache) > 0)",message="containerMode.workVolume.cache must name one of the pool's caches with type: Cache"
// +kubebuilder:validation:XValidation:rule="self.type == 'Cache' || !has(self.cache)",message="containerMode.workVolume.cache applies only with type: Cache; remove it or set type: Cache"
type WorkVolumeSpec struct {
	// type is None, Ephemeral or Cache.
	// +required
	Type WorkVolumeType `json:"type"`

	// ephemeral is the volume made with each runner pod (type Ephemeral).
	// +optional
	Ephemeral *EphemeralWorkVolume `json:"ephemeral,omitempty"`

	// cache names the entry of spec.caches whose volume holds the work directory
	// (type Cache). The runner container mounts it at mountPath; the template must not
	// mount it itself.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Cache string `json:"cache,omitempty"`

	// mountPath is the runner's work directory. Default /home/runner/_work.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="containerMode.workVolume.mountPath must be an absolute path, such as /home/runner/_work"
	MountPath string `json:"mountPath,omitempty"`
}

// EphemeralWorkVolume is a generic ephemeral volume for the runner's work directory.
type EphemeralWorkVolume struct {
	// storageClassName is the StorageClass of the volume; unset: the cluster's default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`
	// size of the volume, such as 20Gi.
	// +required
	Size resource.Quantity `json:"size"`
}

// WorkflowPodTemplate is what Gantry merges into each workflow pod, through the hook's
// template file: labels and annotations, placement, security and the job container's
// resources. The hook adds the containers, volumes, name and runner-pod label itself.
type WorkflowPodTemplate struct {
	// labels added to the workflow pod, besides Gantry's own (app.kubernetes.io/managed-by,
	// gantry.dev/pool, gantry.dev/pool-namespace, gantry.dev/runner, gantry.dev/container-hook),
	// which it may not set.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations added to the workflow pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// nodeSelector of the workflow pod and step pods: the scheduler places them on nodes
	// carrying these labels (the hook sets no node of its own).
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// tolerations of the workflow pod and step pods, for the taints of the nodes they
	// may run on.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// securityContext of the workflow pod. Unset: seccompProfile RuntimeDefault.
	// Privileged containers, host namespaces and hostPath volumes are refused whatever
	// this says (the admission policy of docs/security.md).
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// jobContainerSecurityContext is the job container's securityContext. Unset:
	// allowPrivilegeEscalation false.
	// +optional
	JobContainerSecurityContext *corev1.SecurityContext `json:"jobContainerSecurityContext,omitempty"`
	// resources of the job container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// priorityClassName of the workflow pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// runtimeClassName of the workflow pod, such as gvisor.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`
}

// IsKubernetes reports whether the pool runs the Kubernetes container hooks.
func (c *ContainerModeSpec) IsKubernetes() bool {
	return c != nil && c.Type == ContainerModeKubernetes
}

// PrepareJobTimeoutOrDefault returns prepareJobTimeout, or its default when unset.
func (c *ContainerModeSpec) PrepareJobTimeoutOrDefault() time.Duration {
	return durationOr(c.PrepareJobTimeout, DefaultPrepareJobTimeout)
}

// RequireJobContainerOrDefault returns requireJobContainer, true when unset.
func (c *ContainerModeSpec) RequireJobContainerOrDefault() bool {
	return c.RequireJobContainer == nil || *c.RequireJobContainer
}

// IsolatesRunners reports whether each runner's hook gets a ServiceAccount and a
// namespace of its own (isolation Runner, the default).
func (c *ContainerModeSpec) IsolatesRunners() bool {
	return c.IsKubernetes() && c.Isolation != IsolationPool
}

// HookPathOrDefault returns hookPath, or the official image's no-volume hook.
func (c *ContainerModeSpec) HookPathOrDefault() string {
	if c.HookPath == "" {
		return DefaultContainerHookPath
	}
	return c.HookPath
}

// MountPathOrDefault returns mountPath, or the official image's work directory.
func (w *WorkVolumeSpec) MountPathOrDefault() string {
	if w == nil || w.MountPath == "" {
		return DefaultWorkVolumeMountPath
	}
	return w.MountPath
}

// ContainerHookServiceAccountName is the ServiceAccount (and Role, RoleBinding) of a
// Kubernetes-mode pool's runners. The admission policy recognizes the hook's identity
// by this suffix.
func ContainerHookServiceAccountName(pool string) string {
	return pool + ContainerHookSuffix
}

// ContainerHookSlotServiceAccountName is the ServiceAccount of hook slot n of a pool
// with isolation Runner: one runner at a time holds it (the gantry.dev/runner label).
func ContainerHookSlotServiceAccountName(pool string, n int) string {
	return fmt.Sprintf("%s%s-%d", pool, ContainerHookSuffix, n)
}

// ContainerHookSlotNamespace is the namespace of hook slot n of a pool with isolation
// Runner: containerMode.namespace (cut to fit), a hash of the pool's namespace and name
// (pools sharing a containerMode.namespace get namespaces of their own), and n.
func ContainerHookSlotNamespace(pool *RunnerPool, n int) string {
	sum := sha256.Sum256([]byte(pool.Namespace + "/" + pool.Name))
	suffix := fmt.Sprintf("-%s-%d", hex.EncodeToString(sum[:])[:5], n)
	base := pool.Spec.ContainerMode.Namespace
	if max := 63 - len(suffix); len(base) > max {
		base = strings.TrimRight(base[:max], "-")
	}
	return base + suffix
}

// ContainerHookSuffix ends the names of a pool's ServiceAccount, Role, RoleBinding and
// template ConfigMap of Kubernetes mode.
const ContainerHookSuffix = "-container-hook"

// Conditions and reasons of Kubernetes mode.
const (
	// ConditionWorkflowPodReady (Runner, Kubernetes mode) is False while the runner's
	// workflow pod cannot start, with the reason and the image or the scheduler's message,
	// written at once; True once it runs, written with the runner's next status write (a
	// runner whose job ends first is removed without it). Absent while the runner has no
	// workflow pod.
	ConditionWorkflowPodReady = "WorkflowPodReady"

	// ReasonWorkflowPodRunning: the workflow pod runs.
	ReasonWorkflowPodRunning = "WorkflowPodRunning"
	// ReasonWorkflowPodInvalidImage: the job or a service image name is invalid; the
	// workflow pod is deleted at once, so the hook fails the job and the runner ends.
	ReasonWorkflowPodInvalidImage = "WorkflowPodInvalidImage"
	// ReasonWorkflowPodImagePullFailed: the job or a service image could not be pulled for
	// longer than recovery.imagePullGracePeriod; the workflow pod is deleted, so the hook
	// fails the job and the runner ends.
	ReasonWorkflowPodImagePullFailed = "WorkflowPodImagePullFailed"
	// ReasonWorkflowPodUnschedulable: the scheduler could not place the workflow pod for
	// longer than recovery.pendingTimeout; the workflow pod is deleted, so the hook fails
	// the job and the runner ends.
	ReasonWorkflowPodUnschedulable = "WorkflowPodUnschedulable"

	// The pool reasons below are those of its Ready (False) and Degraded (True)
	// conditions: the pool creates no runner until they are fixed.

	// ReasonContainerModeFailed: the pool's hook ServiceAccount, template ConfigMap or
	// RoleBinding could not be written; the message says why (often the controller's
	// rights: it needs bind on the gantry-container-hook ClusterRole).
	ReasonContainerModeFailed = "ContainerModeFailed"
	// ReasonNamespaceNotFound: containerMode.namespace does not exist; create it.
	ReasonNamespaceNotFound = "NamespaceNotFound"
	// ReasonNamespaceNotWatched: the controller watches only some namespaces
	// (--namespaces, the chart's watchNamespaces) and containerMode.namespace is not one
	// of them: it could not see the workflow pods there; the pool creates no runner.
	ReasonNamespaceNotWatched = "NamespaceNotWatched"
	// ReasonSameNamespace: containerMode.namespace is the pool's own namespace, where the
	// hook's token could read every runner's JIT configuration; the pool creates no runner.
	ReasonSameNamespace = "SameNamespace"
)
