package rerun

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gantry-dev/gantry/internal/github"
)

func job(id, attempt int64, name, conclusion, runner string) github.WorkflowJob {
	return github.WorkflowJob{ID: id, RunID: 7, RunAttempt: attempt, Name: name, Status: "completed", Conclusion: conclusion, RunnerName: runner}
}

// The rule of a killed job's re-run, case by case.
func TestDecide(t *testing.T) {
	completed := github.WorkflowRun{ID: 7, RunAttempt: 1, Status: "completed", Conclusion: "failure"}
	a := killed{runner: "linux-aaaaa", githubName: "linux-aaaaa", jobID: 11}
	b := killed{runner: "linux-bbbbb", githubName: "linux-bbbbb"} // a scale set's: no REST id
	tests := []struct {
		name   string
		self   killed
		others []killed
		run    github.WorkflowRun
		jobs   []github.WorkflowJob
		want   decision
	}{{
		name: "the run is still running: wait",
		self: a,
		run:  github.WorkflowRun{ID: 7, RunAttempt: 1, Status: "in_progress"},
		want: decision{verb: wait},
	}, {
		name: "the killed job alone failed: re-run it",
		self: a, run: completed,
		jobs: []github.WorkflowJob{job(11, 1, "build", "failure", "linux-aaaaa"), job(12, 1, "lint", "success", "hosted-1")},
		want: decision{verb: rerunJob, job: job(11, 1, "build", "failure", "linux-aaaaa")},
	}, {
		name: "found by its runner's name when the id is not known",
		self: b, run: completed,
		jobs: []github.WorkflowJob{job(21, 1, "test (1)", "failure", "linux-bbbbb"), job(22, 1, "test (2)", "success", "linux-ccccc")},
		want: decision{verb: rerunJob, job: job(21, 1, "test (1)", "failure", "linux-bbbbb")},
	}, {
		name: "already running again in a newer attempt: done, no call",
		self: a, run: github.WorkflowRun{ID: 7, RunAttempt: 2, Status: "completed", Conclusion: "success"},
		jobs: []github.WorkflowJob{job(11, 1, "build", "failure", "linux-aaaaa"), job(31, 2, "build", "success", "linux-zzzzz")},
		want: decision{verb: done, job: job(11, 1, "build", "failure", "linux-aaaaa"), attempt: 2, result: ResultAlreadyRerun},
	}, {
		name: "the job finished after all: nothing to re-run",
		self: a, run: completed,
		jobs: []github.WorkflowJob{job(11, 1, "build", "success", "linux-aaaaa")},
		want: decision{verb: skip, job: job(11, 1, "build", "success", "linux-aaaaa"), result: ResultNotFailed},
	}, {
		name: "the job was canceled: never re-run",
		self: a, run: completed,
		jobs: []github.WorkflowJob{job(11, 1, "build", conclusionCancelled, "linux-aaaaa")},
		want: decision{verb: skip, job: job(11, 1, "build", conclusionCancelled, "linux-aaaaa"), result: ResultNotFailed},
	}, {
		name: "the run's 51st attempt: GitHub's limit",
		self: a, run: github.WorkflowRun{ID: 7, RunAttempt: 51, Status: "completed"},
		jobs: []github.WorkflowJob{job(11, 51, "build", "failure", "linux-aaaaa")},
		want: decision{verb: skip, job: job(11, 51, "build", "failure", "linux-aaaaa"), result: ResultRefused},
	}, {
		name: "the job is not among the run's: abandoned",
		self: a, run: completed,
		jobs: []github.WorkflowJob{job(12, 1, "lint", "failure", "hosted-1")},
		want: decision{verb: skip, result: ResultAbandoned},
	}, {
		name:   "every failed job was killed: the run's failed jobs, at once",
		self:   a,
		others: []killed{b},
		run:    completed,
		jobs: []github.WorkflowJob{job(11, 1, "build", "failure", "linux-aaaaa"), job(21, 1, "test (1)", "failure", "linux-bbbbb"),
			job(22, 1, "test (2)", "success", "linux-ccccc"), job(23, 1, "deploy", "skipped", "")},
		want: decision{verb: rerunFailed, job: job(11, 1, "build", "failure", "linux-aaaaa"), covered: []string{"linux-bbbbb"}},
	}, {
		name:   "another job failed on its own: this one alone (rerun-failed-jobs would re-run that one)",
		self:   a,
		others: []killed{b},
		run:    completed,
		jobs: []github.WorkflowJob{job(11, 1, "build", "failure", "linux-aaaaa"), job(21, 1, "test (1)", "failure", "linux-bbbbb"),
			job(22, 1, "test (2)", "failure", "linux-ccccc")},
		want: decision{verb: rerunJob, job: job(11, 1, "build", "failure", "linux-aaaaa")},
	}, {
		name:   "a job was canceled (fail-fast): this one alone, never the canceled one",
		self:   a,
		others: []killed{b},
		run:    completed,
		jobs: []github.WorkflowJob{job(11, 1, "build", "failure", "linux-aaaaa"), job(21, 1, "test (1)", "failure", "linux-bbbbb"),
			job(22, 1, "test (2)", conclusionCancelled, "linux-ccccc")},
		want: decision{verb: rerunJob, job: job(11, 1, "build", "failure", "linux-aaaaa")},
	}, {
		name: "a second killed job, once the first one's attempt completed: re-run in the next",
		self: b, run: github.WorkflowRun{ID: 7, RunAttempt: 2, Status: "completed", Conclusion: "failure"},
		jobs: []github.WorkflowJob{job(11, 1, "build", "failure", "linux-aaaaa"), job(31, 2, "build", "success", "linux-yyyyy"),
			job(21, 1, "test (1)", "failure", "linux-bbbbb"), job(22, 1, "test (2)", "failure", "linux-ccccc")},
		want: decision{verb: rerunJob, job: job(21, 1, "test (1)", "failure", "linux-bbbbb")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.self, tt.others, tt.run, tt.jobs)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(decision{}), cmpopts.IgnoreFields(decision{}, "message")); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
			if (got.verb == done || got.verb == skip) && got.message == "" {
				t.Error("a done or skip decision says nothing")
			}
		})
	}
}

func TestPollInterval(t *testing.T) {
	for _, tt := range []struct{ since, want string }{{"0s", "10s"}, {"1m", "20s"}, {"3m", "1m"}, {"8m", "2m"}, {"2h", "2m"}} {
		if got := pollInterval(mustDuration(t, tt.since)); got != mustDuration(t, tt.want) {
			t.Errorf("pollInterval(%s) = %s, want %s", tt.since, got, tt.want)
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
