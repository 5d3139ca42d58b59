package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CacheReclaimPolicy says what happens to a cache's volumes when the pool is deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type CacheReclaimPolicy string

const (
	// CacheReclaimDelete deletes the volumes with the pool.
	CacheReclaimDelete CacheReclaimPolicy = "Delete"
	// CacheReclaimRetain keeps them: a pool created again under the same name, with a
	// cache of the same name, takes them up again.
	CacheReclaimRetain CacheReclaimPolicy = "Retain"
)

// CacheIsolation says which jobs may share a cache volume.
// +kubebuilder:validation:Enum=Shared;Repository
type CacheIsolation string

const (
	// CacheIsolationShared lets a volume serve any job the pool's runners take: any
	// repository in the pool's scope (organization or enterprise). A job can leave
	// anything in the cache for the next one: use it where every repository in the
	// scope is trusted alike.
	CacheIsolationShared CacheIsolation = "Shared"
	// CacheIsolationRepository guarantees that a volume only ever serves one
	// repository's jobs. Gantry guarantees it the only way GitHub lets it: the pool must
	// be repository-scoped (github.url is https://HOST/OWNER/REPO), so its runners are
	// registered in that repository and GitHub cannot give them another repository's
	// job. Each volume also records the repository it served, and a volume that served
	// another repository (one retained from an earlier pool of the same name) is never
	// mounted.
	CacheIsolationRepository CacheIsolation = "Repository"
)

// CacheSpec is a named cache: a set of PersistentVolumeClaims made from one template,
// each mounted by at most one live runner pod at a time, that outlive the ephemeral
// runners that use them. A container of the template mounts it with a volumeMount whose
// name is the cache's name; Gantry adds the pod volume of that name (the claimed volume,
// or an emptyDir when none is free and the cache is at maxVolumes).
type CacheSpec struct {
	// name of the cache, a DNS label (at most 63 characters), unique in the pool. The
	// template's containers mount it by this name (volumeMounts[].name), and the
	// template must not declare a volume of that name itself.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="caches[].name must be a DNS label: lower-case letters, digits and dashes, starting and ending with a letter or digit, such as docker-cache"
	Name string `json:"name"`

	// volumeClaimTemplate is the spec of each PersistentVolumeClaim Gantry makes for the
	// cache: it must set accessModes and resources.requests.storage. ReadWriteOnce is
	// enough: a volume is mounted by one runner pod at a time.
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.accessModes) && size(self.accessModes) > 0",message="caches[].volumeClaimTemplate.accessModes must be set, such as [ReadWriteOnce]: each volume is mounted by one runner pod at a time"
	// +kubebuilder:validation:XValidation:rule="has(self.resources) && has(self.resources.requests) && 'storage' in self.resources.requests",message="caches[].volumeClaimTemplate.resources.requests.storage must be set, such as 20Gi"
	VolumeClaimTemplate corev1.PersistentVolumeClaimSpec `json:"volumeClaimTemplate"`

	// maxVolumes is the most volumes the cache may have. A runner that finds none free
	// when the cache is at maxVolumes starts without it (an empty directory in its
	// place) rather than wait. Unset: the pool's maxRunners.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxVolumes *int32 `json:"maxVolumes,omitempty"`

	// idleTTL is how long a volume may sit unused before it is deleted.
	// A duration from 1m to 8760h (a year) with units, such as 24h or 168h.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1m') && duration(self) <= duration('8760h')",message="caches[].idleTTL must be a duration from 1m to 8760h written with units, such as \"24h\" or \"168h\" (a bare number such as \"600\" or words such as \"1 day\" are refused)"
	IdleTTL *metav1.Duration `json:"idleTTL,omitempty"`

	// reclaimPolicy is what happens to the volumes when the pool is deleted: Delete
	// (the default) or Retain.
	// +optional
	// +kubebuilder:default=Delete
	ReclaimPolicy CacheReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// isolation says which jobs may share a volume: Shared (the default: any job of the
	// pool) or Repository (only one repository's jobs ever use a volume; the pool must
	// be repository-scoped). See docs/caches.md for the trade-offs.
	// +optional
	// +kubebuilder:default=Shared
	Isolation CacheIsolation `json:"isolation,omitempty"`
}

// DefaultCacheIdleTTL is idleTTL's default.
const DefaultCacheIdleTTL = 24 * time.Hour

// IdleTTLOrDefault returns idleTTL, or its default when unset.
func (c CacheSpec) IdleTTLOrDefault() time.Duration {
	return durationOr(c.IdleTTL, DefaultCacheIdleTTL)
}

// MaxVolumesOrDefault returns maxVolumes, or maxRunners when unset.
func (c CacheSpec) MaxVolumesOrDefault(maxRunners int32) int32 {
	if c.MaxVolumes == nil {
		return maxRunners
	}
	return *c.MaxVolumes
}

// CacheStatus is what a cache holds now.
type CacheStatus struct {
	// name of the cache.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// volumes the cache has.
	// +optional
	Volumes int32 `json:"volumes"`
	// inUse are volumes claimed by a runner.
	// +optional
	InUse int32 `json:"inUse"`
	// free are volumes a new runner can take.
	// +optional
	Free int32 `json:"free"`
	// hits counts runners that started on a volume an earlier runner had used, since the
	// controller started leading.
	// +optional
	Hits int64 `json:"hits"`
	// misses counts runners that started on a fresh volume or, at maxVolumes, without
	// the cache, since the controller started leading.
	// +optional
	Misses int64 `json:"misses"`
}

// RunnerCacheVolume is the volume a runner's pod mounts for one cache.
type RunnerCacheVolume struct {
	// name of the cache.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// claimName is the PersistentVolumeClaim the pod mounts; empty when the runner
	// started without the cache (an emptyDir in its place).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`
	// hit is true when an earlier runner had used the volume.
	// +optional
	Hit bool `json:"hit,omitempty"`
}

// Labels and annotations of cache volumes (PersistentVolumeClaims Gantry makes).
const (
	// LabelCache names the cache of a volume; LabelPool its pool. A claimed volume
	// carries LabelRunner naming the runner that holds it.
	LabelCache = "gantry.dev/cache"
	// AnnotationCacheRepository is the repository (OWNER/REPO) whose job the volume
	// served last.
	AnnotationCacheRepository = "gantry.dev/cache-repository"
	// AnnotationCacheLastUsed is when the volume was last released (RFC 3339).
	AnnotationCacheLastUsed = "gantry.dev/cache-last-used"
)
