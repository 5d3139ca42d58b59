package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunnerPhase is where a runner is in its one-job life.
// +kubebuilder:validation:Enum=Pending;Idle;Busy;Succeeded;Failed;Deleting
type RunnerPhase string

const (
	// RunnerPending: registering with GitHub, its pod starting, or its pod running while
	// GitHub does not list the runner online yet (condition Online False).
	RunnerPending RunnerPhase = "Pending"
	// RunnerIdle: GitHub lists the runner online, and it waits for a job.
	RunnerIdle RunnerPhase = "Idle"
	// RunnerBusy: running a job. A busy runner is never deleted by a scale-down.
	RunnerBusy RunnerPhase = "Busy"
	// RunnerSucceeded: its job finished and the runner exited cleanly.
	RunnerSucceeded RunnerPhase = "Succeeded"
	// RunnerFailed: it cannot recover; status.reason says why.
	RunnerFailed RunnerPhase = "Failed"
	// RunnerDeleting: an idle or pending runner being unregistered from GitHub and
	// removed. A busy runner being deleted stays Busy until its job ends; a finished one
	// keeps Succeeded or Failed.
	RunnerDeleting RunnerPhase = "Deleting"
)

// RunnerSpec is the desired state of a Runner.
type RunnerSpec struct {
	// poolName is the RunnerPool, in the same namespace, this runner belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="poolName is immutable"
	PoolName string `json:"poolName"`
}

// RunnerJob identifies the GitHub Actions job a runner runs.
type RunnerJob struct {
	// id of the workflow job.
	ID int64 `json:"id"`
	// runID of the workflow run.
	// +optional
	RunID int64 `json:"runID,omitempty"`
	// repository as OWNER/REPO.
	// +optional
	Repository string `json:"repository,omitempty"`
	// workflow name.
	// +optional
	Workflow string `json:"workflow,omitempty"`
}

// RunnerStatus is the observed state of a Runner.
type RunnerStatus struct {
	// phase of the runner's life.
	// +optional
	Phase RunnerPhase `json:"phase,omitempty"`

	// githubRunnerID is the runner's id on GitHub, once registered.
	// +optional
	GitHubRunnerID int64 `json:"githubRunnerID,omitempty"`

	// githubRunnerName is the runner's name on GitHub.
	// +optional
	GitHubRunnerName string `json:"githubRunnerName,omitempty"`

	// podName is the runner's pod.
	// +optional
	PodName string `json:"podName,omitempty"`

	// job is the job the runner runs or ran.
	// +optional
	Job *RunnerJob `json:"job,omitempty"`

	// reason is a CamelCase word for why the runner failed (see the Reason constants).
	// +optional
	Reason string `json:"reason,omitempty"`

	// message says, for a person, what happened and what to check.
	// +optional
	Message string `json:"message,omitempty"`

	// templateHash is the hash of the pool template the runner's pod was made from, set
	// when the pod is created. The pool replaces idle and pending runners whose pod was
	// made from an older template; busy ones finish their job on it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TemplateHash string `json:"templateHash,omitempty"`

	// outdated is true while the runner's pod was made from an older template than the
	// pool's current one.
	// +optional
	Outdated bool `json:"outdated,omitempty"`

	// registeredAt is when the runner was registered with GitHub.
	// +optional
	RegisteredAt *metav1.Time `json:"registeredAt,omitempty"`

	// caches are the volumes the runner's pod mounts, one per cache of the pool.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Caches []RunnerCacheVolume `json:"caches,omitempty"`

	// containerHook is where the runner's container hook works (Kubernetes mode): the
	// namespace of its workflow pod, step pods and Secrets, and the ServiceAccount its
	// pod's token is of. Set with the pod.
	// +optional
	ContainerHook *RunnerContainerHook `json:"containerHook,omitempty"`

	// conditions of the runner.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Runner is one ephemeral GitHub Actions runner: registered just in time, runs one job
// in its own pod, then goes away. Runners are created and removed by their RunnerPool.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=gantry
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.poolName`,description="The RunnerPool the runner belongs to"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Pending (registering, pod starting, or not yet online on GitHub), Idle, Busy, Succeeded, Failed or Deleting"
// +kubebuilder:printcolumn:name="Online",type=string,JSONPath=`.status.conditions[?(@.type=="Online")].status`,description="True once GitHub lists the runner online (or it took a job); False while its pod runs and GitHub does not list it online yet"
// +kubebuilder:printcolumn:name="Job",type=integer,JSONPath=`.status.job.id`,description="The id of the workflow job the runner runs"
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.status.job.repository`,priority=1,description="The job's repository, OWNER/REPO"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="Why the runner failed"
// +kubebuilder:printcolumn:name="Outdated",type=boolean,JSONPath=`.status.outdated`,description="Whether the runner's pod was made from an older pool template"
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1,description="What happened and what to check"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Runner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec RunnerSpec `json:"spec"`
	// +optional
	Status RunnerStatus `json:"status,omitempty"`

	// DecodeError names the stored fields this version of Gantry could not decode, or
	// is empty. Never stored: set when reading an object (see decode.go).
	DecodeError string `json:"-"`
}

// RunnerList is a list of Runners.
// +kubebuilder:object:root=true
type RunnerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Runner `json:"items"`
}

// RunnerContainerHook is where a Kubernetes-mode runner's hook works.
type RunnerContainerHook struct {
	// namespace where the hook creates the workflow pod and its Secrets.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// serviceAccount of the runner pod's hook token, in the runner's namespace.
	// +kubebuilder:validation:MaxLength=253
	ServiceAccount string `json:"serviceAccount"`
}
