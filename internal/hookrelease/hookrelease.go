// Package hookrelease is what GitHub's Kubernetes container hook does at the release the
// official runner image ships as /home/runner/k8s-novolume: actions/runner-container-hooks
// v0.8.1 (actions/runner images/Dockerfile unpacks actions-runner-hooks-k8s-0.8.1.zip there,
// and 0.7.0 into /home/runner/k8s). At every release tag up to v0.8.1, and in upstream's
// newest layout, the hook is packages/k8s: there is no packages/k8s-novolume; v0.8.0 made
// packages/k8s the no-volume hook ("Remove dependency on the runner's volume", #244).
//
// The controller (the hook's ClusterRole, the runner pod's environment, the names of the
// pods and Secrets it watches and removes) and the simulator (which plays the hook) read
// it from here, so that one table says it. Paths are in the repository at v0.8.1:
//
//	command            what v0.8.1 does                                                 source
//	every command      one SelfSubjectAccessReview per verb of Permissions in the       packages/k8s/src/index.ts;
//	                   namespace (ACTIONS_RUNNER_KUBERNETES_NAMESPACE, else the         src/k8s/index.ts requiredPermissions,
//	                   in-cluster one); one refused fails the command                   isAuthPermissionsOK, namespace
//	prepare_job        "Job Container is required." without container:; deletes the     src/hooks/prepare-job.ts;
//	                   runner's pods (LabelRunnerPod); builds WorkflowPodName(pod):     src/k8s/index.ts createJobPod,
//	                   the job container (tail -f /dev/null), one container per        containerPorts, createDockerSecret,
//	                   service named after its image, an fs-init init container of     waitForPodPhases, execCpToPod;
//	                   ACTIONS_RUNNER_IMAGE as uid 1001, emptyDir volumes, fsGroup      src/k8s/utils.ts
//	                   1001; a port "H:C" becomes containerPort C with hostPort H,     mergePodSpecWithOptions,
//	                   "C" a containerPort alone; container.credentials become a        mergeContainerWithOptions
//	                   kubernetes.io/dockerconfigjson Secret SecretPrefix(pod)+8
//	                   made before the pod; merges the template (below); creates the
//	                   pod — refused, it deletes the pods (not the Secret) and fails
//	                   "failed to create job pod: <server's message>"; waits for
//	                   Running (1 s doubling to 20 s, until the waits pass
//	                   ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS, default 600; any
//	                   other phase or a failed read fails at once); copies the
//	                   workspace in by tar over exec and checks its hash by exec;
//	                   execs once more to learn whether the image is alpine
//	run_script_step    execs into the job container (mkdir, copy _temp in, merge,       src/hooks/run-script-step.ts
//	                   the step's script, copy the file commands out); writes no
//	                   Secret: the step's environment is in its script
//	run_container_step a Dockerfile action fails "Building container actions is not    src/hooks/run-container-step.ts;
//	                   currently supported", an image action without an entrypoint     src/k8s/index.ts
//	                   "failed to start the container since the entrypoint is          createContainerStepPod
//	                   overwritten"; otherwise creates StepPodPrefix(pod)+8: the
//	                   step's image as container "job" (tail -f /dev/null, the
//	                   $job template container merged), no service, no init
//	                   container; waits for Running as above; copies the workspace
//	                   out of the workflow pod and into the step pod, execs the
//	                   entrypoint, and deletes the step pod whatever happened
//	cleanup_job        deletes the runner's pods and Secrets (LabelRunnerPod)          src/hooks/cleanup-job.ts, pruneSecrets
//	placement          never reads the runner pod: no nodeName, no affinity; the       src/k8s/index.ts (getPodByName and
//	                   scheduler places every pod. ACTIONS_RUNNER_USE_KUBE_SCHEDULER    utils.ts useKubeScheduler are never
//	                   is never read                                                    called)
//	template           ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE, a PodTemplateSpec:       src/k8s/utils.ts readExtensionFromFile,
//	                   labels and annotations added; a container named "$job" (or      mergeObjectMeta, mergePodSpecWithOptions,
//	                   "$<service container>") merged into that container — env,       mergeContainerWithOptions
//	                   volumeMounts and ports appended, name and image kept, any
//	                   other field replaced; other containers appended; volumes
//	                   appended; any other pod spec field replaced. So a template
//	                   can add a hostAliases entry but cannot take a hostPort away
//	response           prepare_job's context ports are containerPort → hostPort, of    src/hooks/prepare-job.ts
//	                   ports that have a hostPort only                                  generateResponseFile
//
// The volume hook of v0.7.0 (the image's /home/runner/k8s) differs: it reads the runner pod
// (ACTIONS_RUNNER_POD_NAME) for its node and sets nodeName, or node affinity with
// ACTIONS_RUNNER_USE_KUBE_SCHEDULER; it mounts the runner's work claim; it runs container
// steps as batch Jobs and so checks batch jobs get/list/create/delete too (v0.7.0
// packages/k8s/src/k8s/index.ts). Gantry does not support it.
package hookrelease

