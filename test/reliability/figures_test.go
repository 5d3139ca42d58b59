package reliability

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// figures are what one scenario measured. With GANTRY_RELIABILITY_OUT set they are
// written to $GANTRY_RELIABILITY_OUT/<test>.json for hack/reliability; the fields are
// documented in docs/reliability.md.
type figures struct {
	t  *testing.T
	mu sync.Mutex

	Scenario    string    `json:"scenario"`
	Scale       int       `json:"scale"`
	StartedAt   time.Time `json:"started_at"`
	WallSeconds float64   `json:"wall_seconds"`
	// LoadAverage is /proc/loadavg's 1-minute figure at the start and at the end.
	LoadAverage [2]float64 `json:"load_average"`
	Finished    bool       `json:"finished"`
	Passed      bool       `json:"passed"`

	Load      load               `json:"load"`
	Faults    []fault            `json:"faults"`
	BadInputs map[string]int     `json:"bad_inputs"`
	Lost      lost               `json:"lost"`
	Measures  map[string]float64 `json:"measures"`
	Notes     []string           `json:"notes,omitempty"`

	written bool
}

type load struct {
	Jobs                int            `json:"jobs"`
	ControllerReplicas  int            `json:"controller_replicas"`
	ControllerStarts    int            `json:"controller_starts"`
	RunnersCreated      int            `json:"runners_created"`
	PeakRunners         int            `json:"peak_runners"`
	RunnersFailed       map[string]int `json:"runners_failed"`
	ObjectsScanned      int            `json:"objects_scanned"`
	LogLinesScanned     int            `json:"log_lines_scanned"`
	MetricsLinesScanned int            `json:"metrics_lines_scanned"`
	AuditEventsChecked  int            `json:"audit_events_checked"`
	ReadOnlyRootFS      bool           `json:"read_only_root_fs"`
}

// fault is one injected fault: what, how often or how long, and whether the system
// met every invariant through it.
type fault struct {
	Kind     string  `json:"kind"`
	Count    int     `json:"count"`
	Seconds  float64 `json:"seconds,omitempty"`
	Survived bool    `json:"survived"`
	Detail   string  `json:"detail,omitempty"`
}

// lost is what must be zero.
type lost struct {
	// Jobs queued on GitHub that never completed.
	Jobs int `json:"jobs"`
	// DuplicateRunners: a second pod or registration for a Runner, or a runner that
	// ran two jobs.
	DuplicateRunners int `json:"duplicate_runners"`
	// BusyRunnersKilled: jobs that failed because their runner died, other than those
	// whose pod the test itself killed (eviction, node loss).
	BusyRunnersKilled int `json:"busy_runners_killed"`
	// SecretsLeaked: places outside Secrets where a secret was found.
	SecretsLeaked int `json:"secrets_leaked"`
	// Forbidden: requests of the controller the API server refused for lack of RBAC.
	Forbidden int `json:"forbidden"`
	// Leftovers: Runners, pods and GitHub registrations left after the pool drained
	// (failed runners, kept visible by design, excluded).
	Leftovers int `json:"leftovers"`
}

func newFigures(t *testing.T) *figures {
	f := &figures{
		t: t, Scenario: t.Name(), Scale: scale(), StartedAt: time.Now(),
		BadInputs: map[string]int{}, Measures: map[string]float64{},
		Load: load{RunnersFailed: map[string]int{}, ReadOnlyRootFS: cp.sandbox},
	}
	f.LoadAverage[0] = loadAverage()
	t.Cleanup(func() {
		if !f.written {
			f.write()
		}
	})
	return f
}

func (f *figures) addJobs(n int) {
	f.mu.Lock()
	f.Load.Jobs += n
	f.mu.Unlock()
}

func (f *figures) measure(name string, v float64) {
	f.mu.Lock()
	f.Measures[name] = v
	f.mu.Unlock()
}

func (f *figures) fault(fl fault) {
	f.mu.Lock()
	f.Faults = append(f.Faults, fl)
	f.mu.Unlock()
}

func (f *figures) badInput(kind string, n int) {
	f.mu.Lock()
	f.BadInputs[kind] += n
	f.mu.Unlock()
}

// write records the figures: in the test log always, to a file when asked.
func (f *figures) write() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written = true
	f.WallSeconds = time.Since(f.StartedAt).Seconds()
	f.LoadAverage[1] = loadAverage()
	f.Passed = !f.t.Failed()
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		f.t.Errorf("encoding figures: %v", err)
		return
	}
	var keys []string
	for k := range f.Measures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ms []string
	for _, k := range keys {
		ms = append(ms, k+"="+strconv.FormatFloat(f.Measures[k], 'f', -1, 64))
	}
	f.t.Logf("figures: jobs %d, lost %+v, faults %d, bad inputs %v, %s", f.Load.Jobs, f.Lost, len(f.Faults), f.BadInputs, strings.Join(ms, " "))
	dir := os.Getenv("GANTRY_RELIABILITY_OUT")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Errorf("writing figures: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, sanitize(f.t.Name())+".json"), append(b, '\n'), 0o644); err != nil {
		f.t.Errorf("writing figures: %v", err)
	}
}

func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// metricValue sums the samples of metric name whose labels include want, in a
// Prometheus text exposition.
func metricValue(text, name string, want map[string]string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		metric, labels, _ := strings.Cut(series, "{")
		if metric != name {
			continue
		}
		got := parseLabels(strings.TrimSuffix(labels, "}"))
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		if f, err := strconv.ParseFloat(strings.Fields(value)[0], 64); err == nil {
			sum += f
		}
	}
	return sum
}

func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		v, rest2, _ := strings.Cut(rest, `"`)
		out[strings.TrimPrefix(k, ",")] = v
		s = strings.TrimPrefix(rest2, ",")
	}
	return out
}
