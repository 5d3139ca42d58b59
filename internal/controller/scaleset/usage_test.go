package scaleset

import "testing"

// A job message's workflow is its file, and its result GitHub's conclusion of the same
// job, for the runner's usage record.
func TestJobMessageUsage(t *testing.T) {
	for ref, want := range map[string]string{
		"acme/api/.github/workflows/ci.yml@refs/heads/main": ".github/workflows/ci.yml",
		"acme/api/.github/workflows/ci.yml":                 ".github/workflows/ci.yml",
		"":                                                  "",
	} {
		if got := workflowOfRef(ref); got != want {
			t.Errorf("workflowOfRef(%q) = %q, want %q", ref, got, want)
		}
	}
	for result, want := range map[string]string{"succeeded": "success", "Failed": "failure", "canceled": "cancelled", "skipped": "skipped", "": ""} { //nolint:misspell // GitHub's spelling
		if got := conclusionOf(result); got != want {
			t.Errorf("conclusionOf(%q) = %q, want %q", result, got, want)
		}
	}
}