import "time"

// Release is the hook release this package describes.
const Release = "v0.8.1"

// Environment the hook (or the runner, for RequireJobContainer) reads.
const (
	// EnvContainerHooks names the hook script the runner runs (actions/runner
	// ContainerHookManager: a .js file runs with the runner's own node).
	EnvContainerHooks = "ACTIONS_RUNNER_CONTAINER_HOOKS"
	// EnvPodName is the runner pod's name: the hook names and labels what it makes after it.
	EnvPodName = "ACTIONS_RUNNER_POD_NAME"
	// EnvNamespace is where the hook works.
	EnvNamespace = "ACTIONS_RUNNER_KUBERNETES_NAMESPACE"
	// EnvTemplate is the path of the PodTemplateSpec merged into the pods the hook makes.
	EnvTemplate = "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"
	// EnvPrepareJobTimeout bounds the waits for a pod to run, in seconds.
	EnvPrepareJobTimeout = "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS"
	// EnvRequireJobContainer "true" makes the runner refuse jobs without container:.
	EnvRequireJobContainer = "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER"
	// EnvRunnerImage is the image of the workflow pod's fs-init container.
	EnvRunnerImage = "ACTIONS_RUNNER_IMAGE"
	// EnvUseKubeScheduler and EnvClaimName are read by v0.7.0's volume hook only.
	EnvUseKubeScheduler = "ACTIONS_RUNNER_USE_KUBE_SCHEDULER"
	EnvClaimName        = "ACTIONS_RUNNER_CLAIM_NAME"
)

// Defaults of the hook.
const (
	// DefaultPrepareJobTimeout is the wait for a pod to run without EnvPrepareJobTimeout.
	DefaultPrepareJobTimeout = 600 * time.Second
	// DefaultRunnerImage is the fs-init container's image without EnvRunnerImage.
	DefaultRunnerImage = "ghcr.io/actions/actions-runner:latest"
)

// Names and labels of what the hook makes.
const (
	// LabelRunnerPod labels every pod and Secret the hook makes with the runner pod's name.
	LabelRunnerPod = "runner-pod"
	// JobContainer is the job container's name, in the workflow pod and in a step pod.
	JobContainer = "job"
	// ExtensionPrefix marks a template container merged into the hook's container of
	// that name ("$job").
	ExtensionPrefix = "$"
	// FSInitContainer is the workflow pod's init container.
	FSInitContainer = "fs-init"
	// maxName bounds the names; suffixLength is the random suffix of step pods and Secrets.
	maxName      = 63
	suffixLength = 8
	// SuffixLength is the length of the random suffix of step pod and Secret names.
	SuffixLength = suffixLength
)

// WorkflowPodName is the workflow pod of runner pod pod: the name cut to fit, "-workflow".
func WorkflowPodName(pod string) string { return cut(pod, maxName-len("-workflow")) + "-workflow" }

// StepPodPrefix starts the names of runner pod pod's step pods; SuffixLength random
// characters follow.
func StepPodPrefix(pod string) string {
	return cut(pod, maxName-len("-step-")-suffixLength) + "-step-"
}

// SecretPrefix starts the names of runner pod pod's Secrets; SuffixLength random
// characters follow.
func SecretPrefix(pod string) string {
	return cut(pod, maxName-len("-secret-")-suffixLength) + "-secret-"
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Permission is one entry of the hook's requiredPermissions: verbs on a resource (and
// subresource) of the core group, in the hook's namespace.
type Permission struct {
	Group       string
	Resource    string
	Subresource string
	Verbs       []string
}

// Permissions are requiredPermissions of v0.8.1 (src/k8s/index.ts), in its order: the hook
// reviews each verb before every command, and so a runner's role must grant exactly
// these. Verbs keep the hook's order.
var Permissions = []Permission{
	{Resource: "pods", Verbs: []string{"get", "list", "create", "delete"}},
	{Resource: "pods", Subresource: "exec", Verbs: []string{"get", "create"}},
	{Resource: "pods", Subresource: "log", Verbs: []string{"get", "list", "watch"}},
	{Resource: "secrets", Verbs: []string{"create", "delete", "get", "list"}},
}

// Messages of the hook that a job's log shows, from the source of v0.8.1.
const (
	MsgJobContainerRequired = "Job Container is required."
	MsgCreateJobPodFailed   = "failed to create job pod: "
	MsgDockerfileAction     = "Building container actions is not currently supported"
	MsgNoEntrypoint         = "failed to start the container since the entrypoint is overwritten"
	MsgContainerStepFailed  = "failed to run script step: "
)
