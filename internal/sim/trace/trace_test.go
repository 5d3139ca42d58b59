package trace

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func secs(f float64) *Seconds { s := Seconds(f); return &s }

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Trace
		wantErr string
	}{
		{
			name: "header and jobs, sorted by at",
			in: `{"format": "gantry-trace/v1", "source": "https://github.com/acme", "jobs": 2}
{"at": 5, "repo": "acme/app", "labels": ["self-hosted", "linux"], "duration": 30.5, "run": 7, "workflow": "CI", "name": "test", "pickup": 1.25}

{"at": "1.5s", "repo": "web", "labels": ["self-hosted"], "duration": "2m", "run": "r1", "conclusion": "failure"}
`,
			want: Trace{
				Header: Header{Format: Format, Source: "https://github.com/acme", Jobs: 2},
				Jobs: []Job{
					{At: 1.5, Repo: "web", Labels: []string{"self-hosted"}, Duration: 120, Run: "r1", Conclusion: "failure"},
					{At: 5, Repo: "acme/app", Labels: []string{"self-hosted", "linux"}, Duration: 30.5, Run: "7", Workflow: "CI", Name: "test", Pickup: secs(1.25)},
				},
			},
		},
		{
			name: "no header; equal times keep the file's order; no trailing newline",
			in:   `{"at": 1, "repo": "a/b", "labels": ["x"], "duration": 1, "name": "first"}` + "\n" + `{"at": 1, "repo": "a/b", "labels": ["x"], "duration": 1, "name": "second"}`,
			want: Trace{Jobs: []Job{
				{At: 1, Repo: "a/b", Labels: []string{"x"}, Duration: 1, Name: "first"},
				{At: 1, Repo: "a/b", Labels: []string{"x"}, Duration: 1, Name: "second"},
			}},
		},
		{name: "a job named format is not a header", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1, "name": "format"}`,
			want: Trace{Jobs: []Job{{At: 0, Repo: "a/b", Labels: []string{"x"}, Duration: 1, Name: "format"}}}},
		{name: "a job container and a service", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1, "container": "node:22", "services": {"db": "postgres:17"}}`,
			want: Trace{Jobs: []Job{{At: 0, Repo: "a/b", Labels: []string{"x"}, Duration: 1, Container: "node:22", Services: map[string]string{"db": "postgres:17"}}}}},
		{name: "a service without an image", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1, "services": {"db": ""}}`, wantErr: `service db image ""`},
		{name: "an image with a space", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1, "container": "node 22"}`, wantErr: `container image "node 22"`},
		{name: "empty", in: "\n\n", wantErr: "no jobs"},
		{name: "header only", in: `{"format": "gantry-trace/v1"}`, wantErr: "no jobs"},
		{name: "wrong format", in: `{"format": "other/v9"}`, wantErr: `format "other/v9"`},
		{name: "header not first", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1}` + "\n" + `{"format": "gantry-trace/v1"}`, wantErr: "line 2"},
		{name: "unknown field", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1, "labls": []}`, wantErr: `line 1: json: unknown field "labls"`},
		{name: "not JSON", in: `at=0`, wantErr: "line 1"},
		{name: "two values on a line", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1} {}`, wantErr: "more than one JSON value"},
		{name: "negative at", in: `{"at": -1, "repo": "a/b", "labels": ["x"], "duration": 1}`, wantErr: "at must be between"},
		{name: "NaN-like at", in: `{"at": "NaN", "repo": "a/b", "labels": ["x"], "duration": 1}`, wantErr: "invalid duration"},
		{name: "huge duration", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1e12}`, wantErr: "duration must be between"},
		{name: "no labels", in: `{"at": 0, "repo": "a/b", "labels": [], "duration": 1}`, wantErr: "labels must list"},
		{name: "blank label", in: `{"at": 0, "repo": "a/b", "labels": [" "], "duration": 1}`, wantErr: "label"},
		{name: "label with a comma", in: `{"at": 0, "repo": "a/b", "labels": ["a,b"], "duration": 1}`, wantErr: "without commas"},
		{name: "bad repo", in: `{"at": 0, "repo": "a/b/c", "labels": ["x"], "duration": 1}`, wantErr: "repo must be"},
		{name: "dot repo", in: `{"at": 0, "repo": "a/..", "labels": ["x"], "duration": 1}`, wantErr: "repo must be"},
		{name: "bad conclusion", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1, "conclusion": "timed_out"}`, wantErr: "conclusion"},
		{name: "run as an object", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1, "run": {}}`, wantErr: "run must be"},
		{name: "line too long", in: `{"at": 0, "repo": "a/b", "labels": ["x"], "duration": 1, "name": "` + strings.Repeat("n", MaxLineBytes) + `"}`, wantErr: "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteParseRoundTrip(t *testing.T) {
	since := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	in := Trace{
		Header: Header{Source: "https://github.com/acme", Since: &since},
		Jobs: []Job{
			{At: 0, Repo: "acme/app", Labels: []string{"self-hosted", "linux"}, Duration: 12.345, Run: "app#1", Pickup: secs(0.5)},
			{At: 3.25, Repo: "acme/lib", Labels: []string{"self-hosted", "gpu"}, Duration: 60, Conclusion: "cancelled"}, //nolint:misspell // GitHub's spelling
		},
	}
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), `{"format":"gantry-trace/v1"`) {
		t.Errorf("the written trace does not start with its header:\n%s", buf.String())
	}
	out, err := Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	in.Header.Format, in.Header.Jobs = Format, 2
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestSummaries(t *testing.T) {
	tr := Trace{Jobs: []Job{
		{At: 0, Labels: []string{"self-hosted", "Linux", "x64"}, Duration: 10},
		{At: 5, Labels: []string{"self-hosted", "linux", "gpu"}, Duration: 10},
		{At: 10, Labels: []string{"SELF-HOSTED"}, Duration: 1}, // starts as the first ends
		{At: 30, Labels: []string{"linux"}, Duration: 5},
	}}
	if got := tr.PeakConcurrency(); got != 2 {
		t.Errorf("PeakConcurrency = %d, want 2", got)
	}
	if diff := cmp.Diff([]string{"gpu", "linux", "x64"}, tr.Labels()); diff != "" {
		t.Errorf("Labels (-want +got):\n%s", diff)
	}
	if got := tr.Span(); got != 35*time.Second {
		t.Errorf("Span = %s, want 35s", got)
	}
}

