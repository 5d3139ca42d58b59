package runner

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// BuildPod returns the pod the reconciler creates for runner, a Runner of pool, as it
// sends it to the API server (before admission): for tests and tools that must see
// exactly what Gantry asks for.
func BuildPod(runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) *corev1.Pod {
	return buildPod(runner, pool)
}
