// Go API of workflow runs and their re-runs: what a test or a report reads of a run's
// attempts, and re-runs asked for without HTTP.

package github

import (
	"net/http"
	"sort"
	"time"
)

// Workflows returns the simulator's workflow runs and their re-runs.
func (s *Sim) Workflows() *Workflows { return s.wf }

// RunView is a workflow run and its attempts.
type RunView struct {
	ID         int64     `json:"id"`
	Repo       string    `json:"repo"`
	Status     string    `json:"status"`
	Conclusion string    `json:"conclusion,omitempty"`
	Attempts   []Attempt `json:"attempts"`
}

// Attempt is one attempt of a run.
type Attempt struct {
	Number int `json:"number"`
	// How made it: "" for the run's first attempt, else HowRerunJob,
	// HowRerunFailedJobs or HowRerunRun.
	How       string     `json:"how,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	DoneAt    *time.Time `json:"completed_at,omitempty"`
	// Requested are the jobs the re-run named (before their dependents); Jobs the
	// executions the attempt made, in order.
	Requested []int64 `json:"requested,omitempty"`
	Jobs      []int64 `json:"jobs"`
}

// Runs returns every run, oldest first.
func (w *Workflows) Runs() []RunView {
	w.s.lock()
	defer w.s.unlock()
	out := make([]RunView, 0, len(w.s.st.runs))
	for _, wr := range w.s.st.runs {
		out = append(out, runView(wr))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Run returns one run.
func (w *Workflows) Run(id int64) (RunView, bool) {
	w.s.lock()
	defer w.s.unlock()
	wr := w.s.st.runs[id]
	if wr == nil {
		return RunView{}, false
	}
	return runView(wr), true
}

func runView(wr *workflowRun) RunView {
	v := RunView{ID: wr.id, Repo: wr.repo.fullName()}
	v.Status, v.Conclusion = wr.status()
	ids := func(jobs []*job) []int64 {
		out := make([]int64, 0, len(jobs))
		for _, j := range jobs {
			out = append(out, j.id)
		}
		return out
	}
	for _, a := range wr.graph.attempts {
		av := Attempt{Number: a.number, How: a.how, StartedAt: a.started, Jobs: ids(a.jobs)}
		if len(a.requested) > 0 {
			av.Requested = ids(a.requested)
		}
		if !a.done.IsZero() {
			done := a.done
			av.DoneAt = &done
		}
		v.Attempts = append(v.Attempts, av)
	}
	return v
}

// RerunJob re-runs a job and the jobs that need it, by GitHub's rules, as POST
// …/actions/jobs/{job_id}/rerun does.
func (w *Workflows) RerunJob(jobID int64) error {
	w.s.lock()
	defer w.s.unlock()
	j := w.s.st.jobs[jobID]
	if j == nil {
		return errorf(http.StatusNotFound, "job %d not found", jobID)
	}
	return fromAPI(w.hRerunJobLocked(j))
}

// RerunFailedJobs re-runs a run's failed jobs and those that need them, as POST
// …/actions/runs/{run_id}/rerun-failed-jobs does.
func (w *Workflows) RerunFailedJobs(runID int64) error {
	w.s.lock()
	defer w.s.unlock()
	wr := w.s.st.runs[runID]
	if wr == nil {
		return errorf(http.StatusNotFound, "run %d not found", runID)
	}
	return fromAPI(w.rerunFailedLocked(wr))
}
