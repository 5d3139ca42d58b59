package demand

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A workflow_job payload gives the job's name and run attempt, and once the job runs
// its start, and once it ends its completion and conclusion: what its usage record
// says. A queued job's started_at (GitHub sets it to created_at) is no start.
func TestParseWorkflowJobForUsage(t *testing.T) {
	const body = `{"action":%q,"workflow_job":{"id":7,"run_id":70,"run_attempt":2,"name":"build (linux)","workflow_name":"CI",
		"labels":["self-hosted"],"status":"x","created_at":"2026-05-04T09:00:00Z","started_at":"2026-05-04T09:00:05Z",
		"completed_at":%s,"conclusion":%s,"runner_name":"linux-abcde"},
		"repository":{"name":"api","full_name":"acme/api","html_url":"https://github.com/acme/api","owner":{"login":"acme"}}}`
	created, started, done := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC), time.Date(2026, 5, 4, 9, 0, 5, 0, time.UTC), time.Date(2026, 5, 4, 9, 1, 0, 0, time.UTC)
	for _, tt := range []struct {
		action, completedAt, conclusion string
		want                            func(*Job)
	}{
		{"queued", "null", "null", func(*Job) {}},
		{"in_progress", "null", "null", func(j *Job) { j.StartedAt = started }},
		{"completed", `"2026-05-04T09:01:00Z"`, `"failure"`, func(j *Job) { j.StartedAt, j.CompletedAt, j.Conclusion = started, done, "failure" }},
	} {
		ev, err := ParseWorkflowJob([]byte(fmt.Sprintf(body, tt.action, tt.completedAt, tt.conclusion)))
		if err != nil {
			t.Fatalf("%s: %v", tt.action, err)
		}
		want := Job{ID: 7, RunID: 70, Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted"}, Workflow: "CI",
			RunnerName: "linux-abcde", CreatedAt: created, Name: "build (linux)", RunAttempt: 2}
		tt.want(&want)
		if d := cmp.Diff(want, ev.Job); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.action, d)
		}
	}
}

// RanJob is the job a runner took with all that was said of it since — a completed
// event's end and conclusion merged into the in_progress event's job — and when
// Gantry heard each word; nothing for a runner it never heard of, or forgot.
func TestRanJob(t *testing.T) {
	tr, clk, _ := newTestTracker(t)
	t0 := clk.Now()
	job := Job{ID: 5, RunID: 50, Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"linux"}, Workflow: "CI", Name: "test", CreatedAt: t0.Add(-time.Second)}
	tr.Observe(JobEvent{Action: ActionQueued, Job: job})
	clk.Step(2 * time.Second)
	started := job
	started.RunnerName, started.StartedAt, started.Name = "linux-abcde", t0.Add(time.Second), ""
	tr.Observe(JobEvent{Action: ActionInProgress, Job: started})
	clk.Step(10 * time.Second)
	done := started
	done.CompletedAt, done.Conclusion = t0.Add(11*time.Second), "success"
	tr.Observe(JobEvent{Action: ActionCompleted, Job: done})

	got, ok := tr.RanJob("linux-abcde")
	if !ok {
		t.Fatal("no job for the runner that took one")
	}
	wantJob := done
	wantJob.Name = "test" // from the queued event: the later ones did not say
	want := RanJob{Job: wantJob, QueuedSeenAt: t0, StartedSeenAt: t0.Add(2 * time.Second), CompletedSeenAt: t0.Add(12 * time.Second)}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("RanJob (-want +got):\n%s", d)
	}
	if _, ok := tr.RanJob("linux-other"); ok {
		t.Error("a job for a runner the Tracker never heard of")
	}
	tr.ForgetRunner("linux-abcde")
	if _, ok := tr.RanJob("linux-abcde"); ok {
		t.Error("a job for a runner the Tracker forgot")
	}
}
