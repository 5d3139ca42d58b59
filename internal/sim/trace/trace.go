// Package trace reads and writes traces of workflow jobs — when each job was queued,
// where, with which labels and for how long it ran — in a JSON Lines format that
// `gantry sim run --trace FILE` replays against a simulated pool and that `gantry sim
// export-trace` writes from a real organization's GitHub API. docs/sim.md documents
// the format.
package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Format is the value of a trace header's "format".
const Format = "gantry-trace/v1"

// Limits of what Parse accepts.
const (
	MaxLineBytes = 1 << 20
	MaxJobs      = 1_000_000
	MaxLabels    = 100
	MaxLabelLen  = 256
	// MaxAt is how far into a trace a job may be queued (400 days).
	MaxAt = 400 * 24 * time.Hour
	// MaxDuration is how long a job may run (a self-hosted job's limit is 5 days).
	MaxDuration = 5 * 24 * time.Hour
)

// Seconds is a span of time written as a JSON number of seconds; reading also accepts a
// Go duration string ("1m30s").
type Seconds float64

// Duration is s as a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(float64(s) * float64(time.Second)) }

// SecondsOf converts a duration, rounded to the millisecond.
func SecondsOf(d time.Duration) Seconds { return Seconds(math.Round(d.Seconds()*1000) / 1000) }

// MarshalJSON writes a number of seconds, to the millisecond.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, math.Round(float64(s)*1000)/1000, 'f', -1, 64), nil
}

// UnmarshalJSON reads a number of seconds or a duration string.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		d, err := time.ParseDuration(str)
		if err != nil {
			return fmt.Errorf("invalid duration %q", str)
		}
		*s = Seconds(d.Seconds())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("invalid number of seconds %s", b)
	}
	*s = Seconds(f)
	return nil
}

// RunKey groups the jobs of one workflow run; it reads a JSON string or number.
type RunKey string

// UnmarshalJSON reads a string or a number.
func (k *RunKey) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*k = RunKey(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("run must be a string or a number")
	}
	*k = RunKey(n.String())
	return nil
}

// Header is a trace's optional first line.
type Header struct {
	// Format is "gantry-trace/v1".
	Format string `json:"format"`
	// Source says where the jobs came from, such as https://github.com/acme.
	Source     string     `json:"source,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Until      *time.Time `json:"until,omitempty"`
	ExportedAt *time.Time `json:"exported_at,omitempty"`
	// Jobs is how many job lines follow (informational).
	Jobs int `json:"jobs,omitempty"`
}

// Job is one line of a trace: a workflow job.
type Job struct {
	// At is when the job was queued, in seconds from the start of the trace.
	At Seconds `json:"at"`
	// Repo is the repository, "owner/name" or "name". A replay keeps the name and
	// puts it in the simulated organization.
	Repo string `json:"repo"`
	// Labels is the job's runs-on list.
	Labels []string `json:"labels"`
	// Duration is how long the job ran once a runner started it, in seconds.
	Duration Seconds `json:"duration"`
	// Run groups jobs into one workflow run (a matrix); optional.
	Run      RunKey `json:"run,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	Name     string `json:"name,omitempty"`
	Branch   string `json:"branch,omitempty"`
	// Conclusion is what the runner reports: success (default), failure, or the
	// canceled conclusion in GitHub's spelling.
	Conclusion string `json:"conclusion,omitempty"`
	// Container is the image of the job's container (`container:`), Services its
	// service containers (`services:`, name → image); both optional. GitHub's jobs API
	// does not say them, so export-trace leaves them out.
	Container string            `json:"container,omitempty"`
	Services  map[string]string `json:"services,omitempty"`
	// Pickup is how long the job waited for a runner when it was recorded, in seconds
	// (informational: a replay reports it next to what the simulation measured).
	Pickup *Seconds `json:"pickup,omitempty"`
}

// Trace is a header and jobs ordered by At.
type Trace struct {
	Header Header
	Jobs   []Job
}

