package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DemandSource is where a pool learns that jobs wait for its runners.
// +kubebuilder:validation:Enum=Webhook;ScaleSet
type DemandSource string

const (
	// DemandSourceWebhook: workflow_job webhooks (and the resync that repairs lost
	// deliveries). GitHub must be able to reach the controller's webhook endpoint.
	DemandSourceWebhook DemandSource = "Webhook"
	// DemandSourceScaleSet: a runner scale set on GitHub's Actions service. The
	// controller long-polls the service over outbound HTTPS; nothing reaches in.
	DemandSourceScaleSet DemandSource = "ScaleSet"
)

// DemandSpec says where a pool's demand comes from.
// +kubebuilder:validation:XValidation:rule="self.source == oldSelf.source",message="demand.source cannot change on a live pool: its runners and GitHub registration belong to the old source; create a new RunnerPool with the other source, move workflows to it, then delete this one"
// +kubebuilder:validation:XValidation:rule="has(self.scaleSetName) == has(oldSelf.scaleSetName) && (!has(self.scaleSetName) || self.scaleSetName == oldSelf.scaleSetName)",message="demand.scaleSetName cannot change on a live pool: workflows name the scale set in runs-on; create a new RunnerPool with the new name instead"
// +kubebuilder:validation:XValidation:rule="!has(self.scaleSetName) || self.source == 'ScaleSet'",message="demand.scaleSetName is only used with demand.source: ScaleSet; remove it or set source: ScaleSet"
type DemandSpec struct {
	// source is Webhook (the default: workflow_job webhooks, which need GitHub to reach
	// the controller) or ScaleSet (a runner scale set on GitHub's Actions service,
	// long-polled over outbound HTTPS: for clusters GitHub cannot reach). It cannot be
	// changed on a live pool.
	// +optional
	// +kubebuilder:default=Webhook
	Source DemandSource `json:"source,omitempty"`

	// scaleSetName is the runner scale set's name (ScaleSet source only), unique within
	// the runner group; the pool's name when left out. Workflows select the scale set
	// with runs-on: NAME, or with the pool's labels. 1 to 45 characters: letters,
	// digits, '.', '_' and '-', starting and ending with a letter or digit.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$')",message="demand.scaleSetName must be 1 to 45 letters, digits, '.', '_' or '-', starting and ending with a letter or digit, such as linux-x64 (it is also a runner label: no space or comma)"
	ScaleSetName string `json:"scaleSetName,omitempty"`
}

// ScaleSetName is the name of the pool's scale set: demand.scaleSetName or the pool's name.
func (p *RunnerPool) ScaleSetName() string {
	if p.Spec.Demand.ScaleSetName != "" {
		return p.Spec.Demand.ScaleSetName
	}
	return p.Name
}

// UsesScaleSet reports whether the pool takes its demand from a runner scale set.
func (p *RunnerPool) UsesScaleSet() bool { return p.Spec.Demand.Source == DemandSourceScaleSet }

// SessionState is the state of a scale-set pool's message session.
// +kubebuilder:validation:Enum=Connecting;Active;Conflict;Error;Closed
type SessionState string

const (
	// SessionConnecting: the scale set is being ensured or the session created.
	SessionConnecting SessionState = "Connecting"
	// SessionActive: the session is open and the controller long-polls its messages.
	SessionActive SessionState = "Active"
	// SessionConflict: the service holds another session for the scale set (most often
	// the one of a controller that died); retried with backoff until it expires.
	SessionConflict SessionState = "Conflict"
	// SessionError: the scale set or session could not be set up; the message says why.
	SessionError SessionState = "Error"
	// SessionClosed: no session (the controller is not the leader, or the pool is going).
	SessionClosed SessionState = "Closed"
)

// ScaleSetStatus is what the controller knows of a pool's runner scale set.
type ScaleSetStatus struct {
	// id is the scale set's id on the Actions service; 0 until it exists.
	// +optional
	ID int64 `json:"id,omitempty"`
	// name is the scale set's name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`
	// runnerGroupID is the id of the runner group the scale set is in.
	// +optional
	RunnerGroupID int64 `json:"runnerGroupID,omitempty"`
	// session is the message session's state: Connecting, Active, Conflict, Error, Closed.
	// +optional
	Session SessionState `json:"session,omitempty"`
	// sessionID is the id of the message session the leader opened (never its
	// message-queue token, which stays in the leader's memory). A successor that finds it
	// here closes that session before opening its own, so a takeover after a leader died
	// without closing it (SIGKILL, node lost) does not wait for the service to expire it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SessionID string `json:"sessionID,omitempty"`
	// message says what the session waits for, or what failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// lastMessageAt is when the service last answered the long poll with messages.
	// +optional
	LastMessageAt *metav1.Time `json:"lastMessageAt,omitempty"`
	// statistics are the service's counts from its last answer.
	// +optional
	Statistics *ScaleSetStatistics `json:"statistics,omitempty"`
}

// ScaleSetStatistics are the Actions service's counts for a scale set.
type ScaleSetStatistics struct {
	// availableJobs are jobs offered to the scale set and not yet acquired.
	AvailableJobs int32 `json:"availableJobs"`
	// acquiredJobs are jobs acquired and not yet assigned to a runner.
	AcquiredJobs int32 `json:"acquiredJobs"`
	// assignedJobs are jobs assigned to the scale set, waiting or running: the pool's
	// desired runners follow assignedJobs + minIdle.
	AssignedJobs int32 `json:"assignedJobs"`
	// runningJobs are jobs a runner of the scale set is running.
	RunningJobs int32 `json:"runningJobs"`
	// registeredRunners, busyRunners and idleRunners count the scale set's runners.
	RegisteredRunners int32 `json:"registeredRunners"`
	BusyRunners       int32 `json:"busyRunners"`
	IdleRunners       int32 `json:"idleRunners"`
}
