package testutil

import (
	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// KubernetesMode sets spec.containerMode to Kubernetes mode with workflow pods in
// namespace, every other field at its default.
func (b *RunnerPoolBuilder) KubernetesMode(namespace string) *RunnerPoolBuilder {
	b.p.Spec.ContainerMode = &v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeKubernetes, Namespace: namespace}
	return b
}

// ContainerMode sets spec.containerMode as given.
func (b *RunnerPoolBuilder) ContainerMode(c v1alpha1.ContainerModeSpec) *RunnerPoolBuilder {
	b.p.Spec.ContainerMode = c.DeepCopy()
	return b
}