var (
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	repoRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// RepoName is the repository's name without its owner.
func (j Job) RepoName() string {
	if _, name, ok := strings.Cut(j.Repo, "/"); ok {
		return name
	}
	return j.Repo
}

// Validate checks one job.
func (j Job) Validate() error {
	var errs []error
	if j.At < 0 || float64(j.At) > MaxAt.Seconds() {
		errs = append(errs, fmt.Errorf("at must be between 0 and %s, got %vs", MaxAt, float64(j.At)))
	}
	if j.Duration < 0 || float64(j.Duration) > MaxDuration.Seconds() {
		errs = append(errs, fmt.Errorf("duration must be between 0 and %s, got %vs", MaxDuration, float64(j.Duration)))
	}
	if j.Pickup != nil && (*j.Pickup < 0 || float64(*j.Pickup) > MaxAt.Seconds()) {
		errs = append(errs, errors.New("pickup must be between 0 and 400 days"))
	}
	owner, name, hasOwner := strings.Cut(j.Repo, "/")
	if !hasOwner {
		owner, name = "", j.Repo
	}
	if (hasOwner && !ownerRE.MatchString(owner)) || !repoRE.MatchString(name) || name == "." || name == ".." {
		errs = append(errs, fmt.Errorf("repo must be \"owner/name\" or \"name\", got %q", j.Repo))
	}
	if len(j.Labels) == 0 || len(j.Labels) > MaxLabels {
		errs = append(errs, fmt.Errorf("labels must list 1 to %d labels, got %d", MaxLabels, len(j.Labels)))
	}
	for _, l := range j.Labels {
		if strings.TrimSpace(l) == "" || len(l) > MaxLabelLen || strings.ContainsAny(l, ",\n\r\x00") {
			errs = append(errs, fmt.Errorf("label %q must be 1–%d characters, without commas or line breaks", l, MaxLabelLen))
		}
	}
	switch j.Conclusion {
	case "", "success", "failure", "cancelled": //nolint:misspell // GitHub's spelling
	default:
		errs = append(errs, fmt.Errorf("conclusion must be success, failure or cancelled, got %q", j.Conclusion)) //nolint:misspell // GitHub's spelling
	}
	if err := simgithub.ValidateContainers(j.Container, j.Services, nil); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []struct{ name, v string }{{"workflow", j.Workflow}, {"name", j.Name}, {"branch", j.Branch}, {"run", string(j.Run)}} {
		if len(f.v) > 1024 {
			errs = append(errs, fmt.Errorf("%s is longer than 1024 characters", f.name))
		}
	}
	return errors.Join(errs...)
}

// Parse reads a trace: an optional header line, then one job per line. Blank lines
// are skipped; unknown fields are errors. The jobs are returned ordered by At (ties
// keep the file's order).
func Parse(r io.Reader) (Trace, error) {
	var t Trace
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) && line == nil {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return Trace{}, fmt.Errorf("line %d: %w", n, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if n == 1 && isHeader(line) {
			if err := decodeStrict(line, &t.Header); err != nil {
				return Trace{}, fmt.Errorf("line 1 (header): %w", err)
			}
			if t.Header.Format != Format {
				return Trace{}, fmt.Errorf("line 1 (header): format %q is not %q", t.Header.Format, Format)
			}
			continue
		}
		if len(t.Jobs) == MaxJobs {
			return Trace{}, fmt.Errorf("line %d: a trace holds at most %d jobs", n, MaxJobs)
		}
		var j Job
		if err := decodeStrict(line, &j); err != nil {
			return Trace{}, fmt.Errorf("line %d: %w", n, err)
		}
		if err := j.Validate(); err != nil {
			return Trace{}, fmt.Errorf("line %d: %w", n, err)
		}
		t.Jobs = append(t.Jobs, j)
	}
	if len(t.Jobs) == 0 {
		return Trace{}, errors.New("the trace has no jobs")
	}
	sort.SliceStable(t.Jobs, func(a, b int) bool { return t.Jobs[a].At < t.Jobs[b].At })
	return t, nil
}

// isHeader reports whether a first line is a header: an object with a format key.
func isHeader(line []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(line, &probe) != nil {
		return false
	}
	_, ok := probe["format"]
	return ok
}

// readLine reads one line of at most MaxLineBytes, without its newline.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		line = append(line, chunk...)
		if len(line) > MaxLineBytes {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		if err != nil {
			if len(line) > 0 && errors.Is(err, io.EOF) {
				return line, nil
			}
			return nil, err
		}
		if !isPrefix {
			return line, nil
		}
	}
}

func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// Write writes t: its header (Format filled in, Jobs counted), then one job per line.
func Write(w io.Writer, t Trace) error {
	bw := bufio.NewWriter(w)
	h := t.Header
	h.Format, h.Jobs = Format, len(t.Jobs)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(h); err != nil {
		return err
	}
	for _, j := range t.Jobs {
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Span is the time from the first job queued to the last job's end.
func (t Trace) Span() time.Duration {
	var end Seconds
	for _, j := range t.Jobs {
		end = max(end, j.At+j.Duration)
	}
	if len(t.Jobs) == 0 {
		return 0
	}
	return (end - t.Jobs[0].At).Duration()
}

// PeakConcurrency is the most jobs running at once had each started when queued: the
// runners a pool needs so that no job waits.
func (t Trace) PeakConcurrency() int {
	type edge struct {
		at    Seconds
		delta int
	}
	edges := make([]edge, 0, 2*len(t.Jobs))
	for _, j := range t.Jobs {
		edges = append(edges, edge{j.At, 1}, edge{j.At + j.Duration, -1})
	}
	sort.Slice(edges, func(a, b int) bool {
		if edges[a].at != edges[b].at {
			return edges[a].at < edges[b].at
		}
		return edges[a].delta < edges[b].delta // an end before a start at the same time
	})
	peak, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

// Labels is the union of the jobs' labels, lower-cased, without self-hosted, sorted:
// the labels a single pool needs to take every job of the trace.
func (t Trace) Labels() []string {
	seen := map[string]bool{}
	var out []string
	for _, j := range t.Jobs {
		for _, l := range j.Labels {
			k := strings.ToLower(strings.TrimSpace(l))
			if k == "self-hosted" || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
