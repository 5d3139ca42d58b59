package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestRunnerLabelsAndPlatform(t *testing.T) {
	tests := []struct {
		name         string
		nodeSelector map[string]string
		os           corev1.OSName
		labels       []string
		noDefaults   bool
		affinity     *corev1.Affinity
		status       *PlatformStatus
		wantLabels   []string
		// wantSelector is the pod's nodeSelector after PinPlatform.
		wantSelector map[string]string
	}{
		{
			name:         "nothing pinned: linux x64, and the pod is pinned to linux/amd64",
			wantLabels:   []string{"self-hosted", "linux", "x64"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "amd64"},
		},
		{
			name:         "pool labels come after the defaults",
			labels:       []string{"gpu", "big"},
			wantLabels:   []string{"self-hosted", "linux", "x64", "gpu", "big"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "amd64"},
		},
		{
			name:         "pool labels repeating a default, in another case, are registered once",
			labels:       []string{"Linux", "X64", "Self-Hosted", "gpu", "GPU"},
			wantLabels:   []string{"self-hosted", "linux", "x64", "gpu"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "amd64"},
		},
		{
			name:         "arm64 nodeSelector: ARM64, OS still pinned to linux",
			nodeSelector: map[string]string{NodeLabelArch: "arm64", "pool": "ci"},
			wantLabels:   []string{"self-hosted", "linux", "ARM64"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "arm64", "pool": "ci"},
		},
		{
			name:         "32-bit arm",
			nodeSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "arm"},
			wantLabels:   []string{"self-hosted", "linux", "ARM"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "arm"},
		},
		{
			name:         "windows nodeSelector",
			nodeSelector: map[string]string{NodeLabelOS: "windows"},
			wantLabels:   []string{"self-hosted", "windows", "x64"},
			wantSelector: map[string]string{NodeLabelOS: "windows", NodeLabelArch: "amd64"},
		},
		{
			name:         "spec.os.name windows, no nodeSelector: windows, and the pod is pinned there",
			os:           corev1.Windows,
			wantLabels:   []string{"self-hosted", "windows", "x64"},
			wantSelector: map[string]string{NodeLabelOS: "windows", NodeLabelArch: "amd64"},
		},
		{
			name:         "darwin nodes register macOS",
			nodeSelector: map[string]string{NodeLabelOS: "darwin", NodeLabelArch: "arm64"},
			wantLabels:   []string{"self-hosted", "macOS", "ARM64"},
			wantSelector: map[string]string{NodeLabelOS: "darwin", NodeLabelArch: "arm64"},
		},
		{
			name:         "an architecture GitHub has no label for registers none",
			nodeSelector: map[string]string{NodeLabelArch: "s390x"},
			wantLabels:   []string{"self-hosted", "linux"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "s390x"},
		},
		{
			name:         "status.platform (read from the nodes) stands for what the template leaves open",
			status:       &PlatformStatus{OS: "linux", Arch: "arm64", Source: PlatformFromNodes},
			wantLabels:   []string{"self-hosted", "linux", "ARM64"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "arm64"},
		},
		{
			name:         "the template's nodeSelector wins over status.platform",
			nodeSelector: map[string]string{NodeLabelArch: "amd64"},
			status:       &PlatformStatus{OS: "linux", Arch: "arm64", Source: PlatformFromNodes},
			wantLabels:   []string{"self-hosted", "linux", "x64"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "amd64"},
		},
		{
			name:         "a required node affinity allowing one architecture pins it",
			affinity:     requiredAffinity(corev1.NodeSelectorRequirement{Key: NodeLabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}),
			status:       &PlatformStatus{OS: "linux", Arch: "amd64", Source: PlatformDefault},
			wantLabels:   []string{"self-hosted", "linux", "ARM64"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "arm64"},
		},
		{
			name:         "a required node affinity allowing two architectures pins neither: status.platform chooses",
			affinity:     requiredAffinity(corev1.NodeSelectorRequirement{Key: NodeLabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}}),
			status:       &PlatformStatus{OS: "linux", Arch: "arm64", Source: PlatformFromNodes},
			wantLabels:   []string{"self-hosted", "linux", "ARM64"},
			wantSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "arm64"},
		},
		{
			name:         "noDefaultLabels: only the pool's labels, the pod left as written",
			noDefaults:   true,
			labels:       []string{"gpu", "self-hosted"},
			wantLabels:   []string{"gpu", "self-hosted"},
			wantSelector: nil,
		},
		{
			name:         "noDefaultLabels keeps the template's own nodeSelector",
			noDefaults:   true,
			nodeSelector: map[string]string{NodeLabelArch: "arm64"},
			labels:       []string{"gpu"},
			wantLabels:   []string{"gpu"},
			wantSelector: map[string]string{NodeLabelArch: "arm64"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := &RunnerPool{Spec: RunnerPoolSpec{Labels: tt.labels, NoDefaultLabels: tt.noDefaults}}
			spec := &pool.Spec
			spec.Template.Spec.NodeSelector = tt.nodeSelector
			spec.Template.Spec.Affinity = tt.affinity
			if tt.os != "" {
				spec.Template.Spec.OS = &corev1.PodOS{Name: tt.os}
			}
			pool.Status.Platform = tt.status
			if diff := cmp.Diff(tt.wantLabels, pool.RunnerLabels()); diff != "" {
				t.Errorf("RunnerLabels() (-want +got):\n%s", diff)
			}
			pod := spec.Template.Spec.DeepCopy()
			pool.PinPlatform(pod)
			if diff := cmp.Diff(tt.wantSelector, pod.NodeSelector); diff != "" {
				t.Errorf("nodeSelector after PinPlatform (-want +got):\n%s", diff)
			}
			if tt.nodeSelector != nil && len(spec.Template.Spec.NodeSelector) != len(tt.nodeSelector) {
				t.Errorf("PinPlatform changed the pool's template: %v", spec.Template.Spec.NodeSelector)
			}
		})
	}
}

