package demand

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A queued self-hosted job that matches no pool leaves a log line naming its labels,
// its repository and why each pool did not take it, and a count; a job for GitHub's
// hosted runners, or one queued again, does not.
func TestUnmatchedSelfHostedJobIsLoggedAndCounted(t *testing.T) {
	tr, _, _ := newTestTracker(t)
	tr.Router().SetPool(Pool{Key: key("other-org"), Kind: ScopeOrganization, Host: "github.com", Owner: "globex", Labels: []string{"k8s"}})
	var lines []string
	tr.SetLogger(funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))
	before := testutil.ToFloat64(UnmatchedJobs)

	tr.Observe(ev(ActionQueued, 1, "self-hosted", "k8s"))
	tr.Observe(ev(ActionQueued, 1, "self-hosted", "k8s")) // a duplicate delivery
	tr.Observe(ev(ActionQueued, 2, "ubuntu-latest"))
	tr.Observe(ev(ActionQueued, 3, "self-hosted", "linux")) // matches

	if got := testutil.ToFloat64(UnmatchedJobs) - before; got != 1 {
		t.Errorf("gantry_demand_unmatched_jobs_total grew by %v, want 1", got)
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %q", len(lines), lines)
	}
	for _, want := range []string{`"job"=1`, `"labels"=["self-hosted" "k8s"]`, `"repository"="acme/api"`,
		"ci/linux: lacks labels k8s", "ci/other-org: another organization (globex)"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line %s does not contain %s", lines[0], want)
		}
	}
}

func TestExplainBoundsThePoolsNamed(t *testing.T) {
	r := NewRouter()
	for i := range maxConsidered + 3 {
		r.SetPool(Pool{Key: PoolKey{Namespace: "ns", Name: string(rune('a' + i))}, Kind: ScopeRepository, Host: "github.com", Owner: "acme", Repo: "web"})
	}
	got := r.Explain(Job{Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted"}})
	if diff := cmp.Diff([]string{"ns/a: another repository (acme/web)", "and 3 more"}, []string{got[0], got[len(got)-1]}); diff != "" {
		t.Errorf("Explain (-want +got):\n%s", diff)
	}
	if len(got) != maxConsidered+1 {
		t.Errorf("Explain named %d entries, want %d", len(got), maxConsidered+1)
	}
}
