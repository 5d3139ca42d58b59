package doctor

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Every finding has a heading in docs/troubleshooting.md's doctor section.
func TestEveryFindingHasATroubleshootingEntry(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## gantry doctor findings\n")
	if !ok {
		t.Fatal("docs/troubleshooting.md has no section \"gantry doctor findings\"")
	}
	var headings []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "### ") {
			headings = append(headings, line)
		}
	}
	for _, f := range AllFindings {
		re := regexp.MustCompile(`\b` + string(f) + `\b`)
		found := false
		for _, h := range headings {
			found = found || re.MatchString(h)
		}
		if !found {
			t.Errorf("finding %s has no heading in docs/troubleshooting.md's doctor section", f)
		}
	}
}

func pool(name, url string, labels ...string) v1alpha1.RunnerPool {
	return v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name},
		Spec: v1alpha1.RunnerPoolSpec{GitHub: v1alpha1.GitHubSpec{URL: url}, Labels: labels}}
}

func TestRouteJob(t *testing.T) {
	pools := []v1alpha1.RunnerPool{
		pool("org", "https://github.com/acme", "linux"),
		pool("gpu", "https://github.com/acme", "linux", "gpu"),
		pool("repo", "https://github.com/acme/api", "linux"),
		pool("other", "https://github.com/globex", "linux"),
		pool("ent", "https://github.com/enterprises/big", "linux"),
	}
	tests := []struct {
		name   string
		job    JobQuery
		want   string
		reason map[string]string // pool → a part of its explanation
	}{
		{"the repository pool is the most specific", JobQuery{Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "Linux"}}, "ci/repo",
			map[string]string{"ci/org": "the repository scope is more specific", "ci/other": "organization globex", "ci/ent": "--enterprise"}},
		{"fewest labels among organization pools", JobQuery{Owner: "acme", Repo: "web", Labels: []string{"linux"}}, "ci/org",
			map[string]string{"ci/gpu": "fewer labels", "ci/repo": "repository acme/api"}},
		{"a label only one pool has", JobQuery{Owner: "acme", Repo: "web", Labels: []string{"linux", "gpu"}}, "ci/gpu",
			map[string]string{"ci/org": `"gpu"`}},
		{"no pool", JobQuery{Owner: "acme", Repo: "web", Labels: []string{"windows"}}, "",
			map[string]string{"ci/org": `"windows"`, "ci/gpu": `"windows"`}},
		{"an enterprise named", JobQuery{Owner: "initech", Repo: "x", Labels: []string{"linux"}, Enterprise: "big"}, "ci/ent", nil},
		{"another host", JobQuery{Host: "ghes.example.com", Owner: "acme", Repo: "api", Labels: []string{"linux"}}, "",
			map[string]string{"ci/repo": "on github.com, not acme/api on ghes.example.com"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := routeJob(pools, tc.job)
			if rep.Pool != tc.want {
				t.Errorf("routed to %q, want %q", rep.Pool, tc.want)
			}
			why := map[string]string{}
			for _, d := range rep.Pools {
				why[d.Pool] = d.Why
			}
			for p, part := range tc.reason {
				if !strings.Contains(why[p], part) {
					t.Errorf("pool %s: %q, want it to contain %q", p, why[p], part)
				}
			}
		})
	}
}

func TestControllerCheck(t *testing.T) {
	p := pool("p", "https://github.com/acme")
	p.Generation = 2
	tests := []struct {
		name  string
		conds []metav1.Condition
		want  Finding
	}{
		{"never reconciled", nil, FindingPoolNotReconciled},
		{"an older generation", []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: "True", ObservedGeneration: 1}}, FindingPoolNotReconciled},
		{"not ready", []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: "False", Reason: "InvalidURL", ObservedGeneration: 2}}, FindingPoolNotReady},
		{"ready", []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: "True", ObservedGeneration: 2}}, ""},
	}
	for _, tc := range tests {
		p.Status.Conditions = tc.conds
		if got := controllerCheck(&p).Result; got != tc.want {
			t.Errorf("%s: finding %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestReportOutput(t *testing.T) {
	rep := &Report{Pools: []PoolReport{{Pool: "ci/p", Checks: []Check{
		{Name: CheckSecret, Status: OK, Message: "found"},
		{Name: CheckGitHub, Status: Problem, Result: FindingCredentialsRejected, Message: "401", Fix: "fix it"},
	}}}}
	if diff := cmp.Diff([]Finding{FindingCredentialsRejected}, rep.Findings()); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if rep.ExitCode() != 1 {
		t.Errorf("exit code %d, want 1", rep.ExitCode())
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"✓", "✗", "CredentialsRejected: 401", "fix: fix it", "1 problem found"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, text.String())
		}
	}
	var js strings.Builder
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"problemCount": 1`, `"finding": "CredentialsRejected"`, `"fix": "fix it"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON output lacks %q:\n%s", want, js.String())
		}
	}
}

// A scale-set pool's check reads its ScaleSetSession condition.
func TestScaleSetCheck(t *testing.T) {
	p := pool("ss", "https://github.com/acme", "linux")
	p.Spec.Demand = v1alpha1.DemandSpec{Source: v1alpha1.DemandSourceScaleSet}
	if got := scaleSetCheck(&p); got.Result != FindingScaleSetNotConnected {
		t.Errorf("no condition: %+v, want %s", got, FindingScaleSetNotConnected)
	}
	p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionScaleSetSession, Status: "False",
		Reason: v1alpha1.ReasonSessionConflict, Message: "409"}}
	if got := scaleSetCheck(&p); got.Result != FindingScaleSetNotConnected || !strings.Contains(got.Fix, v1alpha1.ReasonSessionConflict) {
		t.Errorf("a conflict: %+v, want %s pointing at the SessionConflict entry", got, FindingScaleSetNotConnected)
	}
	p.Status.Conditions[0].Status = "True"
	p.Status.ScaleSet = &v1alpha1.ScaleSetStatus{ID: 7}
	if got := scaleSetCheck(&p); got.Status != OK || !strings.Contains(got.Message, "id 7") {
		t.Errorf("an open session: %+v, want ok naming id 7", got)
	}
}
