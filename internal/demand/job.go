// Package demand turns GitHub's signals about workflow jobs into per-pool demand.
//
// Sources (the workflow_job webhook, resync from GitHub's API) produce JobEvents; the
// Tracker routes each job to exactly one RunnerPool (see Router for the rule) and keeps,
// per pool, the jobs that are queued and not yet picked up. It wakes the pool's
// reconciler whenever that changes. The Tracker is in memory: after a restart it is
// rebuilt by the resync source and from the Runners in the cluster.
package demand

import (
	"strings"
	"time"
)

// Action is what happened to a workflow job.
type Action string

// The workflow_job actions GitHub sends.
const (
	ActionQueued     Action = "queued"
	ActionWaiting    Action = "waiting"
	ActionInProgress Action = "in_progress"
	ActionCompleted  Action = "completed"
)

// Job is a workflow job as demand sees it.
type Job struct {
	// ID is the workflow job id; unique across GitHub.
	ID int64
	// RunID is the workflow run id.
	RunID int64
	// Host is the GitHub host the job lives on: github.com or a GHES host.
	Host string
	// Enterprise is the enterprise slug, when the payload names one.
	Enterprise string
	// Owner is the repository's owner (organization or user), Repo its name.
	Owner, Repo string
	// Labels is the job's runs-on list.
	Labels []string
	// Workflow is the workflow's name, for status and reports.
	Workflow string
	// RunnerName and RunnerID are the runner running the job (in_progress, completed).
	RunnerName string
	RunnerID   int64
	// CreatedAt is when GitHub queued the job.
	CreatedAt time.Time

	// What GitHub says of the job beyond its demand, for its usage record (usage.go).
	// Name is the job's name ("build (linux, 22)" in a matrix); RunAttempt the run's
	// attempt, 1 and more on each re-run (0: not said); StartedAt and CompletedAt when
	// GitHub says it started on its runner and completed (zero until it says so); and
	// Conclusion how it ended (success, failure, …), once completed.
	Name                   string
	RunAttempt             int
	StartedAt, CompletedAt time.Time
	Conclusion             string
}

// Repository returns OWNER/REPO.
func (j Job) Repository() string { return j.Owner + "/" + j.Repo }

// JobEvent is one observation of a job: from a webhook delivery or a resync.
type JobEvent struct {
	Action Action
	Job    Job
	// DeliveryID is the webhook delivery's GUID; empty for resync observations.
	DeliveryID string
	// ObservedAt is when Gantry received it.
	ObservedAt time.Time
}

// normalizeLabel compares labels as GitHub does: case-insensitively.
func normalizeLabel(l string) string { return strings.ToLower(strings.TrimSpace(l)) }
