package v1alpha1

// Condition types of a RunnerPool.
const (
	// ConditionReady is True when GitHub answered, for the pool's credentials, that its
	// scope and runner group exist and the credentials may manage their runners (checked
	// at most every 10 minutes per credentials and scope, every 30 s while it fails).
	ConditionReady = "Ready"
	// ConditionScalingUp is True while the pool creates runners toward its desired count.
	ConditionScalingUp = "ScalingUp"
	// ConditionScalingDown is True while the pool retires idle runners.
	ConditionScalingDown = "ScalingDown"
	// ConditionDegraded is True when the pool cannot make progress: repeated runner
	// failures, bad configuration or GitHub unavailable. The reason says which.
	ConditionDegraded = "Degraded"
	// ConditionScaleSetSession (demand.source ScaleSet only) is True while the pool's
	// scale set exists and its message session is open in the leader; False with reason
	// SessionConflict, ScaleSetNameTaken or ScaleSetUnavailable while it is not.
	ConditionScaleSetSession = "ScaleSetSession"
)

// Reasons of the ScaleSetSession condition.
const (
	// ReasonSessionActive: the session is open and long-polled.
	ReasonSessionActive = "SessionActive"
	// ReasonSessionConflict: the Actions service holds another session for the scale
	// set (409), most often that of a controller that was killed; retried with backoff
	// until the service lets the new one in.
	ReasonSessionConflict = "SessionConflict"
	// ReasonScaleSetNameTaken: a scale set with the pool's scale set name exists in the
	// runner group and was not created by Gantry for this pool; Gantry never takes it
	// over. Delete it on GitHub, or create a new pool with another demand.scaleSetName.
	ReasonScaleSetNameTaken = "ScaleSetNameTaken"
	// ReasonScaleSetUnavailable: the scale set or session could not be set up (the
	// Actions service refused the registration, failed or did not answer); retried.
	ReasonScaleSetUnavailable = "ScaleSetUnavailable"
	// ReasonNotLeader: this controller is not the leader; the leader holds the session.
	ReasonNotLeader = "NotLeader"
)

// Labels and annotations Gantry puts on the objects it owns.
const (
	// LabelPool names the RunnerPool of a Runner, its pod and its Secret.
	LabelPool = "gantry.dev/pool"
	// LabelRunner names the Runner of a pod or a Secret.
	LabelRunner = "gantry.dev/runner"
	// LabelManagedBy marks every object Gantry creates; informers are restricted to it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "gantry"
	// RunnerContainerName is the container of the pool template that runs the agent.
	RunnerContainerName = "runner"
	// Finalizer keeps a Runner until it is unregistered from GitHub.
	Finalizer = "gantry.dev/runner-cleanup"
	// CredentialsFinalizer keeps a pool's credentials Secret until the pools that use it
	// are gone: their runners are unregistered from GitHub with those credentials.
	CredentialsFinalizer = "gantry.dev/credentials-in-use"
	// AnnotationCredentialsSecret, on a RunnerPool, names the credentials Secret Gantry
	// holds with CredentialsFinalizer for it, so that it is let go when the pool changes
	// Secret or is deleted.
	AnnotationCredentialsSecret = "gantry.dev/credentials-secret"
)