func requiredAffinity(reqs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}},
	}}}
}

func TestTemplatePlatform(t *testing.T) {
	in := func(key string, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
	}
	tests := []struct {
		name     string
		pod      corev1.PodSpec
		wantOS   string
		wantArch string
	}{
		{name: "nothing pinned"},
		{name: "nodeSelector", pod: corev1.PodSpec{NodeSelector: map[string]string{NodeLabelOS: "linux", NodeLabelArch: "arm64"}}, wantOS: "linux", wantArch: "arm64"},
		{name: "spec.os.name", pod: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}}, wantOS: "windows"},
		{name: "affinity, one value each", pod: corev1.PodSpec{Affinity: requiredAffinity(in(NodeLabelOS, "linux"), in(NodeLabelArch, "arm64"))}, wantOS: "linux", wantArch: "arm64"},
		{name: "affinity allowing two values pins nothing", pod: corev1.PodSpec{Affinity: requiredAffinity(in(NodeLabelArch, "amd64", "arm64"))}},
		{name: "affinity NotIn pins nothing", pod: corev1.PodSpec{Affinity: requiredAffinity(corev1.NodeSelectorRequirement{Key: NodeLabelArch, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"amd64"}})}},
		{name: "affinity terms naming different values pin nothing", pod: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{in(NodeLabelArch, "amd64")}}, {MatchExpressions: []corev1.NodeSelectorRequirement{in(NodeLabelArch, "arm64")}}},
		}}}}},
		{name: "affinity terms naming the same value pin it", pod: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{in(NodeLabelArch, "arm64"), in("pool", "a")}}, {MatchExpressions: []corev1.NodeSelectorRequirement{in(NodeLabelArch, "arm64")}}},
		}}}}, wantArch: "arm64"},
		{name: "nodeSelector wins over affinity", pod: corev1.PodSpec{NodeSelector: map[string]string{NodeLabelArch: "amd64"}, Affinity: requiredAffinity(in(NodeLabelArch, "arm64"))}, wantArch: "amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := RunnerPoolSpec{}
			spec.Template.Spec = tt.pod
			os, arch := spec.TemplatePlatform()
			if diff := cmp.Diff([]string{tt.wantOS, tt.wantArch}, []string{os, arch}); diff != "" {
				t.Errorf("TemplatePlatform() os, arch (-want +got):\n%s", diff)
			}
		})
	}
}
