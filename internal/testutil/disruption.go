package testutil

import "github.com/gantry-dev/gantry/api/v1alpha1"

// Disruption sets spec.disruption.
func (b *RunnerPoolBuilder) Disruption(d v1alpha1.DisruptionSpec) *RunnerPoolBuilder {
	b.p.Spec.Disruption = d
	return b
}

// Rerun sets spec.disruption.rerun.
func (b *RunnerPoolBuilder) Rerun(p v1alpha1.RerunPolicy) *RunnerPoolBuilder {
	b.p.Spec.Disruption.Rerun = p
	return b
}
