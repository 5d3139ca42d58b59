package hookrelease

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The names the hook gives what it makes, as src/hooks/constants.ts of v0.8.1 builds them:
// the runner pod's name cut so that the whole (with an 8-character suffix for step pods
// and Secrets) is at most 63 characters.
func TestNames(t *testing.T) {
	long := strings.Repeat("r", 70)
	tests := []struct {
		pod                    string
		workflow, step, secret string
	}{
		{"linux-abcde", "linux-abcde-workflow", "linux-abcde-step-", "linux-abcde-secret-"},
		{long, long[:54] + "-workflow", long[:49] + "-step-", long[:47] + "-secret-"},
	}
	for _, tc := range tests {
		got := []string{WorkflowPodName(tc.pod), StepPodPrefix(tc.pod), SecretPrefix(tc.pod)}
		if diff := cmp.Diff([]string{tc.workflow, tc.step, tc.secret}, got); diff != "" {
			t.Errorf("names of %s (-want +got):\n%s", tc.pod, diff)
		}
		if len(got[0]) > 63 || len(got[1])+SuffixLength > 63 || len(got[2])+SuffixLength > 63 {
			t.Errorf("names of %s longer than 63 characters: %v", tc.pod, got)
		}
	}
}

// The permissions are requiredPermissions of v0.8.1: 13 reviews, the core group only.
func TestPermissions(t *testing.T) {
	n := 0
	for _, p := range Permissions {
		if p.Group != "" {
			t.Errorf("%+v: the no-volume hook asks for the core group only", p)
		}
		n += len(p.Verbs)
	}
	if n != 13 {
		t.Errorf("%d verbs, want the hook's 13", n)
	}
}
