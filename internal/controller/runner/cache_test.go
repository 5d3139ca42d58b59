package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

func TestBuildPodMountsCaches(t *testing.T) {
	pool := testutil.RunnerPool("ci", "linux").
		Cache(testutil.CacheSpec("docker"), "/var/lib/docker").
		Cache(testutil.CacheSpec("tools"), "/opt/hostedtoolcache").Obj()
	rn := &v1alpha1.Runner{}
	rn.Namespace, rn.Name = "ci", "linux-abcde"
	rn.Status.Caches = []v1alpha1.RunnerCacheVolume{{Name: "docker", ClaimName: "linux-docker-0", Hit: true}, {Name: "tools"}}
	got := buildPod(rn, pool).Spec.Volumes
	want := []corev1.Volume{
		{Name: "docker", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "linux-docker-0"}}},
		{Name: "tools", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pod volumes (-want +got):\n%s", diff)
	}
}

func TestPinnedNode(t *testing.T) {
	local := func(exprs ...corev1.NodeSelectorRequirement) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
			Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}},
		}}}
	}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want string
	}{
		{"network volume", &corev1.PersistentVolume{}, ""},
		{"local volume", local(corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}), "node-1"},
		{"zonal volume", local(corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}), ""},
		{"two nodes", local(corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1", "n2"}}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pinnedNode(tt.pv); got != tt.want {
				t.Errorf("pinnedNode = %q, want %q", got, tt.want)
			}
		})
	}
}
