package github

import (
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// This file is the simulator's Go API. The admin HTTP API (admin.go) is a thin JSON
// layer over the same functions.

// Error is an error of the Go and admin APIs; Code is the HTTP status the admin API
// answers with.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(code int, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func fromAPI(e *apiError) error {
	if e == nil {
		return nil
	}
	msg := e.Message
	for _, fe := range e.Errors {
		msg += ": " + fe
	}
	return &Error{Code: e.code, Message: msg}
}

// EnterpriseSpec describes an enterprise to create.
type EnterpriseSpec struct {
	Slug string `json:"slug"`
	Name string `json:"name,omitempty"`
}

// Enterprise is a created enterprise. DefaultGroupID is its "Default" runner group.
type Enterprise struct {
	ID             int64  `json:"id"`
	Slug           string `json:"slug"`
	Name           string `json:"name"`
	DefaultGroupID int64  `json:"default_group_id"`
}

// OrgSpec describes an organization to create, optionally inside an enterprise.
type OrgSpec struct {
	Login      string `json:"login"`
	Enterprise string `json:"enterprise,omitempty"`
}

// Org is a created organization. Its "Default" runner group has ID 1, as on GitHub.
type Org struct {
	ID         int64  `json:"id"`
	Login      string `json:"login"`
	Enterprise string `json:"enterprise,omitempty"`
}

// RepoSpec describes a repository to create. Repositories are private unless Public:
// runner groups serve public repositories only when they allow it, as on GitHub.
type RepoSpec struct {
	Owner  string `json:"owner"`
	Name   string `json:"name"`
	Public bool   `json:"public,omitempty"`
}

// Repo is a created repository.
type Repo struct {
	ID       int64  `json:"id"`
	Owner    string `json:"owner"`
	Name     string `json:"name"`
	FullName string `json:"full_name"`
}

