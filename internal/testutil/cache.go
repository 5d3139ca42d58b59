package testutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// CacheSpec is a valid cache: ReadWriteOnce, 1Gi.
func CacheSpec(name string) v1alpha1.CacheSpec {
	return v1alpha1.CacheSpec{
		Name: name,
		VolumeClaimTemplate: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi"),
			}},
		},
	}
}

// Cache adds a cache and mounts it at mountPath in the runner container.
func (b *RunnerPoolBuilder) Cache(c v1alpha1.CacheSpec, mountPath string) *RunnerPoolBuilder {
	b.p.Spec.Caches = append(b.p.Spec.Caches, c)
	for i := range b.p.Spec.Template.Spec.Containers {
		ct := &b.p.Spec.Template.Spec.Containers[i]
		if ct.Name == v1alpha1.RunnerContainerName {
			ct.VolumeMounts = append(ct.VolumeMounts, corev1.VolumeMount{Name: c.Name, MountPath: mountPath})
		}
	}
	return b
}
