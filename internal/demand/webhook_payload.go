package demand

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// workflowJobPayload is the part of GitHub's workflow_job webhook payload Gantry reads.
type workflowJobPayload struct {
	Action      string `json:"action"`
	WorkflowJob *struct {
		ID           int64     `json:"id"`
		RunID        int64     `json:"run_id"`
		Labels       []string  `json:"labels"`
		Status       string    `json:"status"`
		WorkflowName string    `json:"workflow_name"`
		RunnerName   *string   `json:"runner_name"`
		RunnerID     *int64    `json:"runner_id"`
		CreatedAt    time.Time `json:"created_at"`
		// For usage records (Job's Name … Conclusion).
		Name        string     `json:"name"`
		RunAttempt  int        `json:"run_attempt"`
		StartedAt   *time.Time `json:"started_at"`
		CompletedAt *time.Time `json:"completed_at"`
		Conclusion  *string    `json:"conclusion"`
	} `json:"workflow_job"`
	Repository *struct {
		Name     string `json:"name"`
		FullName string `json:"full_name"`
		HTMLURL  string `json:"html_url"`
		Owner    struct {
			Login string `json:"login"`
		} `json:"owner"`
	} `json:"repository"`
	Enterprise *struct {
		Slug string `json:"slug"`
	} `json:"enterprise"`
}

// ErrIgnoredAction is returned for workflow_job actions that carry no demand change
// Gantry acts on (none today; kept for actions GitHub may add).
var ErrIgnoredAction = errors.New("workflow_job action is not one Gantry acts on")

// ParseWorkflowJob parses a workflow_job webhook body. It never panics; a body that is
// not a well-formed workflow_job payload gets an error that says what is missing.
func ParseWorkflowJob(body []byte) (JobEvent, error) {
	var p workflowJobPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return JobEvent{}, fmt.Errorf("malformed workflow_job payload: %w", err)
	}
	var ev JobEvent
	switch a := Action(p.Action); a {
	case ActionQueued, ActionWaiting, ActionInProgress, ActionCompleted:
		ev.Action = a
	case "":
		return JobEvent{}, errors.New("workflow_job payload has no action")
	default:
		return JobEvent{}, fmt.Errorf("%w: %q", ErrIgnoredAction, p.Action)
	}
	if p.WorkflowJob == nil || p.WorkflowJob.ID == 0 {
		return JobEvent{}, errors.New("workflow_job payload has no workflow_job.id")
	}
	if p.Repository == nil || p.Repository.Owner.Login == "" || p.Repository.Name == "" {
		return JobEvent{}, errors.New("workflow_job payload has no repository owner and name")
	}
	host := "github.com"
	if p.Repository.HTMLURL != "" {
		u, err := url.Parse(p.Repository.HTMLURL)
		if err != nil || u.Host == "" {
			return JobEvent{}, fmt.Errorf("workflow_job payload has a malformed repository.html_url %q", p.Repository.HTMLURL)
		}
		host = strings.ToLower(u.Host)
	}
	wj := p.WorkflowJob
	ev.Job = Job{
		ID:        wj.ID,
		RunID:     wj.RunID,
		Host:      host,
		Owner:     p.Repository.Owner.Login,
		Repo:      p.Repository.Name,
		Labels:    wj.Labels,
		Workflow:  wj.WorkflowName,
		CreatedAt: wj.CreatedAt,
	}
	ev.Job.Name, ev.Job.RunAttempt = wj.Name, wj.RunAttempt
	if wj.StartedAt != nil && ev.Action != ActionQueued && ev.Action != ActionWaiting {
		// A queued job's started_at is its created_at: not a start.
		ev.Job.StartedAt = *wj.StartedAt
	}
	if wj.CompletedAt != nil {
		ev.Job.CompletedAt = *wj.CompletedAt
	}
	if wj.Conclusion != nil {
		ev.Job.Conclusion = *wj.Conclusion
	}
	if wj.RunnerName != nil {
		ev.Job.RunnerName = *wj.RunnerName
	}
	if wj.RunnerID != nil {
		ev.Job.RunnerID = *wj.RunnerID
	}
	if p.Enterprise != nil {
		ev.Job.Enterprise = p.Enterprise.Slug
	}
	return ev, nil
}
