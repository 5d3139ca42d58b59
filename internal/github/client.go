// Package github is the client Gantry's controllers use to talk to GitHub (or GitHub
// Enterprise Server, or Gantry's simulator): JIT runner configurations, registration
// tokens, runner lookups and deletion, runner groups, queued jobs for resync and the
// App's webhook delivery log.
//
// Failures callers act on are typed (IsNotFound, IsAlreadyExists, IsBusy,
// IsRateLimited with RetryAfter, IsUnauthorized). A rate-limited credential fails fast
// until GitHub's reset, without sending requests. Every request is counted in
// gantry_github_requests_total. No token, private key or JIT configuration is ever
// logged or put into an error.
package github

import (
	"context"
	"time"
)

// Client talks to GitHub with one set of credentials. Implementations are safe for
// concurrent use. Every method may also return RateLimited (wait RetryAfter), and
// Unauthorized (the credentials are rejected, lack permission, or — App credentials on an
// enterprise scope — cannot serve the scope); any other error is transient.
type Client interface {
	// GenerateJITConfig registers a runner and returns its just-in-time configuration.
	// Not idempotent: a second call with the same name fails with AlreadyExists (GitHub
	// answers 422), after which the caller should find the runner by name (ListRunners)
	// and reuse or delete it. A bad runner group or label set is an ordinary error.
	GenerateJITConfig(ctx context.Context, scope Scope, req JITConfigRequest) (JITConfig, error)

	// CreateRegistrationToken returns a registration token for the scope. The token is
	// cached per scope until five minutes before it expires, so repeated calls within
	// the hour are free and return the same token. Idempotent.
	CreateRegistrationToken(ctx context.Context, scope Scope) (RegistrationToken, error)

	// GetRunner returns the registered runner with that id, or NotFound. Read-only.
	GetRunner(ctx context.Context, scope Scope, id int64) (Runner, error)

	// ListRunners returns the scope's runners, every page; name, if not empty, keeps
	// only the runner with exactly that name. Read-only.
	ListRunners(ctx context.Context, scope Scope, name string) ([]Runner, error)

	// ListAllRunners returns every runner of the scope, and how many pages (requests)
	// that took. Each page is a conditional request: the client keeps the last answer
	// per scope and sends its ETag as If-None-Match, so a page GitHub has not changed
	// comes back 304 Not Modified — not counted against the rate limit — and is served
	// from that copy. Read-only.
	ListAllRunners(ctx context.Context, scope Scope) ([]Runner, int, error)

	// DeleteRunner unregisters the runner. Idempotent in effect: a runner that is
	// already gone returns NotFound, which callers treat as done. A runner that is
	// running a job returns Busy and is left alone.
	DeleteRunner(ctx context.Context, scope Scope, id int64) error

	// RunnerGroupID resolves a runner group name (case-insensitively) to its id. A
	// repository scope has only the default group, id 1, and makes no call. An unknown
	// group is NotFound. Results are cached for ten minutes. Read-only.
	RunnerGroupID(ctx context.Context, scope Scope, group string) (int64, error)

	// ListQueuedJobs returns the queued jobs of a repository scope: the workflow runs
	// with status queued or in_progress, then their jobs still queued. Every request is
	// conditional: the client keeps the last answer of each page per repository and
	// run, so a page GitHub has not changed comes back 304 Not Modified, not counted
	// against the rate limit. skip, if not nil, is asked about each run listed: the jobs
	// of a run it returns true for are not listed, and the run is named in
	// QueuedJobs.Skipped. Callers with an organization scope pick repositories
	// (Scope.Repository) themselves: listing a whole organization costs calls per
	// repository. Read-only.
	ListQueuedJobs(ctx context.Context, repo Scope, skip func(runID int64) bool) (QueuedJobs, error)

	// ListHookDeliveries returns one page of the GitHub App's webhook delivery log
	// (GET /app/hook/deliveries, newest first) on the scope's host, starting at cursor
	// ("" for the first page); NextCursor is "" on the last page. Needs App
	// credentials; a token is Unauthorized. Read-only.
	ListHookDeliveries(ctx context.Context, scope Scope, cursor string) (HookDeliveryPage, error)

	// RedeliverHookDelivery asks GitHub to send a delivery again. Not idempotent: each
	// call is a new attempt. Unknown ids are NotFound. Needs App credentials.
	RedeliverHookDelivery(ctx context.Context, scope Scope, id int64) error

	// Workflow runs and re-runs (runs.go), all on a repository scope.
	Runs
}

