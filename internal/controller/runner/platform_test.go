package runner

import (
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

func TestPlatformHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(*v1alpha1.RunnerPool)
		wantHint bool
	}{
		{name: "no architecture in the template: pinned to amd64 by Gantry", mutate: func(*v1alpha1.RunnerPool) {}, wantHint: true},
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
			got := platformHint(&pool.Spec)
			if tc.wantHint != (got != "") {
				t.Fatalf("platformHint = %q, want a hint: %v", got, tc.wantHint)
			}
			if tc.wantHint && !strings.Contains(got, "kubernetes.io/arch=amd64") {
				t.Errorf("platformHint = %q, want it to name the pin kubernetes.io/arch=amd64", got)
			}
		})
	}
}
