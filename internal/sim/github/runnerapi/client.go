package runnerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrRunnerRemoved is returned when the simulator no longer knows the runner: it was
// deleted through the REST API, or it was ephemeral and its job is done.
var ErrRunnerRemoved = errors.New("runner removed from the simulator")

// HTTPError is an unexpected answer of the runner API.
type HTTPError struct {
	StatusCode int
	Message    string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("runner API answered %d: %s", e.StatusCode, e.Message)
}

// Client is the runner side of one runner. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
}

// NewClient returns a client for the runner described by cfg. A nil hc means
// http.DefaultClient; long polls need its Timeout to be zero or above the wait.
func NewClient(cfg Config, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	return &Client{cfg: cfg, http: hc}
}

// NewClientFromJITConfig decodes an encoded JIT config and returns its client.
func NewClientFromJITConfig(encoded string, hc *http.Client) (*Client, error) {
	cfg, err := DecodeConfig(encoded)
	if err != nil {
		return nil, err
	}
	return NewClient(cfg, hc), nil
}

// Register registers a runner with a registration token, as config.sh does, and
// returns its client. baseURL is the simulator's root URL.
func Register(ctx context.Context, baseURL string, req RegisterRequest, hc *http.Client) (*Client, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := &Client{cfg: Config{URL: strings.TrimRight(baseURL, "/")}, http: hc}
	var resp RegisterResponse
	if _, err := c.do(ctx, http.MethodPost, PathRegister, "", req, &resp); err != nil {
		return nil, fmt.Errorf("registering runner: %w", err)
	}
	cfg, err := DecodeConfig(resp.EncodedJITConfig)
	if err != nil {
		return nil, fmt.Errorf("registering runner: %w", err)
	}
	return NewClient(cfg, hc), nil
}

// Config returns the runner's config (its String method hides the credential).
func (c *Client) Config() Config { return c.cfg }

// Connect brings the runner online; it is then idle and can be assigned a job.
func (c *Client) Connect(ctx context.Context) (Session, error) {
	var s Session
	_, err := c.do(ctx, http.MethodPost, PathSession, "", nil, &s)
	return s, err
}

// Disconnect takes the runner offline.
func (c *Client) Disconnect(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodDelete, PathSession, "", nil, nil)
	return err
}

// NextJob long-polls for up to wait for the job assigned to the runner. It returns
// nil and no error when no job came in time.
func (c *Client) NextJob(ctx context.Context, wait time.Duration) (*Job, error) {
	q := url.Values{"wait": {wait.String()}}.Encode()
	var j Job
	status, err := c.do(ctx, http.MethodGet, PathNextJob, q, nil, &j)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNoContent {
		return nil, nil
	}
	return &j, nil
}

// StartJob reports that the runner started job id.
func (c *Client) StartJob(ctx context.Context, id int64) error {
	_, err := c.do(ctx, http.MethodPost, StartPath(id), "", struct{}{}, nil)
	return err
}

// RenewJob tells the simulator that job id is still running on this runner. With
// Options.RunnerLostTimeout set, a running job that is not renewed for that long fails
// as when its runner died.
func (c *Client) RenewJob(ctx context.Context, id int64) error {
	_, err := c.do(ctx, http.MethodPost, RenewPath(id), "", struct{}{}, nil)
	return err
}

// CompleteJob reports that the runner finished job id with conclusion.
func (c *Client) CompleteJob(ctx context.Context, id int64, conclusion string) error {
	_, err := c.do(ctx, http.MethodPost, CompletePath(id), "", CompleteRequest{Conclusion: conclusion}, nil)
	return err
}

// RunOptions tune Run.
type RunOptions struct {
	// PollWait is the long-poll wait of each NextJob call (default 30s).
	PollWait time.Duration
	// Sleep waits for a job's duration; the default waits on a real timer or ctx.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Run plays an ephemeral runner: it comes online, waits for one job, runs it for its
// duration and reports it completed. It returns the job, or an error (ErrRunnerRemoved
// when the runner was deleted before it got a job).
func (c *Client) Run(ctx context.Context, opts RunOptions) (Job, error) {
	if opts.PollWait <= 0 {
		opts.PollWait = 30 * time.Second
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	if _, err := c.Connect(ctx); err != nil {
		return Job{}, err
	}
	for {
		j, err := c.NextJob(ctx, opts.PollWait)
		if err != nil {
			return Job{}, err
		}
		if j == nil {
			continue
		}
		if err := c.StartJob(ctx, j.ID); err != nil {
			return *j, err
		}
		if err := opts.Sleep(ctx, j.Duration()); err != nil {
			return *j, err
		}
		return *j, c.CompleteJob(ctx, j.ID, j.Conclusion)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) do(ctx context.Context, method, path, query string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	u := c.cfg.URL + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.Credential != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Credential)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized && c.cfg.RunnerID != 0:
		return resp.StatusCode, ErrRunnerRemoved
	case resp.StatusCode == http.StatusNoContent:
		return resp.StatusCode, nil
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if out != nil && len(data) > 0 {
			if err := json.Unmarshal(data, out); err != nil {
				return resp.StatusCode, fmt.Errorf("decoding runner API answer: %w", err)
			}
		}
		return resp.StatusCode, nil
	default:
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(data, &e)
		return resp.StatusCode, &HTTPError{StatusCode: resp.StatusCode, Message: e.Message}
	}
}
