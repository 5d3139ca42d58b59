package rerun

import (
	"fmt"
	"slices"

	"github.com/gantry-dev/gantry/internal/github"
)

// killed is a job killed under its runner whose re-run is Waiting: the Runner, the
// name its runner has on GitHub (the job's runner_name) and the job's id when the
// demand source gave it (a webhook's workflow_job.id; a scale set's messages carry an
// id of the Actions service's own, not the REST one, so theirs are found by runner
// name).
type killed struct {
	runner     string
	githubName string
	jobID      int64
}

// verb is what to do about a killed job.
type verb int

const (
	// wait: the run has not completed, or the re-run must wait for another.
	wait verb = iota
	// done: the job already runs again in a newer attempt.
	done
	// skip: there is nothing to re-run, or GitHub will not.
	skip
	// rerunJob: POST …/jobs/{job}/rerun.
	rerunJob
	// rerunFailed: POST …/runs/{run}/rerun-failed-jobs, which re-runs this job and the
	// other killed ones (covered) at once.
	rerunFailed
)

// decision is decide's answer.
type decision struct {
	verb verb
	// job is the killed execution (rerunJob; and what done and skip are about).
	job github.WorkflowJob
	// attempt is the attempt the job runs again in (done).
	attempt int64
	// result is gantry_rerun_jobs_total's result (done, skip); message says why.
	result, message string
	// covered are the other killed jobs a rerunFailed re-runs too, by Runner name.
	covered []string
}

// conclusionCancelled is GitHub's conclusion of a canceled job.
const conclusionCancelled = "cancelled" //nolint:misspell // GitHub's spelling

// maxAttempt is the last attempt GitHub makes of a run: "A workflow run can be re-run a
// maximum of 50 times" (docs.github.com, Re-running workflows and jobs).
const maxAttempt = 51

// decide is the rule of a killed job's re-run, from the run's latest attempt and every
// execution of its jobs (filter=all), and the other killed jobs of the run waiting too
// (others). Pure. In order:
//  1. the run has not completed: wait — GitHub re-runs a job only once its whole run
//     has (403 "already running", cli/cli#9221);
//  2. the killed execution is not among the run's jobs: skip (Abandoned);
//  3. a newer attempt runs a job of the same name: done (AlreadyRerun) — re-run by a
//     person, or by this very rule before a restart lost the record of it: what makes
//     the re-run exactly-once without a record written before the call;
//  4. GitHub concluded the job otherwise than failure (success, canceled): skip
//     (NotFailed) — never re-run a job that did not fail, nor one canceled;
//  5. the run is at its 51st attempt: skip (Refused);
//  6. every job of the latest attempt that failed, was canceled or timed out is a
//     killed job waiting here, and there are several: rerunFailed, one call for all of
//     them — rerun-failed-jobs would re-run a job that failed on its own too, so it is
//     used only when none did;
//  7. otherwise: rerunJob, this job alone (and, as GitHub does, the jobs that need it).
//     Its attempt makes the run in progress again, so another killed job of the run
//     waits for that attempt to complete and is re-run in the next.
func decide(self killed, others []killed, run github.WorkflowRun, jobs []github.WorkflowJob) decision {
	if !run.Completed() {
		return decision{verb: wait}
	}
	exec, ok := execution(self, jobs)
	if !ok {
		return decision{verb: skip, result: ResultAbandoned, message: fmt.Sprintf(
			"the job the runner ran is not among the jobs of workflow run %d", run.ID)}
	}
	if later, ok := laterExecution(exec, jobs); ok {
		return decision{verb: done, job: exec, attempt: later.RunAttempt, result: ResultAlreadyRerun, message: fmt.Sprintf(
			"job %q already runs again in attempt %d of workflow run %d (job %d)", exec.Name, later.RunAttempt, run.ID, later.ID)}
	}
	if exec.Conclusion != "failure" {
		return decision{verb: skip, job: exec, result: ResultNotFailed, message: fmt.Sprintf(
			"GitHub concluded job %q (%d) %s, not failure: nothing to re-run", exec.Name, exec.ID, conclusion(exec))}
	}
	if run.RunAttempt >= maxAttempt {
		return decision{verb: skip, job: exec, result: ResultRefused, message: fmt.Sprintf(
			"workflow run %d was re-run 50 times, GitHub's limit: job %q is not re-run", run.ID, exec.Name)}
	}
	if covered, ok := onlyKilledFailed(self, others, jobs); ok && len(covered) > 0 {
		return decision{verb: rerunFailed, job: exec, covered: covered}
	}
	return decision{verb: rerunJob, job: exec}
}

func conclusion(j github.WorkflowJob) string {
	if j.Conclusion == "" {
		return "without a conclusion"
	}
	return j.Conclusion
}

// execution finds the killed job among the run's executions: by its id, else by the
// runner that ran it (an ephemeral runner runs one job).
func execution(k killed, jobs []github.WorkflowJob) (github.WorkflowJob, bool) {
	if k.jobID > 0 {
		for _, j := range jobs {
			if j.ID == k.jobID {
				return j, true
			}
		}
	}
	for _, j := range jobs {
		if k.githubName != "" && j.RunnerName == k.githubName {
			return j, true
		}
	}
	return github.WorkflowJob{}, false
}

// laterExecution is the newest execution of the same job in a later attempt, if any.
func laterExecution(exec github.WorkflowJob, jobs []github.WorkflowJob) (github.WorkflowJob, bool) {
	var later github.WorkflowJob
	found := false
	for _, j := range jobs {
		if j.Name == exec.Name && j.RunAttempt > exec.RunAttempt && (!found || j.RunAttempt > later.RunAttempt) {
			later, found = j, true
		}
	}
	return later, found
}

// latest is the newest execution of each job, by name.
func latest(jobs []github.WorkflowJob) map[string]github.WorkflowJob {
	out := map[string]github.WorkflowJob{}
	for _, j := range jobs {
		if cur, ok := out[j.Name]; !ok || j.RunAttempt > cur.RunAttempt {
			out[j.Name] = j
		}
	}
	return out
}

// onlyKilledFailed reports whether every latest execution rerun-failed-jobs would
// re-run (conclusion failure, canceled or timed_out) is a killed job waiting here and
// concluded failure, and returns the others' Runners.
func onlyKilledFailed(self killed, others []killed, jobs []github.WorkflowJob) ([]string, bool) {
	killedBy := map[int64]string{} // execution id → Runner
	for _, k := range append([]killed{self}, others...) {
		if e, ok := execution(k, jobs); ok {
			killedBy[e.ID] = k.runner
		}
	}
	var covered []string
	for _, j := range latest(jobs) {
		switch j.Conclusion {
		case "failure", conclusionCancelled, "timed_out":
		default:
			continue
		}
		rn, ok := killedBy[j.ID]
		if !ok || j.Conclusion != "failure" {
			return nil, false
		}
		if rn != self.runner {
			covered = append(covered, rn)
		}
	}
	slices.Sort(covered)
	return covered, true
}
