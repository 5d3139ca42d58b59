// Package runnerapi is the runner side of Gantry's GitHub simulator: the small HTTP API
// that a simulated actions runner speaks instead of the real Actions service protocol,
// its wire types, the layout of the simulator's JIT config, and a Go client.
//
// A runner holding only an encoded JIT config (what `generate-jitconfig` returns and
// what a runner pod reads from ACTIONS_RUNNER_INPUT_JITCONFIG) decodes it with
// DecodeConfig, which yields the simulator's URL, the runner's ID and a runner
// credential, and then:
//
//	POST   /_runner/session              come online (idle, ready for a job)
//	GET    /_runner/jobs/next?wait=30s   long-poll for the job assigned to it (204: none yet)
//	POST   /_runner/jobs/{id}/start      report the job started (job becomes in_progress)
//	POST   /_runner/jobs/{id}/renew      keep a running job alive (the runner's job-lock renewal)
//	POST   /_runner/jobs/{id}/complete   report it finished, body {"conclusion": "success"}
//	DELETE /_runner/session              go offline
//
// all with `Authorization: Bearer <credential>`. In registration-token mode a runner
// first calls POST /_runner/register with a registration token (what config.sh does),
// which returns the same encoded config. An ephemeral runner is removed by the simulator
// once its job completes; afterwards its credential answers 401, reported by the client
// as ErrRunnerRemoved. docs/simulator.md documents the API in full.
package runnerapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Paths of the runner API, relative to the simulator's root URL (not /api/v3).
const (
	PathRegister = "/_runner/register"
	PathSession  = "/_runner/session"
	PathNextJob  = "/_runner/jobs/next"
	pathJobs     = "/_runner/jobs/"
)

// MaxWait caps the long-poll wait of GET /_runner/jobs/next.
const MaxWait = 60 * time.Second

// Config is what the simulator's encoded JIT config carries. Its encoding is base64 of
// this JSON; clients other than simulated runners treat it as opaque.
type Config struct {
	// URL is the simulator's root URL (scheme and host), where the runner API lives.
	URL        string   `json:"url"`
	RunnerID   int64    `json:"runner_id"`
	RunnerName string   `json:"runner_name"`
	Credential string   `json:"credential"`
	Ephemeral  bool     `json:"ephemeral"`
	Labels     []string `json:"labels,omitempty"`
	WorkFolder string   `json:"work_folder,omitempty"`
}

// String describes the config without its credential, so it is safe to log.
func (c Config) String() string {
	return fmt.Sprintf("runner %d %q at %s (ephemeral=%t)", c.RunnerID, c.RunnerName, c.URL, c.Ephemeral)
}

// Encode returns the encoded JIT config.
func (c Config) Encode() string {
	b, _ := json.Marshal(c) // a struct of strings, ints and bools always marshals
	return base64.StdEncoding.EncodeToString(b)
}

// ErrInvalidConfig is returned by DecodeConfig for input that is not a simulator JIT config.
var ErrInvalidConfig = errors.New("invalid simulator JIT config")

// DecodeConfig decodes an encoded JIT config produced by the simulator.
func DecodeConfig(encoded string) (Config, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return Config{}, fmt.Errorf("%w: not base64", ErrInvalidConfig)
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("%w: not JSON", ErrInvalidConfig)
	}
	if c.URL == "" || c.RunnerID <= 0 || c.Credential == "" {
		return Config{}, fmt.Errorf("%w: url, runner_id and credential are required", ErrInvalidConfig)
	}
	return c, nil
}

// RegisterRequest is the body of POST /_runner/register.
type RegisterRequest struct {
	// Token is a registration token from …/actions/runners/registration-token.
	Token string `json:"token"`
	Name  string `json:"name"`
	// Labels are the custom labels; the simulator adds self-hosted, OS and arch
	// unless NoDefaultLabels is set.
	Labels          []string `json:"labels,omitempty"`
	NoDefaultLabels bool     `json:"no_default_labels,omitempty"`
	// RunnerGroup is a runner group name; empty means the scope's default group.
	RunnerGroup string `json:"runner_group,omitempty"`
	Ephemeral   bool   `json:"ephemeral,omitempty"`
	// Replace replaces an existing runner of the same name (config.sh --replace).
	Replace bool `json:"replace,omitempty"`
}

// RegisterResponse is the answer to POST /_runner/register.
type RegisterResponse struct {
	RunnerID         int64  `json:"runner_id"`
	RunnerName       string `json:"runner_name"`
	EncodedJITConfig string `json:"encoded_jit_config"`
}

