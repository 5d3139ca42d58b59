package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunTotalsAndVerdict(t *testing.T) {
	tests := []struct {
		name       string
		figures    []string
		wantPassed bool
		wantLost   lost
		wantInText []string
	}{
		{
			name: "all zero",
			figures: []string{
				`{"scenario":"TestA","finished":true,"passed":true,"load":{"jobs":10},"faults":[{"kind":"x","count":1,"survived":true}],"bad_inputs":{"forged":5},"lost":{}}`,
				`{"scenario":"TestB","finished":true,"passed":true,"load":{"jobs":5},"faults":[],"lost":{}}`,
			},
			wantPassed: true,
			wantInText: []string{"TOTAL", "15 jobs", "1/1", "ok"},
		},
		{
			name: "a leak fails the run",
			figures: []string{
				`{"scenario":"TestA","finished":true,"passed":true,"load":{"jobs":10},"lost":{"secrets_leaked":2}}`,
				`{"scenario":"TestB","finished":true,"passed":true,"load":{"jobs":5},"lost":{"jobs":1}}`,
			},
			wantLost:   lost{SecretsLeaked: 2, Jobs: 1},
			wantInText: []string{"FAILED"},
		},
		{
			name:       "an unfinished scenario fails the run",
			figures:    []string{`{"scenario":"TestA","finished":false,"passed":false,"load":{"jobs":3},"lost":{}}`},
			wantInText: []string{"FAILED"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, f := range tt.figures {
				if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".json"), []byte(f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := filepath.Join(dir, "out", "reliability.json")
			var text bytes.Buffer
			passed, err := run(dir, out, "", &text)
			if err != nil {
				t.Fatal(err)
			}
			if passed != tt.wantPassed {
				t.Errorf("passed = %v, want %v\n%s", passed, tt.wantPassed, text.String())
			}
			for _, want := range tt.wantInText {
				if !strings.Contains(text.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, text.String())
				}
			}
			var doc struct {
				Passed bool `json:"passed"`
				Totals struct {
					Lost lost `json:"lost"`
				} `json:"totals"`
				Scenarios []json.RawMessage `json:"scenarios"`
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Passed != tt.wantPassed || doc.Totals.Lost != tt.wantLost || len(doc.Scenarios) != len(tt.figures) {
				t.Errorf("reliability.json: passed %v, lost %+v, %d scenarios; want %v, %+v, %d", doc.Passed, doc.Totals.Lost, len(doc.Scenarios),
					tt.wantPassed, tt.wantLost, len(tt.figures))
			}
		})
	}
}

func TestRunWithoutFiguresIsAnError(t *testing.T) {
	if _, err := run(t.TempDir(), filepath.Join(t.TempDir(), "r.json"), "", &bytes.Buffer{}); err == nil {
		t.Error("no figures: want an error")
	}
}
