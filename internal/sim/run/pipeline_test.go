package run

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

func TestPipelineRun(t *testing.T) {
	p := Pipeline{Runs: 3, Jobs: []PipelineJob{
		{Key: "lint", Duration: time.Minute},
		{Key: "unit", Matrix: 2, Duration: 2 * time.Minute},
		{Key: "build", Duration: time.Minute, Needs: []string{"lint", "unit"}},
	}, FailEvery: 2, FailJob: "unit (2)"}
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	type line struct {
		Key, Conclusion string
		Needs           []string
		Duration        time.Duration
	}
	lines := func(spec simgithub.RunSpec) []line {
		var out []line
		for _, j := range spec.Jobs {
			out = append(out, line{j.Key, j.Conclusion, j.Needs, time.Duration(j.Duration)})
		}
		return out
	}
	want := []line{
		{"lint", "", nil, time.Minute},
		{"unit (1)", "", nil, 2 * time.Minute},
		{"unit (2)", "", nil, 2 * time.Minute},
		{"build", "", []string{"lint", "unit (1)", "unit (2)"}, time.Minute},
	}
	if diff := cmp.Diff(want, lines(p.run(0, []string{"self-hosted"}, rng))); diff != "" {
		t.Errorf("run 1 (-want +got):\n%s", diff)
	}
	want[2].Conclusion = simgithub.ConclusionFailure
	if diff := cmp.Diff(want, lines(p.run(1, []string{"self-hosted"}, rng))); diff != "" {
		t.Errorf("run 2, which fails unit (2) on purpose (-want +got):\n%s", diff)
	}
	if got := p.jobsPerRun(); got != 4 {
		t.Errorf("jobs per run = %d, want 4", got)
	}
}

func TestPipelineValidate(t *testing.T) {
	ok := PipelineJob{Key: "lint", Duration: time.Minute}
	tests := []struct {
		name string
		p    Pipeline
		want string // "" valid
	}{
		{"valid", Pipeline{Runs: 1, Jobs: []PipelineJob{ok}}, ""},
		{"no runs", Pipeline{Jobs: []PipelineJob{ok}}, "runs above 0"},
		{"a need later in the list", Pipeline{Runs: 1, Jobs: []PipelineJob{{Key: "a", Duration: 1, Needs: []string{"b"}}, {Key: "b", Duration: 1}}}, "not an earlier job"},
		{"no duration", Pipeline{Runs: 1, Jobs: []PipelineJob{{Key: "a"}}}, "positive duration"},
		{"fail job unknown", Pipeline{Runs: 1, Jobs: []PipelineJob{ok}, FailEvery: 2, FailJob: "nope"}, "fail_job"},
		{"jitter 1", Pipeline{Runs: 1, Jobs: []PipelineJob{ok}, Jitter: 1}, "jitter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestQueuePipelineAndWaitRuns queues a pipeline on the simulator: each run's first jobs
// at once, the others once their needs complete; waitRuns returns once every run has
// completed and stayed so.
func TestQueuePipelineAndWaitRuns(t *testing.T) {
	sim := simgithub.New(simgithub.Options{RateLimits: simgithub.RateLimits{Disabled: true}, FailJobsWithoutRunner: true})
	t.Cleanup(sim.Close)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(sim.CreateOrg(simgithub.OrgSpec{Login: org}))
	must(sim.CreateRepo(simgithub.RepoSpec{Owner: org, Name: "app"}))
	p := Pipeline{Runs: 2, Over: 50 * time.Millisecond, Jobs: []PipelineJob{
		{Key: "lint", Duration: time.Second},
		{Key: "build", Duration: time.Second, Needs: []string{"lint"}},
	}}
	var queued []queuedJob
	// No runner could take them: each job fails at once, so each build is skipped.
	if err := queuePipeline(context.Background(), sim, p, []string{"nowhere"}, 1, func(q queuedJob) { queued = append(queued, q) }); err != nil {
		t.Fatal(err)
	}
	if len(queued) != 2 {
		t.Fatalf("queued %d jobs at once, want each run's lint", len(queued))
	}
	jobs, finished, _ := waitRuns(context.Background(), sim, p.Runs, 100*time.Millisecond, time.Now().Add(10*time.Second))
	if !finished {
		t.Fatal("the runs never settled")
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.Key+" "+j.Conclusion)
	}
	want := []string{"lint failure", "build skipped", "lint failure", "build skipped"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}
