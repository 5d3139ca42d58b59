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
	// Gantry still counts such jobs (gantry_rerun_jobs_total, result NotOptedIn) and says
	// so in an event on the pool (JobNotRerun).
	RerunNever RerunPolicy = "Never"
	// RerunInfrastructureFailures re-runs, once, each job whose runner died for a reason
	// of the infrastructure — its node lost (NodeLost) or deleted under it (NodeDeleted:
	// a spot reclaim), its pod evicted or preempted (Evicted), disruption.drainTimeout
	// reached (DrainTimeout), and, with rerunOOMKilled, OOMKilled — once its workflow run
	// has completed and only if GitHub concluded the job failure. It needs the Actions
	// write permission of the pool's credentials.
	RerunInfrastructureFailures RerunPolicy = "InfrastructureFailures"
)

// DisruptionSpec says how the pool's runners meet their nodes going away.
type DisruptionSpec struct {
	// drainTimeout bounds how long a runner that is running a job holds up a voluntary
	// disruption of its node: a drain through the eviction API (kubectl drain, a node
	// upgrade), a cluster-autoscaler scale-down, a Karpenter consolidation, drift or
	// expiry. Every runner pod of the pool is covered by the pool's PodDisruptionBudget,
	// which lets no eviction through; once the node is cordoned, or tainted by an
	// autoscaler about to remove it (ToBeDeletedByClusterAutoscaler, karpenter.sh/disrupted,
	// karpenter.sh/disruption), Gantry retires the idle and pending runners on it at once
	// (removed from GitHub first, then their pods) and the pool replaces them elsewhere,
	// while a busy runner finishes its job (its condition Draining says since when).
	// Past the bound, the busy runner's pod is deleted: its job is killed (reason
	// DrainTimeout) and, with rerun InfrastructureFailures, re-run. All of this needs the
	// controller to list and watch nodes: on a namespaced install, which may not, the pool
	// gets no budget (a drain would wait on idle runners nothing retires), so a drain
	// evicts busy runners as it does any pod (reason Evicted, re-run with rerun
	// InfrastructureFailures).
	// A duration from 1s to 120h with units, such as 1h or 90m.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('120h')",message="disruption.drainTimeout must be a duration from 1s to 120h written with units, such as \"1h\" or \"90m\" (a bare number such as \"3600\" or words such as \"1 hour\" are refused)"
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// rerun says which jobs killed under their runner Gantry re-runs: Never (the
	// default) or InfrastructureFailures, each job whose runner died for a reason of the
	// infrastructure re-run once, after its workflow run has completed (GitHub refuses a
	// re-run before: 403). A job that failed on its own — its steps failed, it was
	// canceled, its container was OOM-killed (unless rerunOOMKilled) — is never re-run,
	// nor a runner killed before it took a job (there is nothing to re-run).
	// InfrastructureFailures needs the Actions write permission (`actions: write` for a
	// GitHub App; the repo scope for a classic token): `gantry doctor` checks it.
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

// RerunsOOMKilled says whether the pool re-runs a job whose runner container was
// OOM-killed: rerun InfrastructureFailures and rerunOOMKilled.
func (d DisruptionSpec) RerunsOOMKilled() bool {
	return d.RerunsInfrastructureFailures() && d.RerunOOMKilled
}

// RerunsInfrastructureFailures says whether the pool re-runs jobs killed by the
// infrastructure.
func (d DisruptionSpec) RerunsInfrastructureFailures() bool {
	return d.Rerun == RerunInfrastructureFailures
}

// RerunState is where Gantry is in re-running a job killed under its runner.
// +kubebuilder:validation:Enum=Waiting;Done;Skipped
type RerunState string

const (
	// RerunWaiting: the job's workflow run has not completed yet (GitHub re-runs a job
	// only then), or GitHub could not be asked yet; Gantry looks again, less often as
	// the wait grows (every 10 s at first, at most every 2 minutes), and at once when
	// another job of the run starts or ends on one of Gantry's runners.
	RerunWaiting RerunState = "Waiting"
	// RerunDone: the job runs again in a new attempt of its workflow run — re-run by
	// Gantry, or already by someone else (a person's "Re-run failed jobs").
	RerunDone RerunState = "Done"
	// RerunSkipped: nothing was re-run, and the message says why: the job did not fail
	// (it finished, or was canceled), its run was re-run 50 times (GitHub's limit), its
	// run or pool is gone, or GitHub refused and Gantry gave up.
	RerunSkipped RerunState = "Skipped"
)

// RunnerRerun is the record of re-running the job a runner was killed in.
type RunnerRerun struct {
	// state is Waiting, Done or Skipped.
	State RerunState `json:"state"`
	// attempt is the workflow run's attempt the job runs again in (Done).
	// +optional
	Attempt int64 `json:"attempt,omitempty"`
	// message says, for a person, what Gantry saw and did.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Pending reports whether the re-run is still to be decided: Waiting.
func (r *RunnerRerun) Pending() bool { return r != nil && r.State == RerunWaiting }
