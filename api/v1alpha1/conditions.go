package v1alpha1

// Condition types of a RunnerPool.
const (
	// ConditionReady is True when the pool can serve jobs: credentials work, GitHub
	// answers and runners can be created.
	ConditionReady = "Ready"
	// ConditionScalingUp is True while the pool creates runners toward its desired count.
	ConditionScalingUp = "ScalingUp"
	// ConditionScalingDown is True while the pool retires idle runners.
	ConditionScalingDown = "ScalingDown"
	// ConditionDegraded is True when the pool cannot make progress: repeated runner
	// failures, bad configuration or GitHub unavailable. The reason says which.
	ConditionDegraded = "Degraded"
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
	// ReasonImagePullFailed: the image could not be pulled for longer than imagePullGracePeriod.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonUnschedulable: the pod stayed unschedulable for longer than pendingTimeout.
	ReasonUnschedulable = "Unschedulable"
	// ReasonEvicted: the pod was evicted or disrupted (node pressure, a drain,
	// preemption), before or while it ran a job.
	ReasonEvicted = "Evicted"
	// ReasonNodeLost: the pod stayed terminating longer than nodeLostTimeout (its node is
	// gone) and was force-deleted.
	ReasonNodeLost = "NodeLost"
	// ReasonRegistrationTimeout: the pod ran for registrationTimeout without the runner
	// coming online on GitHub.
	ReasonRegistrationTimeout = "RegistrationTimeout"
	// ReasonExitedWithoutJob: the runner container exited non-zero without running a job.
	ReasonExitedWithoutJob = "ExitedWithoutJob"
	// ReasonPodDeleted: the runner's pod was deleted (by a person or another controller)
	// before the runner ran a job.
	ReasonPodDeleted = "PodDeleted"
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
	// ReasonInvalidSpec: the stored pool cannot be used as it is — a field this version
	// of Gantry cannot decode (a pool stored before a validation rule existed) or a name
	// too long for the names and labels Gantry derives from it. Ready and Degraded say
	// which field; no runner is created until the pool is fixed.
	ReasonInvalidSpec = "InvalidSpec"
)

// MaxPoolNameLength is the longest RunnerPool name: each runner is named NAME-xxxxx,
// and that name is a label value (at most 63 characters) on the runner's pod.
const MaxPoolNameLength = 57
