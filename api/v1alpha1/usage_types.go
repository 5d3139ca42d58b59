package v1alpha1

// UsageSpec is what a pool's runners tell cost tools beyond the usage record every
// runner gets (a log line, an event and the usage metrics; docs/usage.md).
type UsageSpec struct {
	// podLabels, when true, labels each runner pod with the repository and the workflow
	// of the job its runner takes — gantry.dev/repository (OWNER.REPO) and
	// gantry.dev/workflow, made valid label values, the exact names in annotations of
	// the same keys — for cost tools that group pods by label (OpenCost, Kubecost). A
	// just-in-time runner takes whichever job GitHub gives it, so the labels cannot be
	// set when the pod is made: each costs one patch of the pod, one more API server
	// write per job. The container hook's workflow pods are not labeled: their
	// template is one file for every job of the pool. Default false.
	// +optional
	PodLabels bool `json:"podLabels,omitempty"`
}

// PodLabelsOn reports whether the pool labels its runner pods with their job's
// repository and workflow.
func (u *UsageSpec) PodLabelsOn() bool { return u != nil && u.PodLabels }
