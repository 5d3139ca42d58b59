package usage

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation"
)

var t0 = time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)

func secs(n float64) *float64 { return &n }

// rec is a record of a runner that ran a job of repo's workflow, lived runner seconds
// with one core requested, and waited queue seconds (negative: unknown).
func rec(repo, workflow string, runner, queue float64) Record {
	r := Record{Version: Version, Namespace: "ci", Pool: "linux", Repository: repo, Workflow: workflow,
		PodCreatedAt: t0, EndedAt: t0.Add(time.Duration(runner * float64(time.Second))),
		RunnerSeconds: runner, CPURequestCores: 1, RequestedCPUSeconds: runner}
	if queue >= 0 {
		r.QueueSeconds = secs(queue)
	}
	return r
}

// The summary sums runner- and CPU-seconds per repository and per workflow, counts the
// jobs, keeps a runner's time without a job apart (none), and takes the queue's p50
// and p99 by nearest rank; the totals are the sums of the repository rows.
func TestSummarize(t *testing.T) {
	recs := []Record{
		rec("acme/web", "CI", 100, 1), rec("acme/web", "CI", 50, 3), rec("acme/web", "Lint", 10, 2),
		rec("acme/api", "CI", 120, 10), rec("acme/api", "CI", 30, -1),
		{Version: Version, Namespace: "ci", Pool: "linux", PodCreatedAt: t0, EndedAt: t0.Add(40 * time.Second), RunnerSeconds: 40, RequestedCPUSeconds: 40},
	}
	s := Summarize(recs)
	want := Summary{
		Source: "records", From: t0.Add(10 * time.Second), To: t0.Add(120 * time.Second), Records: 6,
		Jobs: 5, RunnerSeconds: 350, RequestedCPUSeconds: 350,
		Repositories: []Row{
			{Repository: "acme/web", Jobs: 3, RunnerSeconds: 160, RequestedCPUSeconds: 160, QueueP50: secs(2), QueueP99: secs(3)},
			{Repository: "acme/api", Jobs: 2, RunnerSeconds: 150, RequestedCPUSeconds: 150, QueueP50: secs(10), QueueP99: secs(10)},
			{Repository: None, RunnerSeconds: 40, RequestedCPUSeconds: 40},
		},
		Workflows: []Row{
			{Repository: "acme/api", Workflow: "CI", Jobs: 2, RunnerSeconds: 150, RequestedCPUSeconds: 150, QueueP50: secs(10), QueueP99: secs(10)},
			{Repository: "acme/web", Workflow: "CI", Jobs: 2, RunnerSeconds: 150, RequestedCPUSeconds: 150, QueueP50: secs(1), QueueP99: secs(3)},
			{Repository: "acme/web", Workflow: "Lint", Jobs: 1, RunnerSeconds: 10, RequestedCPUSeconds: 10, QueueP50: secs(2), QueueP99: secs(2)},
		},
	}
	if d := cmp.Diff(want, s, cmpopts.IgnoreUnexported(Row{})); d != "" {
		t.Errorf("Summarize (-want +got):\n%s", d)
	}
	var byQueue []string
	for _, r := range ByQueue(s.Repositories) {
		byQueue = append(byQueue, r.Repository)
	}
	if d := cmp.Diff([]string{"acme/api", "acme/web"}, byQueue); d != "" {
		t.Errorf("ByQueue: repositories without a queue time are left out, the longest p99 first (-want +got):\n%s", d)
	}
}