// Session is the answer to POST /_runner/session.
type Session struct {
	RunnerID   int64  `json:"runner_id"`
	RunnerName string `json:"runner_name"`
	Status     string `json:"status"`
	Busy       bool   `json:"busy"`
}

// Job is a job assigned to a runner, as GET /_runner/jobs/next returns it.
type Job struct {
	ID           int64    `json:"id"`
	RunID        int64    `json:"run_id"`
	Name         string   `json:"name"`
	WorkflowName string   `json:"workflow_name"`
	Repository   string   `json:"repository"`
	Labels       []string `json:"labels"`
	// DurationMS is how long the job's steps run, in milliseconds; the runner waits
	// that long between starting and completing it.
	DurationMS int64 `json:"duration_ms"`
	// Conclusion is what the runner should report when done (success unless the job
	// was queued to fail).
	Conclusion string `json:"conclusion"`
	// Container is the image of the job's container (`container:`), empty for none;
	// Services its service containers, name → image. A runner configured for the
	// container hooks runs them through the hooks.
	Container string            `json:"container,omitempty"`
	Services  map[string]string `json:"services,omitempty"`
	// ContainerOptions is what the job's workflow says of its containers beyond their
	// images; nil: nothing.
	ContainerOptions *ContainerOptions `json:"container_options,omitempty"`
}

// ContainerOptions is what a container job declares beyond its images, as the job
// message carries it to the runner.
type ContainerOptions struct {
	// Ports are the job container's `ports:`, ServicePorts each service's (by name), as
	// written: "5432" or "5432:5432", with "/udp" or "/tcp" after it.
	Ports        []string            `json:"ports,omitempty"`
	ServicePorts map[string][]string `json:"service_ports,omitempty"`
	// Credentials: the job container has `credentials:` (a registry login).
	Credentials bool `json:"credentials,omitempty"`
	// Steps are the job's steps that run a container action, in order, after its script
	// steps.
	Steps []ContainerStep `json:"steps,omitempty"`
}

// ContainerStep is a step whose action runs in a container: an image action
// (`uses: docker://IMAGE`, or an action whose action.yml runs `docker://IMAGE`), or a
// Dockerfile action (whose action.yml runs `image: Dockerfile`).
type ContainerStep struct {
	Name string `json:"name"`
	// Image is an image action's image; Entrypoint its `with: entrypoint:` (or the
	// action.yml's `entrypoint:`).
	Image      string `json:"image,omitempty"`
	Entrypoint string `json:"entrypoint,omitempty"`
	// Action names a Dockerfile action, OWNER/REPO@REF.
	Action string `json:"action,omitempty"`
}

// Clone is a deep copy of o; nil for nil.
func (o *ContainerOptions) Clone() *ContainerOptions {
	if o == nil {
		return nil
	}
	c := &ContainerOptions{Ports: slices.Clone(o.Ports), Credentials: o.Credentials, Steps: slices.Clone(o.Steps)}
	if o.ServicePorts != nil {
		c.ServicePorts = map[string][]string{}
		for k, v := range o.ServicePorts {
			c.ServicePorts[k] = slices.Clone(v)
		}
	}
	return c
}

// Duration returns the job's duration.
func (j Job) Duration() time.Duration { return time.Duration(j.DurationMS) * time.Millisecond }

// CompleteRequest is the body of POST /_runner/jobs/{id}/complete.
type CompleteRequest struct {
	// Conclusion is a GitHub job conclusion such as success or failure; empty
	// means success.
	Conclusion string `json:"conclusion"`
}

// StartPath returns the path that reports job id started.
func StartPath(id int64) string { return fmt.Sprintf("%s%d/start", pathJobs, id) }

// RenewPath returns the path that renews the lock on running job id.
func RenewPath(id int64) string { return fmt.Sprintf("%s%d/renew", pathJobs, id) }

// CompletePath returns the path that reports job id completed.
func CompletePath(id int64) string { return fmt.Sprintf("%s%d/complete", pathJobs, id) }

// ParseJobPath parses /_runner/jobs/{id}/{action}; ok is false for anything else.
func ParseJobPath(p string) (id int64, action string, ok bool) {
	rest, found := strings.CutPrefix(p, pathJobs)
	if !found {
		return 0, "", false
	}
	idStr, action, found := strings.Cut(rest, "/")
	if !found || (action != "start" && action != "complete" && action != "renew") {
		return 0, "", false
	}
	var n int64
	if len(idStr) == 0 || len(idStr) > 18 {
		return 0, "", false
	}
	for _, c := range idStr {
		if c < '0' || c > '9' {
			return 0, "", false
		}
		n = n*10 + int64(c-'0')
	}
	if n <= 0 {
		return 0, "", false
	}
	return n, action, true
}
