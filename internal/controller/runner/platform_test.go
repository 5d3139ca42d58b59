package runner

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

func TestPlatformHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(*v1alpha1.RunnerPool)
		wantHint bool
		wantPin  string
		wantWhy  string
	}{
		{name: "no architecture in the template, no node seen: pinned to amd64 by Gantry", mutate: func(*v1alpha1.RunnerPool) {},
			wantHint: true, wantPin: "kubernetes.io/arch=amd64", wantWhy: "no node was seen"},
		{name: "no architecture in the template, read from the nodes: the pin and why", mutate: func(p *v1alpha1.RunnerPool) {
			p.Status.Platform = &v1alpha1.PlatformStatus{OS: "linux", Arch: "arm64", Source: v1alpha1.PlatformFromNodes, Message: "every node is linux/arm64"}
		}, wantHint: true, wantPin: "kubernetes.io/arch=arm64", wantWhy: "every node is linux/arm64"},
		{name: "a required node affinity pins arm64 itself", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1alpha1.NodeLabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}}},
			}}}
		}},
		{name: "the template pins arm64 itself", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelArch: "arm64"}
		}},
		{name: "noDefaultLabels: nothing pinned", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.NoDefaultLabels = true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testutil.RunnerPool("ci", "linux").Obj()
			tc.mutate(pool)
			got := platformHint(pool)
			if tc.wantHint != (got != "") {
				t.Fatalf("platformHint = %q, want a hint: %v", got, tc.wantHint)
			}
			if !strings.Contains(got, tc.wantPin) || !strings.Contains(got, tc.wantWhy) {
				t.Errorf("platformHint = %q, want it to name the pin %q and why (%q)", got, tc.wantPin, tc.wantWhy)
			}
		})
	}
}
