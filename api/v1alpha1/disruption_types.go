package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RerunPolicy says which jobs killed under their runner Gantry re-runs.
// +kubebuilder:validation:Enum=Never;InfrastructureFailures
type RerunPolicy string

const (
	// RerunNever re-runs nothing: a job killed with its runner stays failed on GitHub.
	RerunNever RerunPolicy = "Never"
	// RerunInfrastructureFailures re-runs, once, each job whose runner died for a reason
	// of the infrastructure (its node lost or deleted, an eviction or a preemption, or
	// disruption.drainTimeout reached), once its workflow run has completed. It needs the
	// Actions write permission of the pool's credentials.
	RerunInfrastructureFailures RerunPolicy = "InfrastructureFailures"
)

// DisruptionSpec says how the pool's runners meet their nodes going away.
type DisruptionSpec struct {
	// drainTimeout bounds how long a runner that is running a job holds up a voluntary
	// disruption of its node: a drain through the eviction API (kubectl drain, a node
	// upgrade), a cluster-autoscaler scale-down, a Karpenter consolidation, drift or
	// expiry. Idle and pending runners on such a node leave at once. Past the bound, the
	// busy runner's pod is deleted: its job is killed (reason DrainTimeout) and, with
	// rerun InfrastructureFailures, re-run.
	// A duration from 1s to 120h with units, such as 1h or 90m.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('120h')",message="disruption.drainTimeout must be a duration from 1s to 120h written with units, such as \"1h\" or \"90m\" (a bare number such as \"3600\" or words such as \"1 hour\" are refused)"
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// rerun says which jobs killed under their runner Gantry re-runs: Never (the
	// default) or InfrastructureFailures, each job whose runner died for a reason of the
	// infrastructure re-run once, after its workflow run has completed. A job that failed
	// on its own — its steps failed, it was canceled, its container was OOM-killed
	// (unless rerunOOMKilled) — is never re-run. InfrastructureFailures needs the Actions
	// write permission (`actions: write` for a GitHub App).
	// +optional
	// +kubebuilder:default=Never
	Rerun RerunPolicy `json:"rerun,omitempty"`

	// rerunOOMKilled, with rerun InfrastructureFailures, also re-runs a job whose runner
	// container was killed for using more memory than its limit. Off by default: such a
	// job most often fails the same way again.
	// +optional
	RerunOOMKilled bool `json:"rerunOOMKilled,omitempty"`
}

// DefaultDrainTimeout is DisruptionSpec.DrainTimeout's default.
const DefaultDrainTimeout = time.Hour

// DrainTimeoutOrDefault is the pool's drainTimeout, or its default.
func (d DisruptionSpec) DrainTimeoutOrDefault() time.Duration {
	return durationOr(d.DrainTimeout, DefaultDrainTimeout)
}

// RerunsInfrastructureFailures says whether the pool re-runs jobs killed by the
// infrastructure.
func (d DisruptionSpec) RerunsInfrastructureFailures() bool {
	return d.Rerun == RerunInfrastructureFailures
}