// The text a person reads: the window, the totals, then four tables with the names
// left and the figures right-aligned, the runner's time without a job named as such.
func TestWriteText(t *testing.T) {
	s := Summarize([]Record{
		rec("acme/web", "CI", 5400, 1), rec("acme/api", "Release", 1800, 30.5),
		{Version: Version, PodCreatedAt: t0, EndedAt: t0.Add(time.Hour), RunnerSeconds: 3600},
	})
	var b strings.Builder
	if err := s.WriteText(&b, 2); err != nil {
		t.Fatal(err)
	}
	want := `Usage from records, 2026-05-04 09:30:00 to 2026-05-04 10:30:00 UTC: 2 jobs, 3.00 runner-hours, 2.00 requested CPU core-hours.

Top 2 repositories by runner time
  REPOSITORY  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/web       1          1.50  50.0%            1.50       1.0s       1.0s
  (no job)       0          1.00  33.3%            0.00          -          -

Top 2 workflows by runner time
  REPOSITORY  WORKFLOW  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/web    CI           1          1.50  50.0%            1.50       1.0s       1.0s
  acme/api    Release      1          0.50  16.7%            0.50      30.5s      30.5s

Top 2 repositories by queue time (p99)
  REPOSITORY  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/api       1          0.50  16.7%            0.50      30.5s      30.5s
  acme/web       1          1.50  50.0%            1.50       1.0s       1.0s

Top 2 workflows by queue time (p99)
  REPOSITORY  WORKFLOW  JOBS  RUNNER-HOURS  SHARE  CPU-CORE-HOURS  QUEUE P50  QUEUE P99
  acme/api    Release      1          0.50  16.7%            0.50      30.5s      30.5s
  acme/web    CI           1          1.50  50.0%            1.50       1.0s       1.0s
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("WriteText (-want +got):\n%s", d)
	}
}

// Bounded keeps the first max values and answers Other for every later one, however
// many goroutines ask: the series it labels stay bounded.
func TestBounded(t *testing.T) {
	b := NewBounded(3)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				b.Value(fmt.Sprintf("acme/repo-%d", (i+g)%50))
			}
		}()
	}
	wg.Wait()
	if b.Kept() != 3 {
		t.Fatalf("kept %d values, want 3", b.Kept())
	}
	distinct := map[string]bool{}
	for i := range 50 {
		distinct[b.Value(fmt.Sprintf("acme/repo-%d", i))] = true
	}
	if len(distinct) != 4 || !distinct[Other] {
		t.Errorf("50 repositories gave the values %v, want the 3 kept and %q", distinct, Other)
	}
	if (*Bounded)(nil).Value("x") != Other || NewBounded(0).Value("x") != Other {
		t.Error("a Bounded keeping none must answer Other")
	}
}

// LabelValue gives valid label values, keeps short names readable and distinct, and
// keeps two long names that share their first 54 characters apart.
func TestLabelValue(t *testing.T) {
	long := "acme/" + strings.Repeat("a", 80)
	for _, c := range []struct {
		in, want string
		repo     bool
	}{
		{"acme/web", "acme.web", true},
		{"acme/.github", "acme..github", true},
		{"acme/repo-", "acme.repo", true},
		{"CI / Build & Test", "CI-Build-Test", false},
		{".github/workflows/ci.yml", "github-workflows-ci.yml", false},
		{"déploiement", "d-ploiement", false},
		{"_x_", "x", false},
		{"", "", false},
		{long, "acme." + strings.Repeat("a", 49) + "-" + RepositoryLabelValue(long)[55:], true},
	} {
		got := LabelValue(c.in)
		if c.repo {
			got = RepositoryLabelValue(c.in)
		}
		if got != c.want {
			t.Errorf("LabelValue(%q) = %q, want %q", c.in, got, c.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q is not a label value: %v", c.in, got, errs)
		}
	}
	if a, b := RepositoryLabelValue(long+"x"), RepositoryLabelValue(long+"y"); a == b || len(a) > 63 {
		t.Errorf("two long names share the label value %q (%d characters)", a, len(a))
	}
}

// A record reads back as written; one without a version, or of a newer version, is
// refused with a message that says what to do.
func TestParse(t *testing.T) {
	r := rec("acme/web", "CI", 12.5, 1.25)
	r.Labels, r.Rerun, r.RunAttempt = []string{"self-hosted", "linux"}, true, 2
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r, got); d != "" {
		t.Errorf("Parse(Marshal(r)) (-want +got):\n%s", d)
	}
	for in, want := range map[string]string{
		`{"pool":"linux"}`:             "no version",
		`{"version":2,"pool":"linux"}`: "upgrade gantry",
		`not json`:                     "reading a usage record",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want an error saying %q", in, err, want)
		}
	}
}

// Lifetime: seconds and the requests over them, never negative.
func TestLifetime(t *testing.T) {
	s, c, m := Lifetime(t0, t0.Add(90*time.Second), 0.5, 3<<30)
	if s != 90 || c != 45 || m != 270 {
		t.Errorf("Lifetime(90 s, 0.5 core, 3 GiB) = %v s, %v core-s, %v GiB-s; want 90, 45, 270", s, c, m)
	}
	if s, _, _ := Lifetime(t0, t0.Add(-time.Second), 1, 1); s != 0 {
		t.Errorf("an end before the start gave %v seconds, want 0", s)
	}
}
