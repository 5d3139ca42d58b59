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
			spec := RunnerPoolSpec{Labels: tt.labels, NoDefaultLabels: tt.noDefaults}
			spec.Template.Spec.NodeSelector = tt.nodeSelector
			if tt.os != "" {
				spec.Template.Spec.OS = &corev1.PodOS{Name: tt.os}
			}
			if diff := cmp.Diff(tt.wantLabels, spec.RunnerLabels()); diff != "" {
				t.Errorf("RunnerLabels() (-want +got):\n%s", diff)
			}
			pod := spec.Template.Spec.DeepCopy()
			spec.PinPlatform(pod)
			if diff := cmp.Diff(tt.wantSelector, pod.NodeSelector); diff != "" {
				t.Errorf("nodeSelector after PinPlatform (-want +got):\n%s", diff)
			}
			if tt.nodeSelector != nil && len(spec.Template.Spec.NodeSelector) != len(tt.nodeSelector) {
				t.Errorf("PinPlatform changed the pool's template: %v", spec.Template.Spec.NodeSelector)
			}
		})
	}
}