// Runs reads workflow runs and re-runs their jobs: what re-running a job killed by the
// infrastructure needs. Every method takes a repository scope. The reads need the
// Actions read permission, the re-runs Actions write (`actions: write` for a GitHub App,
// the repo scope for a classic token): without it they are Unauthorized.
type Runs interface {
	// GetWorkflowRun returns the run's latest attempt. Conditional: the client keeps the
	// last answer of each run not completed and sends its ETag, so polling a run GitHub
	// has not changed is answered 304 Not Modified, not counted against the rate limit.
	// A run that does not exist (or is another repository's) is NotFound. Read-only.
	GetWorkflowRun(ctx context.Context, repo Scope, runID int64) (WorkflowRun, error)

	// ListWorkflowRunJobs returns every execution of every job of the run, of every
	// attempt (filter=all), every page. Read-only.
	ListWorkflowRunJobs(ctx context.Context, repo Scope, runID int64) ([]WorkflowJob, error)

	// RerunJob re-runs one job, and the jobs that need it, in a new attempt of its run
	// (POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun). Not idempotent: a second
	// call once that attempt completed re-runs the job again, so callers read the run's
	// jobs first. RunInProgress (403) while the run has not completed; NotRerunnable
	// (403) when GitHub will not re-run it (50 re-runs, a job of an earlier attempt).
	RerunJob(ctx context.Context, repo Scope, jobID int64) error

	// RerunFailedJobs re-runs every job of the run's latest attempt that failed, was
	// canceled or timed out, and the jobs that need them (POST …/runs/{run_id}/
	// rerun-failed-jobs). Not idempotent, and errors as RerunJob's.
	RerunFailedJobs(ctx context.Context, repo Scope, runID int64) error
}

// WorkflowRun is a workflow run's latest attempt.
type WorkflowRun struct {
	ID int64
	// RunAttempt is the attempt, from 1; a re-run makes the next.
	RunAttempt int64
	// Status is queued, in_progress, completed (or waiting, requested, pending).
	Status string
	// Conclusion is set once the run completed: success, failure, canceled, ….
	Conclusion string
}

// Completed reports whether the run's latest attempt has completed.
func (r WorkflowRun) Completed() bool { return r.Status == "completed" }

// WorkflowJob is one execution of a job of a workflow run: each attempt that runs the
// job makes a new execution, with an ID of its own.
type WorkflowJob struct {
	ID         int64
	RunID      int64
	RunAttempt int64
	Name       string
	// Status is queued, in_progress or completed; Conclusion, once completed, success,
	// failure, canceled, skipped, timed_out, ….
	Status     string
	Conclusion string
	// RunnerName is the runner the execution ran on ("" if none took it).
	RunnerName  string
	CompletedAt time.Time
}

// JITConfigRequest describes a runner to register just in time.
type JITConfigRequest struct {
	// Name is the runner's name, unique in the scope.
	Name string
	// RunnerGroupID is the group the runner joins (1 is the default group).
	RunnerGroupID int64
	// Labels are the runner's custom labels, 1 to 100.
	Labels []string
	// WorkFolder is the runner's work directory; "" uses the runner's default, _work.
	WorkFolder string
}

// JITConfig is a registered runner and the configuration it starts with. String and
// GoString hide EncodedJITConfig: it is a credential.
type JITConfig struct {
	Runner           Runner
	EncodedJITConfig string
}

// String describes the configuration without the encoded secret.
func (c JITConfig) String() string {
	return "JITConfig{runner " + c.Runner.Name + ", encoded config redacted}"
}

// GoString keeps %#v from printing the encoded secret.
func (c JITConfig) GoString() string { return c.String() }

// RegistrationToken lets runners register with config.sh for an hour. String and
// GoString hide Token.
type RegistrationToken struct {
	Token     string
	ExpiresAt time.Time
}

// String describes the token without its value.
func (t RegistrationToken) String() string {
	return "RegistrationToken{expires " + t.ExpiresAt.UTC().Format(time.RFC3339) + ", token redacted}"
}

// GoString keeps %#v from printing the token.
func (t RegistrationToken) GoString() string { return t.String() }

// RunnerStatus is whether a runner is connected to GitHub.
type RunnerStatus string

const (
	RunnerOnline  RunnerStatus = "online"
	RunnerOffline RunnerStatus = "offline"
)

// Runner is a self-hosted runner registered on GitHub.
type Runner struct {
	ID     int64
	Name   string
	OS     string
	Status RunnerStatus
	// Busy is true while the runner is running a job.
	Busy   bool
	Labels []string
}

// Job is a queued workflow job.
type Job struct {
	ID           int64
	RunID        int64
	RunAttempt   int64
	Name         string
	WorkflowName string
	// Owner and Repo name the job's repository.
	Owner     string
	Repo      string
	Labels    []string
	Status    string
	CreatedAt time.Time
}

// QueuedJobs is what ListQueuedJobs found in a repository.
type QueuedJobs struct {
	// Jobs are the queued jobs of the runs whose jobs were listed.
	Jobs []Job
	// Skipped are the queued or in-progress runs whose jobs were not listed.
	Skipped []int64
	// Requests is how many requests the listing took, and NotModified how many of them
	// GitHub answered 304 (not counted against the rate limit).
	Requests, NotModified int
}

// HookDelivery is one entry of a webhook delivery log.
type HookDelivery struct {
	ID          int64
	GUID        string
	DeliveredAt time.Time
	Redelivery  bool
	// Status is GitHub's description ("OK", "Invalid HTTP Response: 503", ...).
	Status     string
	StatusCode int
	Event      string
	Action     string
}

// HookDeliveryPage is one page of a delivery log.
type HookDeliveryPage struct {
	Deliveries []HookDelivery
	// NextCursor fetches the next (older) page; "" on the last page.
	NextCursor string
}
