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
)
