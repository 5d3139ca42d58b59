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
			passed, err := run(dir, out, nil, &text)
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
	if _, err := run(t.TempDir(), filepath.Join(t.TempDir(), "r.json"), nil, &bytes.Buffer{}); err == nil {
		t.Error("no figures: want an error")
	}
}

func TestRunFoldsInDisruptions(t *testing.T) {
	dir := t.TempDir()
	fig := `{"scenario":"TestA","finished":true,"passed":true,"load":{"jobs":10},"lost":{}}`
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(fig), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		report     string
		wantPassed bool
		wantLost   lost
	}{
		{"every killed job green on its re-run",
			`{"scenario":"disruptions-short","finished":true,"jobs_total":60,"busy_runners_killed":3,"faults":{"injections":[{},{}]},
			  "disruptions":{"busy_runners_killed_by_voluntary_disruption":0,"jobs_killed_by_infrastructure_total":3,"jobs_rerun_green":3}}`,
			true, lost{}},
		{"before re-runs: busy runners killed by a drain, killed jobs never re-run",
			`{"scenario":"disruptions-short","finished":true,"jobs_total":60,"busy_runners_killed":5,
			  "disruptions":{"busy_runners_killed_by_voluntary_disruption":4,"jobs_killed_by_infrastructure_total":6,"jobs_rerun_green":0,"jobs_rerun_twice":0}}`,
			false, lost{BusyRunnersKilled: 4, Jobs: 6}},
		{"a job re-run twice",
			`{"scenario":"disruptions-short","finished":true,"jobs_total":60,
			  "disruptions":{"jobs_killed_by_infrastructure_total":2,"jobs_rerun_green":2,"jobs_rerun_twice":1}}`,
			false, lost{Jobs: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := filepath.Join(t.TempDir(), "report.json")
			if err := os.WriteFile(rep, []byte(tt.report), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "reliability.json")
			var text bytes.Buffer
			passed, err := run(dir, out, []string{rep}, &text)
			if err != nil {
				t.Fatal(err)
			}
			if passed != tt.wantPassed || !strings.Contains(text.String(), "sim run --scenario disruptions-short") {
				t.Errorf("passed = %v, want %v:\n%s", passed, tt.wantPassed, text.String())
			}
			var doc struct {
				Totals struct {
					Lost lost `json:"lost"`
				} `json:"totals"`
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Totals.Lost != tt.wantLost {
				t.Errorf("lost %+v, want %+v", doc.Totals.Lost, tt.wantLost)
			}
		})
	}
}