// AppSpec describes a GitHub App. Without PublicKeyPEM the simulator generates a key
// pair and returns the private key in App.PrivateKeyPEM. WebhookURL (with
// WebhookSecret) receives the events of the App's installations.
type AppSpec struct {
	Slug          string `json:"slug"`
	Name          string `json:"name,omitempty"`
	Owner         string `json:"owner"`
	PublicKeyPEM  string `json:"public_key_pem,omitempty"`
	WebhookURL    string `json:"webhook_url,omitempty"`
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// App is a created GitHub App.
type App struct {
	ID            int64  `json:"id"`
	Slug          string `json:"slug"`
	ClientID      string `json:"client_id"`
	PrivateKeyPEM string `json:"private_key_pem,omitempty"`
	HookID        int64  `json:"hook_id,omitempty"`
}

// String describes the App without its private key, so it is safe to log.
func (a App) String() string { return fmt.Sprintf("app %d (%s)", a.ID, a.Slug) }

// InstallationSpec installs an App on an organization: on all its repositories, or
// on the named ones.
type InstallationSpec struct {
	AppID        int64    `json:"app_id"`
	Org          string   `json:"org"`
	Repositories []string `json:"repositories,omitempty"`
	// RateLimit overrides the primary limit per hour of its tokens (0: default).
	RateLimit int `json:"rate_limit,omitempty"`
	// Permissions are what the installation was granted, by GitHub's names
	// ("organization_self_hosted_runners": "write", "actions": "read"; see
	// permissions.go): a call its tokens make that needs another is refused 403, as
	// GitHub does. Nil: every permission a runner controller uses.
	Permissions map[string]string `json:"permissions,omitempty"`
}

// Installation is a created installation.
type Installation struct {
	ID    int64  `json:"id"`
	AppID int64  `json:"app_id"`
	Org   string `json:"org"`
}

// HookSpec creates an organization hook (Org) or a repository hook (Repo, "owner/name").
type HookSpec struct {
	Org    string   `json:"org,omitempty"`
	Repo   string   `json:"repo,omitempty"`
	URL    string   `json:"url"`
	Secret string   `json:"secret,omitempty"`
	Events []string `json:"events,omitempty"`
}

// Hook is a created webhook.
type Hook struct {
	ID  int64  `json:"id"`
	URL string `json:"url"`
}

// RunnerGroupSpec creates a runner group of an organization (Org) or an enterprise
// (Enterprise). Visibility is all (default), selected (Repositories of the org, or
// Organizations of the enterprise) or private (private repositories only).
type RunnerGroupSpec struct {
	Org                      string   `json:"org,omitempty"`
	Enterprise               string   `json:"enterprise,omitempty"`
	Name                     string   `json:"name"`
	Visibility               string   `json:"visibility,omitempty"`
	Repositories             []string `json:"repositories,omitempty"`
	Organizations            []string `json:"organizations,omitempty"`
	AllowsPublicRepositories bool     `json:"allows_public_repositories,omitempty"`
}

// RunnerGroup is a created runner group.
type RunnerGroup struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// JobSpec queues one job. Without RunID it gets a workflow run of its own.
type JobSpec struct {
	// Repo is "owner/name".
	Repo string `json:"repo"`
	// Labels is the runs-on list (default ["self-hosted"]).
	Labels []string `json:"labels,omitempty"`
	// Duration is how long the runner runs the job.
	Duration Duration `json:"duration,omitempty"`
	Name     string   `json:"name,omitempty"`
	// RunID adds the job to an existing run of the same repository.
	RunID    int64  `json:"run_id,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Actor    string `json:"actor,omitempty"`
	// Conclusion is what the runner reports (default success).
	Conclusion string `json:"conclusion,omitempty"`
	// Container is the image of the job's container (`container:` in the workflow),
	// empty for a job that runs on the runner itself.
	Container string `json:"container,omitempty"`
	// Services are the job's service containers (`services:`), name → image.
	Services map[string]string `json:"services,omitempty"`
	// ContainerOptions: the ports, credentials and container steps of a container job.
	ContainerOptions *runnerapi.ContainerOptions `json:"container_options,omitempty"`
	// Key is the job's ID in its workflow (jobs.<job_id>), which Needs name; default its
	// Name. The copies of a matrix Template are keyed "<key> (i)", and a need naming the
	// template's key waits for every copy.
	Key string `json:"key,omitempty"`
	// Needs are the keys of the jobs of the same run this job needs (jobs.<job_id>.needs,
	// RunSpec only): it is queued once they all succeeded, and skipped when one failed
	// or was skipped (rerun_state.go).
	Needs []string `json:"needs,omitempty"`
}

// RunSpec queues a workflow run: its Jobs, plus Matrix copies of Template named
// "<name> (i)" (a matrix build).
type RunSpec struct {
	Repo     string    `json:"repo"`
	Workflow string    `json:"workflow,omitempty"`
	Branch   string    `json:"branch,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	Jobs     []JobSpec `json:"jobs,omitempty"`
	Matrix   int       `json:"matrix,omitempty"`
	Template JobSpec   `json:"template"`
}

// Job is a job and its timeline.
type Job struct {
	ID         int64             `json:"id"`
	RunID      int64             `json:"run_id"`
	Repo       string            `json:"repo"`
	Name       string            `json:"name"`
	Labels     []string          `json:"labels"`
	Status     string            `json:"status"`
	Conclusion string            `json:"conclusion,omitempty"`
	RunnerID   int64             `json:"runner_id,omitempty"`
	RunnerName string            `json:"runner_name,omitempty"`
	Duration   Duration          `json:"duration"`
	Container  string            `json:"container,omitempty"`
	Services   map[string]string `json:"services,omitempty"`
	// ContainerOptions: as JobSpec's.
	ContainerOptions *runnerapi.ContainerOptions `json:"container_options,omitempty"`
	QueuedAt         time.Time                   `json:"queued_at"`
	AssignedAt       *time.Time                  `json:"assigned_at,omitempty"`
	StartedAt        *time.Time                  `json:"started_at,omitempty"`
	DoneAt           *time.Time                  `json:"completed_at,omitempty"`
	Timeline         []TimelineEvent             `json:"timeline"`
	// Key is the job's ID in its workflow (JobSpec.Key), RunAttempt the attempt of the
	// run it belongs to: a re-run job is a new Job of the same Key and a higher attempt.
	Key        string `json:"key"`
	RunAttempt int    `json:"run_attempt"`
}

// Run is a queued workflow run: the jobs queued at once, and the keys of those that wait
// for the jobs they need (queued later, or skipped).
type Run struct {
	ID      int64    `json:"id"`
	Jobs    []Job    `json:"jobs"`
	Waiting []string `json:"waiting,omitempty"`
}

// Runner is a registered runner as the simulator sees it.
type Runner struct {
	ID        int64    `json:"id"`
	Name      string   `json:"name"`
	Scope     string   `json:"scope"`
	GroupID   int64    `json:"group_id"`
	Labels    []string `json:"labels"`
	Online    bool     `json:"online"`
	Busy      bool     `json:"busy"`
	Ephemeral bool     `json:"ephemeral"`
	JobID     int64    `json:"job_id,omitempty"`
}

// Delivery is one webhook delivery attempt.
type Delivery struct {
	ID         int64  `json:"id"`
	GUID       string `json:"guid"`
	HookID     int64  `json:"hook_id"`
	Event      string `json:"event"`
	Action     string `json:"action"`
	JobID      int64  `json:"job_id,omitempty"`
	Redelivery bool   `json:"redelivery"`
	Done       bool   `json:"done"`
	StatusCode int    `json:"status_code"`
	Status     string `json:"status"`
	// CreatedAt is when the event happened (the delivery was made), DeliveredAt when its
	// attempt ended (the receiver answered, or it failed); zero until done.
	CreatedAt   time.Time `json:"created_at"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
}

// Summary counts the simulator's objects.
type Summary struct {
	Enterprises   int            `json:"enterprises"`
	Orgs          int            `json:"orgs"`
	Repos         int            `json:"repos"`
	Apps          int            `json:"apps"`
	Installations int            `json:"installations"`
	Runners       int            `json:"runners"`
	RunnersOnline int            `json:"runners_online"`
	RunnersBusy   int            `json:"runners_busy"`
	Jobs          map[string]int `json:"jobs"`
	Deliveries    int            `json:"deliveries"`
}