// Reasons a Runner fails (status.reason), each with an event and a count in
// gantry_runner_failures_total. docs/troubleshooting.md says what to check for each.
const (
	// ReasonInvalidImageName: the runner container's image name cannot be parsed. Failed at once.
	ReasonInvalidImageName = "InvalidImageName"
	// ReasonImagePullFailed: the image of a container (the runner, an init container or
	// a sidecar) could not be pulled for longer than imagePullGracePeriod.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerConfigError: the kubelet could not build a container's
	// configuration (CreateContainerConfigError) — most often a Secret, ConfigMap or key
	// the template names does not exist — for longer than containerErrorGracePeriod.
	ReasonContainerConfigError = "ContainerConfigError"
	// ReasonContainerCreateFailed: the container runtime could not create or start a
	// container (CreateContainerError, RunContainerError) for longer than
	// containerErrorGracePeriod.
	ReasonContainerCreateFailed = "ContainerCreateFailed"
	// ReasonCrashLoop: an init container or a sidecar (an init container with
	// restartPolicy Always, Docker-in-Docker for one) kept crashing (CrashLoopBackOff)
	// past containerErrorGracePeriod before the runner ran a job.
	ReasonCrashLoop = "CrashLoop"
	// ReasonInitContainerFailed: an init container exited non-zero, so the pod failed
	// before the runner started. Failed at once.
	ReasonInitContainerFailed = "InitContainerFailed"
	// ReasonUnschedulable: the pod stayed unschedulable for longer than pendingTimeout.
	ReasonUnschedulable = "Unschedulable"
	// ReasonPendingTimeout: the pod was scheduled but did not run the runner agent within
	// pendingTimeout, for any other cause (a volume that never attaches or mounts, a
	// sidecar that never becomes ready, a container stuck creating). The message quotes
	// the pod's own last warning.
	ReasonPendingTimeout = "PendingTimeout"
	// ReasonEvicted: the pod was evicted or disrupted (node pressure, a drain,
	// preemption), before or while it ran a job.
	ReasonEvicted = "Evicted"
	// ReasonNodeLost: the pod stayed terminating longer than nodeLostTimeout (its node is
	// gone) and was force-deleted.
	ReasonNodeLost = "NodeLost"
	// ReasonNodeDeleted: the pod's node was deleted under it (a spot or preemptible
	// node reclaimed, a node removed without a drain): the pod garbage collector
	// removed the pod (DisruptionTarget DeletionByPodGC), or the pod is gone and so is
	// its node.
	ReasonNodeDeleted = "NodeDeleted"
	// ReasonDrainTimeout: the runner ran a job on a node being drained (cordoned, or
	// tainted for removal by cluster-autoscaler or Karpenter) for longer than the pool's
	// disruption.drainTimeout, and Gantry deleted its pod so that the drain could end.
	ReasonDrainTimeout = "DrainTimeout"
	// ReasonOOMKilled: the runner container was killed for using more memory than its
	// limit while it ran a job. Set only in a pool with disruption.rerunOOMKilled (which
	// re-runs such a job); elsewhere the runner ends as any runner whose job ended.
	ReasonOOMKilled = "OOMKilled"
	// ReasonRegistrationTimeout: the pod ran for registrationTimeout without the runner
	// coming online on GitHub.
	ReasonRegistrationTimeout = "RegistrationTimeout"
	// ReasonExitedWithoutJob: the runner container exited non-zero without running a job.
	ReasonExitedWithoutJob = "ExitedWithoutJob"
	// ReasonPodDeleted: the runner's pod was deleted (by a person or another controller)
	// before the runner ran a job.
	ReasonPodDeleted = "PodDeleted"
)

// Reasons of the RunnerPool's Ready and Degraded conditions for its credentials and
// scope, from a real answer of GitHub (checked once per credentials and scope every
// few minutes, not on every reconcile). Each message says what to fix; the pool
// recovers by itself once it is fixed.
const (
	// ReasonCredentialsRefused: GitHub rejected the credentials (401) or denied them
	// access to the scope (403).
	ReasonCredentialsRefused = "CredentialsRefused"
	// ReasonAppNotInstalled: GitHub has no installation of the App with the Secret's
	// github_app_installation_id (404 on the installation token): the App was
	// uninstalled, or the id is wrong.
	ReasonAppNotInstalled = "AppNotInstalled"
	// ReasonRunnerGroupNotFound: the organization or enterprise has no runner group named
	// github.runnerGroup.
	ReasonRunnerGroupNotFound = "RunnerGroupNotFound"
	// ReasonScopeNotFound: the repository, organization or enterprise of github.url does
	// not exist, or the credentials cannot see it (404).
	ReasonScopeNotFound = "ScopeNotFound"
	// ReasonCredentialsSecretUnreadable: the API server did not hand over the credentials
	// Secret (an RBAC denial, an outage); runners are still created and retried.
	ReasonCredentialsSecretUnreadable = "CredentialsSecretUnreadable"
	// ReasonGitHubUnavailable: GitHub did not answer the check (5xx, a timeout, a rate
	// limit); runners are still created and retried.
	ReasonGitHubUnavailable = "GitHubUnavailable"
)

// Reasons of the RunnerPool's Degraded condition besides configuration errors.
const (
	// ReasonRunnerFailures: runners keep failing; creation is backing off.
	ReasonRunnerFailures = "RunnerFailures"
	// ReasonPodsRefused: the API server refuses to create runner pods (a ResourceQuota,
	// a LimitRange, Pod Security admission, an admission webhook).
	ReasonPodsRefused = "PodsRefused"
	// ReasonAsExpected: the condition holds its expected value.
	ReasonAsExpected = "AsExpected"
	// ReasonInvalidSchedule: an entry of spec.warm.schedules cannot be read (a cron field
	// out of range, an unknown time zone) though its shape passed admission. The pool
	// runs on without that window; Degraded's message says which and why.
	ReasonInvalidSchedule = "InvalidSchedule"
	// ReasonInvalidSpec: the stored pool cannot be used as it is — a field this version
	// of Gantry cannot decode (a pool stored before a validation rule existed) or a name
	// too long for the names and labels Gantry derives from it. Ready and Degraded say
	// which field; no runner is created until the pool is fixed.
	ReasonInvalidSpec = "InvalidSpec"
)

// MaxPoolNameLength is the longest RunnerPool name: each runner is named NAME-xxxxx,
// and that name is a label value (at most 63 characters) on the runner's pod.
const MaxPoolNameLength = 57
