package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegistrationMode says how a pool's runners register with GitHub.
// +kubebuilder:validation:Enum=JIT;RegistrationToken
type RegistrationMode string

const (
	// RegistrationModeJIT registers each runner with its own just-in-time configuration:
	// one generate-jitconfig call per runner, no shared secret in any pod.
	RegistrationModeJIT RegistrationMode = "JIT"
	// RegistrationModeRegistrationToken shares one registration token (valid one hour)
	// among the pool's runners, which register themselves (config.sh --ephemeral) from
	// the GANTRY_RUNNER_* environment: one API call serves a whole burst.
	RegistrationModeRegistrationToken RegistrationMode = "RegistrationToken"
)

// GitHubSpec says where a pool's runners register.
type GitHubSpec struct {
	// url is the scope the runners register in: a repository
	// (https://github.com/OWNER/REPO), an organization (https://github.com/ORG) or an
	// enterprise (https://github.com/enterprises/ENTERPRISE), on github.com or on a
	// GitHub Enterprise Server host. It cannot be changed: create a new pool instead.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?/(enterprises/[A-Za-z0-9][A-Za-z0-9_.-]*|[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?)/?$') && !self.matches('^https?://[^/]+/enterprises/?$')",message="github.url must be a repository (https://github.com/OWNER/REPO), organization (https://github.com/ORG) or enterprise (https://github.com/enterprises/ENTERPRISE) URL on github.com or a GitHub Enterprise Server host"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="github.url is immutable: create a new RunnerPool for another scope"
	URL string `json:"url"`

	// credentialsSecretRef names the Secret, in the pool's namespace, that holds the
	// GitHub App (github_app_id, github_app_installation_id, github_app_private_key)
	// or personal access token (github_token) the controller uses.
	// +required
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`

	// runnerGroup is the runner group the runners join (organization and enterprise
	// scopes). Repository-scoped pools ignore it.
	// +optional
	// +kubebuilder:default=Default
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	RunnerGroup string `json:"runnerGroup,omitempty"`
}

// SecretReference names a Secret in the same namespace.
type SecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="github.credentialsSecretRef.name must name the Secret that holds the GitHub App or token credentials"
	Name string `json:"name"`
}

// RecoverySpec bounds how long a runner may be stuck before Gantry replaces it.
type RecoverySpec struct {
	// pendingTimeout is how long a runner pod may take to run the runner agent, whatever
	// holds it back: a pod the scheduler cannot place fails as Unschedulable (counted
	// from when the scheduler said so), any other cause — a volume that never attaches,
	// a sidecar that never starts, a container stuck creating — as PendingTimeout
	// (counted from the pod's creation). The runner's slot is freed and a replacement
	// made; repeated failures back off and mark the pool Degraded.
	// A duration from 1s to 24h with units, such as 10m or 1h30m.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="recovery.pendingTimeout must be a duration from 1s to 24h written with units, such as \"10m\" or \"1h30m\" (a bare number such as \"600\" or words such as \"10 minutes\" are refused)"
	PendingTimeout *metav1.Duration `json:"pendingTimeout,omitempty"`

	// imagePullGracePeriod is how long a runner pod may fail to pull the image of any of
	// its containers — the runner, an init container, a sidecar — (ErrImagePull,
	// ImagePullBackOff), counted from the pod's creation, before the runner is failed as
	// ImagePullFailed. An invalid image name fails the runner at once.
	// A duration from 1s to 24h with units, such as 2m or 90s.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="recovery.imagePullGracePeriod must be a duration from 1s to 24h written with units, such as \"2m\" or \"90s\" (a bare number such as \"600\" or words such as \"10 minutes\" are refused)"
	ImagePullGracePeriod *metav1.Duration `json:"imagePullGracePeriod,omitempty"`

	// containerErrorGracePeriod is how long, counted from the pod's creation, a container
	// of the runner pod may fail to be configured (CreateContainerConfigError: a missing
	// Secret, ConfigMap or key), be created (CreateContainerError, RunContainerError) or
	// keep crashing (CrashLoopBackOff of an init container or sidecar) before the runner
	// is failed as ContainerConfigError, ContainerCreateFailed or CrashLoop. The grace
	// lets a Secret created a moment after the pool still be picked up.
	// A duration from 1s to 24h with units, such as 1m or 90s.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="recovery.containerErrorGracePeriod must be a duration from 1s to 24h written with units, such as \"1m\" or \"90s\" (a bare number such as \"600\" or words such as \"10 minutes\" are refused)"
	ContainerErrorGracePeriod *metav1.Duration `json:"containerErrorGracePeriod,omitempty"`

	// registrationTimeout is how long a running runner pod may take to come online on
	// GitHub before the runner is failed as RegistrationTimeout.
	// A duration from 1s to 24h with units, such as 5m or 2m30s.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="recovery.registrationTimeout must be a duration from 1s to 24h written with units, such as \"5m\" or \"2m30s\" (a bare number such as \"600\" or words such as \"10 minutes\" are refused)"
	RegistrationTimeout *metav1.Duration `json:"registrationTimeout,omitempty"`

	// nodeLostTimeout is how long a runner pod may stay terminating (its node gone)
	// after its grace period before it is force-deleted: while the runner runs, and
	// while a retired or finished Runner is being removed.
	// A duration from 1s to 24h with units, such as 5m or 10m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="recovery.nodeLostTimeout must be a duration from 1s to 24h written with units, such as \"5m\" or \"10m\" (a bare number such as \"600\" or words such as \"10 minutes\" are refused)"
	NodeLostTimeout *metav1.Duration `json:"nodeLostTimeout,omitempty"`
}

// Defaults of RecoverySpec, applied by the API server and, for objects written before a
// default existed, by the accessors below.
const (
	DefaultPendingTimeout            = 10 * time.Minute
	DefaultImagePullGracePeriod      = 2 * time.Minute
	DefaultContainerErrorGracePeriod = time.Minute
	DefaultRegistrationTimeout       = 5 * time.Minute
	DefaultNodeLostTimeout           = 5 * time.Minute
)

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// PendingTimeoutOrDefault returns pendingTimeout, or its default when unset.
func (r RecoverySpec) PendingTimeoutOrDefault() time.Duration {
	return durationOr(r.PendingTimeout, DefaultPendingTimeout)
}

// ImagePullGracePeriodOrDefault returns imagePullGracePeriod, or its default when unset.
func (r RecoverySpec) ImagePullGracePeriodOrDefault() time.Duration {
	return durationOr(r.ImagePullGracePeriod, DefaultImagePullGracePeriod)
}

// ContainerErrorGracePeriodOrDefault returns containerErrorGracePeriod, or its default
// when unset.
func (r RecoverySpec) ContainerErrorGracePeriodOrDefault() time.Duration {
	return durationOr(r.ContainerErrorGracePeriod, DefaultContainerErrorGracePeriod)
}

// RegistrationTimeoutOrDefault returns registrationTimeout, or its default when unset.
func (r RecoverySpec) RegistrationTimeoutOrDefault() time.Duration {
	return durationOr(r.RegistrationTimeout, DefaultRegistrationTimeout)
}

// NodeLostTimeoutOrDefault returns nodeLostTimeout, or its default when unset.
func (r RecoverySpec) NodeLostTimeoutOrDefault() time.Duration {
	return durationOr(r.NodeLostTimeout, DefaultNodeLostTimeout)
}

// RunnerPoolSpec is the desired state of a RunnerPool.
// +kubebuilder:validation:XValidation:rule="self.maxRunners >= self.minIdle",message="maxRunners must be greater than or equal to minIdle: raise maxRunners or lower minIdle"
// +kubebuilder:validation:XValidation:rule="!has(self.noDefaultLabels) || !self.noDefaultLabels || (has(self.labels) && size(self.labels) > 0)",message="noDefaultLabels: true needs at least one entry in labels: a runner registered without any label can take no job"
// +kubebuilder:validation:XValidation:rule="(has(self.noDefaultLabels) && self.noDefaultLabels) || !has(self.template.spec) || !has(self.template.spec.nodeSelector) || !('kubernetes.io/os' in self.template.spec.nodeSelector) || self.template.spec.nodeSelector['kubernetes.io/os'] in ['linux', 'windows', 'darwin']",message="template.spec.nodeSelector kubernetes.io/os must be linux, windows or darwin: the runner registers it as its OS label (linux, windows, macOS); or set noDefaultLabels: true"
// +kubebuilder:validation:XValidation:rule="(has(self.noDefaultLabels) && self.noDefaultLabels) || !has(self.template.spec) || !has(self.template.spec.nodeSelector) || !('kubernetes.io/arch' in self.template.spec.nodeSelector) || self.template.spec.nodeSelector['kubernetes.io/arch'] in ['amd64', 'arm64', 'arm']",message="template.spec.nodeSelector kubernetes.io/arch must be amd64, arm64 or arm: the runner registers it as its architecture label (x64, ARM64, ARM); or set noDefaultLabels: true"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.os) || !has(self.template.spec) || !has(self.template.spec.nodeSelector) || !('kubernetes.io/os' in self.template.spec.nodeSelector) || self.template.spec.nodeSelector['kubernetes.io/os'] == self.template.spec.os.name",message="template.spec.os.name and template.spec.nodeSelector kubernetes.io/os disagree: set both to the same OS"
// +kubebuilder:validation:XValidation:rule="(has(self.noDefaultLabels) && self.noDefaultLabels) || !has(self.labels) || size(self.labels) <= 97",message="labels can have at most 97 entries besides the default labels self-hosted, OS and architecture (GitHub takes at most 100 per runner): remove some, or set noDefaultLabels: true"
// +kubebuilder:validation:XValidation:rule="!has(self.demand) || self.demand.source != 'ScaleSet' || !has(self.registrationMode) || self.registrationMode == 'JIT'",message="registrationMode must be JIT with demand.source: ScaleSet: a scale set's runners register with the scale set's own JIT configurations; remove registrationMode"
// +kubebuilder:validation:XValidation:rule="!has(self.caches) || self.caches.all(k, !has(k.isolation) || k.isolation != 'Repository') || (self.github.url.matches('^https?://[^/]+/[^/]+/[^/]+/?$') && !self.github.url.matches('^https?://[^/]+/enterprises/'))",message="caches[].isolation: Repository needs a repository-scoped pool (github.url https://github.com/OWNER/REPO): only then can GitHub give its runners no other repository's job; use one pool per repository, or isolation: Shared"
// +kubebuilder:validation:XValidation:rule="!has(self.containerMode) || !has(self.containerMode.workVolume) || self.containerMode.workVolume.type != 'Cache' || (has(self.caches) && self.caches.exists(k, k.name == self.containerMode.workVolume.cache))",message="containerMode.workVolume.cache must name one of the pool's caches (spec.caches[].name)"
type RunnerPoolSpec struct {
	// github says where the runners register and with which credentials.
	// +required
	GitHub GitHubSpec `json:"github"`

	// labels are the runner's custom labels. Each runner registers them after its
	// default labels: self-hosted, its operating system (linux, windows or macOS) and its
	// architecture (x64, ARM64 or ARM), read from the template's kubernetes.io/os and
	// kubernetes.io/arch nodeSelector, spec.os.name or a required node affinity allowing
	// one value; what the template leaves open is read from the Ready nodes its pods can
	// be scheduled on (one architecture: that one; several: amd64; none: linux and x64),
	// recorded in status.platform, and the pod is pinned there. A job lands in this pool
	// when every label of its runs-on, compared case-insensitively, is one the runner
	// registers. Each label is 1 to 256 characters with no comma, no control character
	// and no space at either end (GitHub splits labels on commas and trims them), and no
	// two labels may differ only in case (GitHub compares labels case-insensitively).
	// For example: [gpu, large].
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule="!self.contains(',')",message="labels must not contain a comma: GitHub splits runner labels on commas; list each label as its own item, such as [linux, x64]"
	// +kubebuilder:validation:items:XValidation:rule="self == self.trim() && !self.matches('[[:cntrl:]]')",message="labels must not start or end with a space or hold a control character: GitHub trims runner labels, so the runner would register another label than the one jobs ask for; for example \"gpu\""
	// +kubebuilder:validation:XValidation:rule="self.all(l, self.filter(m, m.lowerAscii() == l.lowerAscii()).size() == 1)",message="labels must differ by more than case: GitHub compares labels case-insensitively, so \"GPU\" and \"gpu\" are the same label; keep one"
	Labels []string `json:"labels,omitempty"`

	// noDefaultLabels registers the runners with only labels, without self-hosted and
	// the OS and architecture labels, as config.sh --no-default-labels does: a job whose
	// runs-on is just [self-hosted] then never lands here. labels must not be empty.
	// +optional
	NoDefaultLabels bool `json:"noDefaultLabels,omitempty"`

	// minIdle is how many idle runners are kept warm. 0 scales the pool to zero. warm
	// can raise it at times (schedules) or from traffic (predictive).
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	MinIdle int32 `json:"minIdle"`

	// warm raises the idle floor above minIdle in time windows (schedules) or from the
	// traffic the pool sees (predictive). status.warm shows the floor in force and why.
	// +optional
	Warm *WarmSpec `json:"warm,omitempty"`

	// maxRunners caps the runners alive at once (failed runners do not count).
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	MaxRunners int32 `json:"maxRunners"`

	// demand says where the pool learns of queued jobs: Webhook (the default) or a
	// runner scale set (ScaleSet), which needs no inbound connection.
	// +optional
	// +kubebuilder:default={source: Webhook}
	Demand DemandSpec `json:"demand,omitempty"`

	// registrationMode is how runners register: JIT (one just-in-time configuration per
	// runner, the default) or RegistrationToken (one shared token for very large bursts).
	// +optional
	// +kubebuilder:default=JIT
	RegistrationMode RegistrationMode `json:"registrationMode,omitempty"`

	// recovery bounds how long a runner may be stuck before it is replaced.
	// +optional
	// +kubebuilder:default={}
	Recovery RecoverySpec `json:"recovery,omitempty"`

	// disruption says how the runners meet their nodes going away: how long a busy
	// runner may hold up a drain, and whether jobs killed by the infrastructure are
	// re-run.
	// +optional
	// +kubebuilder:default={}
	Disruption DisruptionSpec `json:"disruption,omitempty"`

	// caches are volumes that outlive the ephemeral runners: each runner pod mounts a
	// free volume of each cache, by the cache's name (docs/caches.md).
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, self.filter(o, o.name == k.name).size() == 1)",message="caches[].name must be unique in the pool: rename one of the caches"
	Caches []CacheSpec `json:"caches,omitempty"`

	// containerMode lets jobs declare container: and services: without privileged
	// Docker: Kubernetes runs GitHub's Kubernetes container hooks, with job code fenced
	// off from every other runner (docs/container-jobs.md).
	// +optional
	ContainerMode *ContainerModeSpec `json:"containerMode,omitempty"`

	// usage says what the pool's runners tell cost tools beyond the usage record each
	// runner gets (docs/usage.md): the job's repository and workflow as runner pod
	// labels (podLabels, one pod patch per job).
	// +optional
	Usage *UsageSpec `json:"usage,omitempty"`

	// template is the pod each runner runs in. Its container named "runner" runs the
	// GitHub Actions runner agent; Gantry passes it the JIT configuration from a Secret.
	// Gantry sets the runner container's ACTIONS_RUNNER_INPUT_JITCONFIG and GANTRY_RUNNER_*
	// variables and the pod's restartPolicy (Never: one job, then the pod is done), so
	// the template may not set them: the API server refuses another restartPolicy, and a
	// pool whose runner container sets one of those variables is not Ready (reason
	// InvalidSpec) and creates no runner.
	// Unless the template sets them, the pod gets automountServiceAccountToken: false
	// and enableServiceLinks: false (set them to true for IRSA, Workload Identity or
	// Service variables), and, when no securityContext is set anywhere in a Linux
	// template, the restricted Pod Security profile (docs/security.md).
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.spec.restartPolicy) || self.spec.restartPolicy == 'Never'",message="template.spec.restartPolicy must be left out or be Never: a runner runs one job and its pod is never restarted; remove restartPolicy"
	// +kubebuilder:validation:XValidation:rule="self.spec.containers.exists(c, c.name == 'runner')",message="template.spec.containers must include a container named \"runner\": it runs the GitHub Actions runner agent"
	Template corev1.PodTemplateSpec `json:"template"`
}

// RunnerPoolStatus is the observed state of a RunnerPool.
type RunnerPoolStatus struct {
	// observedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// queuedJobs are jobs routed to this pool that no runner has picked up yet.
	// +optional
	// +kubebuilder:default=0
	QueuedJobs int32 `json:"queuedJobs"`

	// desiredRunners is how many runners the pool wants alive now.
	// +optional
	// +kubebuilder:default=0
	DesiredRunners int32 `json:"desiredRunners"`

	// pendingRunners are runners not yet online on GitHub (registering, pod starting).
	// +optional
	// +kubebuilder:default=0
	PendingRunners int32 `json:"pendingRunners"`

	// idleRunners are online and waiting for a job.
	// +optional
	// +kubebuilder:default=0
	IdleRunners int32 `json:"idleRunners"`

	// busyRunners are running a job.
	// +optional
	// +kubebuilder:default=0
	BusyRunners int32 `json:"busyRunners"`

	// failedRunners are runners that ended in failure and are being cleaned up. They do
	// not count against maxRunners.
	// +optional
	// +kubebuilder:default=0
	FailedRunners int32 `json:"failedRunners"`

	// outdatedRunners are runners whose pod was made from an older template than the
	// current one. Idle and pending ones are replaced; busy ones finish their job first.
	// +optional
	// +kubebuilder:default=0
	OutdatedRunners int32 `json:"outdatedRunners"`

	// templateHash is the hash of the current template; each Runner records the hash of
	// the template its pod was made from in status.templateHash.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TemplateHash string `json:"templateHash,omitempty"`

	// conditions: Ready, ScalingUp, ScalingDown, Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// warm is the idle floor in force and why: spec.minIdle, an open window of
	// spec.warm.schedules, or the prediction of spec.warm.predictive.
	// +optional
	Warm *WarmStatus `json:"warm,omitempty"`

	// platform is the operating system and architecture the pool's runner pods are
	// pinned to and register as labels (linux/x64, linux/ARM64, …), and where they come
	// from: the template, the cluster's nodes, or the default.
	// +optional
	Platform *PlatformStatus `json:"platform,omitempty"`

	// scaleSet is the pool's runner scale set and message session (demand.source
	// ScaleSet only).
	// +optional
	ScaleSet *ScaleSetStatus `json:"scaleSet,omitempty"`

	// caches: each cache's volumes, total, in use and free, and its hits and misses.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Caches []CacheStatus `json:"caches,omitempty"`

	// recentRepositories are the repositories whose jobs came to this pool in the last
	// two hours, newest first. Demand is held in the controller's memory; after a restart
	// or a leader change, resync lists the queued jobs of these repositories, so the jobs
	// the previous controller knew of are not forgotten.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	RecentRepositories []RepositoryActivity `json:"recentRepositories,omitempty"`
}

// RepositoryActivity is a repository whose jobs came to a pool, and when the last did.
type RepositoryActivity struct {
	// name is OWNER/REPO.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// lastJobAt is when the pool last saw a job of the repository.
	// +required
	LastJobAt metav1.Time `json:"lastJobAt"`
}

// RunnerPool is a pool of ephemeral, just-in-time GitHub Actions runners: one fresh pod
// per job, scaled from zero on demand.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rp;rpool,categories=gantry
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 57",message="metadata.name must be at most 57 characters: each runner, its pod and its GitHub registration are named NAME-xxxxx and labeled with NAME, and a label value holds at most 63; choose a shorter name, such as linux-x64"
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=`.status.queuedJobs`,description="Jobs routed to the pool that no runner has picked up yet"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredRunners`,description="Runners the pool wants alive now: busy + queued + the idle floor in force, at most maxRunners"
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingRunners`,description="Runners registering or whose pod is starting"
// +kubebuilder:printcolumn:name="Idle",type=integer,JSONPath=`.status.idleRunners`,description="Runners online and waiting for a job"
// +kubebuilder:printcolumn:name="Busy",type=integer,JSONPath=`.status.busyRunners`,description="Runners running a job"
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failedRunners`,description="Failed runners kept visible for a while; not counted against maxRunners"
// +kubebuilder:printcolumn:name="Outdated",type=integer,JSONPath=`.status.outdatedRunners`,priority=1,description="Runners made from an older template: idle and pending ones are being replaced, busy ones finish their job first"
// +kubebuilder:printcolumn:name="Warm",type=integer,JSONPath=`.status.warm.minIdle`,priority=1,description="The idle floor in force: spec.minIdle, raised by an open window of spec.warm.schedules or by the prediction"
// +kubebuilder:printcolumn:name="Arch",type=string,JSONPath=`.status.platform.arch`,priority=1,description="The architecture the runner pods are pinned to and register (status.platform)"
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxRunners`,description="The most runners alive at once (spec.maxRunners)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the pool's configuration and credentials work"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="The Ready condition's reason"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.github.url`,priority=1,description="Where the runners register"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RunnerPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec RunnerPoolSpec `json:"spec"`
	// +optional
	// +kubebuilder:default={}
	Status RunnerPoolStatus `json:"status,omitempty"`

	// DecodeError names the stored fields this version of Gantry could not decode, or
	// is empty. Never stored: set when reading an object (see decode.go).
	DecodeError string `json:"-"`
}

// RunnerPoolList is a list of RunnerPools.
// +kubebuilder:object:root=true
type RunnerPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerPool `json:"items"`
}