// The sample traces committed with the project parse.
func TestSampleTraces(t *testing.T) {
	for _, path := range []string{"../run/testdata/sample-trace.jsonl"} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := Parse(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if tr.Header.Jobs != len(tr.Jobs) {
			t.Errorf("%s: header says %d jobs, has %d", path, tr.Header.Jobs, len(tr.Jobs))
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"format": "gantry-trace/v1"}` + "\n" + `{"at": 1, "repo": "a/b", "labels": ["self-hosted"], "duration": 2, "run": 3}`))
	f.Add([]byte(`{"at": "1s", "repo": "b", "labels": ["x", "y"], "duration": "1m", "pickup": 0.5, "conclusion": "failure"}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Parse(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(tr.Jobs) == 0 {
			t.Fatal("Parse accepted a trace without jobs")
		}
		for i, j := range tr.Jobs {
			if err := j.Validate(); err != nil {
				t.Fatalf("Parse accepted an invalid job %+v: %v", j, err)
			}
			if i > 0 && j.At < tr.Jobs[i-1].At {
				t.Fatal("jobs out of order")
			}
		}
		// What Parse accepts, Write writes and Parse reads back the same.
		var buf bytes.Buffer
		if err := Write(&buf, tr); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(&buf)
		if err != nil {
			t.Fatalf("a written trace does not parse: %v\n%s", err, buf.String())
		}
		if len(again.Jobs) != len(tr.Jobs) {
			t.Fatalf("round trip: %d jobs, want %d", len(again.Jobs), len(tr.Jobs))
		}
		_ = tr.PeakConcurrency()
		_ = tr.Labels()
	})
}
