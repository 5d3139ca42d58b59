package runnerapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConfigRoundTrip(t *testing.T) {
	cfg := Config{URL: "http://127.0.0.1:1", RunnerID: 7, RunnerName: "r", Credential: "c", Ephemeral: true, Labels: []string{"x"}}
	got, err := DecodeConfig(cfg.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if strings.Contains(cfg.String(), "c)") || strings.Contains(cfg.String(), cfg.Credential+" ") {
		t.Errorf("String() leaks the credential: %s", cfg)
	}
}

func TestDecodeConfigErrors(t *testing.T) {
	for _, in := range []string{"", "!!", "bm90IGpzb24=", "e30="} {
		if _, err := DecodeConfig(in); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("DecodeConfig(%q) = %v, want ErrInvalidConfig", in, err)
		}
	}
}

func TestParseJobPath(t *testing.T) {
	tests := []struct {
		path       string
		wantID     int64
		wantAction string
		wantOK     bool
	}{
		{"/_runner/jobs/12/start", 12, "start", true},
		{"/_runner/jobs/12/complete", 12, "complete", true},
		{"/_runner/jobs/12/renew", 12, "renew", true},
		{"/_runner/jobs/12/other", 0, "", false},
		{"/_runner/jobs/x/start", 0, "", false},
		{"/_runner/jobs/0/start", 0, "", false},
		{"/_runner/jobs/12", 0, "", false},
	}
	for _, tc := range tests {
		id, action, ok := ParseJobPath(tc.path)
		if diff := cmp.Diff([]any{tc.wantID, tc.wantAction, tc.wantOK}, []any{id, action, ok}); diff != "" {
			t.Errorf("ParseJobPath(%q) (-want +got):\n%s", tc.path, diff)
		}
	}
}

func FuzzDecodeConfig(f *testing.F) {
	f.Add(Config{URL: "http://x", RunnerID: 1, Credential: "c"}.Encode())
	f.Add("e30=")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := DecodeConfig(s)
		if err == nil && (cfg.URL == "" || cfg.RunnerID <= 0 || cfg.Credential == "") {
			t.Fatalf("DecodeConfig(%q) accepted %+v", s, cfg)
		}
	})
}

func FuzzParseJobPath(f *testing.F) {
	f.Add("/_runner/jobs/1/start")
	f.Fuzz(func(t *testing.T, p string) {
		id, action, ok := ParseJobPath(p)
		if ok && (id <= 0 || (action != "start" && action != "complete" && action != "renew")) {
			t.Fatalf("ParseJobPath(%q) = %d, %q", p, id, action)
		}
	})
}
