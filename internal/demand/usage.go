package demand

import "time"

// RanJob is what the Tracker knows of the job a runner took, for the runner's usage
// record: the job with all GitHub said of it since (its name, attempt, start, end and
// conclusion), and when Gantry heard it queued, taken by the runner and completed
// (zero: not heard; a job first heard of when it started has no QueuedSeenAt).
type RanJob struct {
	Job                                          Job
	QueuedSeenAt, StartedSeenAt, CompletedSeenAt time.Time
}

// RanJob returns the job the runner took, as GitHub's in_progress event (or a scale
// set's JobStarted message) said, with what was heard of it since; false when the
// Tracker holds none for the runner (it never heard, or forgot: ForgetRunner).
func (t *Tracker) RanJob(runnerName string) (RanJob, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.running[runnerName]
	if !ok {
		return RanJob{}, false
	}
	out := RanJob{Job: j}
	if tj := t.jobs[j.ID]; tj != nil {
		out.Job.learn(tj.job)
		out.QueuedSeenAt, out.StartedSeenAt, out.CompletedSeenAt = tj.queuedAt, tj.startedAt, tj.doneAt
	}
	return out, true
}

// learn takes from a later word on the same job what it says and j does not: GitHub's
// payloads of one job agree, and later ones say more (when it started, how it ended).
func (j *Job) learn(from Job) {
	if j.Name == "" {
		j.Name = from.Name
	}
	if j.Workflow == "" {
		j.Workflow = from.Workflow
	}
	if from.RunAttempt > j.RunAttempt {
		j.RunAttempt = from.RunAttempt
	}
	if j.StartedAt.IsZero() {
		j.StartedAt = from.StartedAt
	}
	if j.CompletedAt.IsZero() {
		j.CompletedAt = from.CompletedAt
	}
	if j.Conclusion == "" {
		j.Conclusion = from.Conclusion
	}
	if j.RunID == 0 {
		j.RunID = from.RunID
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = from.CreatedAt
	}
}

// heard records when Gantry first heard the job started or completed.
func (tj *trackedJob) heard(a Action, now time.Time) {
	switch {
	case a == ActionInProgress && tj.startedAt.IsZero():
		tj.startedAt = now
	case a == ActionCompleted && tj.doneAt.IsZero():
		tj.doneAt = now
	}
}
