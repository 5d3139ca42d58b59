// Package usage is who used the runners: the usage record the Runner controller writes
// for each runner that ends (a structured log line and an event), the bounded label
// values of the usage metrics, and the summaries `gantry usage` and the simulator's
// report print — top repositories and workflows by runner time and by queue time —
// from records or from Prometheus. docs/usage.md documents the record's schema.
package usage

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Version is the record's schema version (Record.Version). A field is added without a
// new version; one renamed, removed or given another meaning takes a new one.
const Version = 1

// The record's places: the log line's message and key, the event's reason and action,
// and the event annotation that holds the record as JSON.
const (
	LogMessage  = "Runner usage"
	LogKey      = "usage"
	EventReason = "RunnerUsage"
	EventAction = "Finish"
	Annotation  = "gantry.dev/usage"
)

// How the runner ended (Record.RunnerResult).
const (
	// RunnerSucceeded: its runner container exited 0, or it ran its job and its pod ended.
	RunnerSucceeded = "Succeeded"
	// RunnerFailed: Gantry failed it (Record.Reason says why).
	RunnerFailed = "Failed"
	// RunnerRemoved: deleted before its runner exited — an idle runner retired by a
	// scale-down, or the pool deleted.
	RunnerRemoved = "Removed"
)

// OutcomeUnknown is a job's outcome when GitHub's word on how it ended never reached
// Gantry (its completed webhook came after the runner was gone, or was lost).
const OutcomeUnknown = "unknown"

// Record is one runner's usage: written once, when the runner ends, as the log line
// `"msg":"Runner usage"` (the record under "usage") and as a RunnerUsage event on the
// Runner (the record as JSON in its gantry.dev/usage annotation). It holds no secret,
// token, log or step output. Times are RFC 3339; seconds are float seconds; a field
// Gantry did not learn is left out.
type Record struct {
	// Version is the schema's (1).
	Version int `json:"version"`

	// Namespace, Pool and Runner name the RunnerPool and the Runner (and its pod).
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	Runner    string `json:"runner"`

	// The job the runner ran; all empty for a runner that ended without one (an idle
	// runner retired, a runner that failed before a job).
	// Repository is OWNER/REPO; Workflow the workflow's name (a scale-set pool's: its
	// file, .github/workflows/ci.yml: the Actions service names no workflow); Job the
	// job's name.
	Repository string `json:"repository,omitempty"`
	Workflow   string `json:"workflow,omitempty"`
	Job        string `json:"job,omitempty"`
	JobID      int64  `json:"job_id,omitempty"`
	RunID      int64  `json:"run_id,omitempty"`
	// RunAttempt is the run's attempt (0: not said); Rerun is RunAttempt > 1: the job
	// ran again after an earlier attempt of its run.
	RunAttempt int  `json:"run_attempt,omitempty"`
	Rerun      bool `json:"rerun"`
	// Labels are the job's runs-on labels: the runner it asked for.
	Labels []string `json:"labels,omitempty"`
	// Outcome is the job's conclusion as GitHub gave it (success, failure, skipped,
	// …), or unknown; empty without a job.
	Outcome string `json:"outcome,omitempty"`

	// The job's times. QueuedAt: GitHub queued it. PickedUpAt: Gantry heard the runner
	// took it (the in_progress webhook, or the scale set's JobStarted). StartedAt and
	// FinishedAt: GitHub's start and completion of the job (a scale set's runner
	// assignment and finish time); FinishedAt falls back to the runner's exit.
	QueuedAt   *time.Time `json:"queued_at,omitempty"`
	PickedUpAt *time.Time `json:"picked_up_at,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// QueueSeconds is how long the job waited for a runner: StartedAt (else
	// PickedUpAt) − QueuedAt.
	QueueSeconds *float64 `json:"queue_seconds,omitempty"`

	// RunnerResult is how the runner ended: Succeeded, Failed (Reason: the Runner's
	// failure reason) or Removed.
	RunnerResult string `json:"runner_result"`
	Reason       string `json:"reason,omitempty"`

	// The runner pod's life: created (the Runner's creation when the pod was never
	// seen) to ended — its runner container's exit, else when Gantry failed the runner
	// and deleted its pod, else when Gantry saw the pod gone. RunnerSeconds is the
	// difference: the pod's start and its idle time before the job included.
	PodCreatedAt  time.Time `json:"pod_created_at"`
	EndedAt       time.Time `json:"ended_at"`
	RunnerSeconds float64   `json:"runner_seconds"`

	// The runner pod's requests (every container's, as the scheduler counts them: init
	// containers, sidecars and overhead included), and the requests over its life:
	// CPU core-seconds and memory GiB-seconds.
	CPURequestCores           float64 `json:"cpu_request_cores"`
	MemoryRequestBytes        int64   `json:"memory_request_bytes"`
	RequestedCPUSeconds       float64 `json:"requested_cpu_seconds"`
	RequestedMemoryGiBSeconds float64 `json:"requested_memory_gib_seconds"`

	// WorkflowPod is the job's workflow pod in Kubernetes mode (containerMode), as the
	// controller saw it: its own requests and life. Absent in other modes, or when it
	// was never seen.
	WorkflowPod *PodUsage `json:"workflow_pod,omitempty"`

	// Estimated is set when the runner pod was never seen by this controller process
	// (it restarted after the pod was gone): its life is taken from the Runner's
	// creation, its requests from the pool's template.
	Estimated bool `json:"estimated,omitempty"`
}

// PodUsage is a pod's life and requests.
type PodUsage struct {
	Name                      string    `json:"name"`
	CreatedAt                 time.Time `json:"created_at"`
	EndedAt                   time.Time `json:"ended_at"`
	Seconds                   float64   `json:"seconds"`
	CPURequestCores           float64   `json:"cpu_request_cores"`
	MemoryRequestBytes        int64     `json:"memory_request_bytes"`
	RequestedCPUSeconds       float64   `json:"requested_cpu_seconds"`
	RequestedMemoryGiBSeconds float64   `json:"requested_memory_gib_seconds"`
}

// Lifetime fills the seconds and the requested core- and GiB-seconds of a pod that
// lived from created to ended with those requests.
func Lifetime(created, ended time.Time, cpuCores float64, memoryBytes int64) (seconds, cpuSeconds, memoryGiBSeconds float64) {
	seconds = math.Max(0, ended.Sub(created).Seconds())
	return round3(seconds), round3(cpuCores * seconds), round3(float64(memoryBytes) / (1 << 30) * seconds)
}

// HasJob reports whether the runner ran a job that Gantry knows of.
func (r Record) HasJob() bool { return r.Repository != "" }

// Parse reads a record from its JSON (an event's annotation, a log line's "usage").
func Parse(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("reading a usage record: %w", err)
	}
	switch {
	case r.Version == 0:
		return Record{}, errors.New("reading a usage record: it has no version")
	case r.Version > Version:
		return Record{}, fmt.Errorf("reading a usage record: version %d is newer than this gantry reads (%d): upgrade gantry", r.Version, Version)
	}
	return r, nil
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
