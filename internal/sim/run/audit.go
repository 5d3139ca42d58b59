package run

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/cluster"
)

// KubeAPI is what the controller asked of the kube-apiserver, as the kube-apiserver
// recorded it (its audit log of the controller's user): exact, by verb and resource,
// watches and the informers' lists included; and the deletes kube-controller-manager's
// garbage collector made of the objects the controller's objects owned.
type KubeAPI struct {
	// Requests counts requests by "verb resource[/subresource]" ("create pods",
	// "patch runners/status"); requests for no resource (discovery) are "verb path".
	Requests map[string]int64 `json:"requests"`
	// WritesPerJob: the controller's create, update, patch, delete and deletecollection
	// requests per job.
	WritesPerJob float64 `json:"writes_per_job"`
	// CollectorDeletes counts the garbage collector's deletes in the run's namespace by
	// "verb resource" ("delete pods"): a Runner's pod and Secret, which the Runner
	// owns, deleted for the controller once the Runner is gone. The GC acts as
	// cluster.CollectorUser.
	CollectorDeletes map[string]int64 `json:"collector_deletes,omitempty"`
	// CollectorDeletesPerJob is their number per job, and AllWritesPerJob
	// WritesPerJob plus CollectorDeletesPerJob: every write made on the controller's
	// behalf.
	CollectorDeletesPerJob float64 `json:"collector_deletes_per_job"`
	AllWritesPerJob        float64 `json:"all_writes_per_job"`
	// UncachedReadsPerJob: get and list requests on resources per job — reads that went
	// to the kube-apiserver instead of the controller's cache, the informers' start-up
	// lists (one per kind and process) included.
	UncachedReadsPerJob float64 `json:"uncached_reads_per_job"`
	// PoolStatusWrites are the updates and patches of runnerpools/status.
	PoolStatusWrites int64 `json:"pool_status_writes"`
	// PoolStatusWritesPerSecond is their mean rate per pool — over every pool of the
	// scenario, written or not — while jobs ran (first job queued → last job done);
	// PoolStatusWritesPeak the highest rate of one pool over any 10 seconds of that
	// time (the writes of the pools' first reconciles, before the workload, are not
	// under load).
	PoolStatusWritesPerSecond float64 `json:"pool_status_writes_per_second"`
	PoolStatusWritesPeak      float64 `json:"pool_status_writes_per_second_peak_10s"`
	// StartupWrites are the controller's writes before the workload started (its pools
	// taken up, their sessions opened, an idle window, a restart), and
	// WorkloadWritesPerJob every write made on its behalf (its own and the garbage
	// collector's) from the workload's start to the end of the log, per job:
	// AllWritesPerJob without the start-up, which follows the pools, not the jobs.
	StartupWrites        int64   `json:"startup_writes"`
	WorkloadWritesPerJob float64 `json:"workload_writes_per_job"`
}

// peakWindow is the window the peak rate of pool status writes is measured over.
const peakWindow = 10 * time.Second

// kubeAudit is the audit log, read.
type kubeAudit struct {
	// requests are the controller's; collector the garbage collector's deletes in
	// the run's namespace.
	requests  map[string]int64
	collector map[string]int64
	// poolStatusWrites are the times of each pool's status writes, by namespace/name.
	poolStatusWrites map[string][]time.Time
	// writes are every write made on the controller's behalf, the garbage collector's
	// deletes in any namespace included, in the log's order (containers.go splits them
	// by burst).
	writes []auditWrite
}

// auditWrite is one write of the audit log.
type auditWrite struct {
	at                 time.Time
	verb, resource, ns string
	collector          bool
}

// auditEvent is the part of an audit.k8s.io/v1 Event counted.
type auditEvent struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	// RequestReceivedTimestamp is when the request came, StageTimestamp when it was
	// answered (a watch: when it ended).
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	ObjectRef                *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
}

// readAudit reads an audit log of JSON lines; "" reads nothing.
func readAudit(path string) (kubeAudit, error) {
	a, _, err := readAuditSplit(path, time.Time{})
	return a, err
}

// readAuditSplit reads an audit log of JSON lines in two: the requests received up to
// at, and those received after it (all in the first when at is zero); "" reads nothing.
// A watch is the part's that opened it, whenever it ended.
func readAuditSplit(path string, at time.Time) (before, after kubeAudit, err error) {
	before, after = newKubeAudit(), newKubeAudit()
	if path == "" {
		return before, after, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return before, after, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return before, after, fmt.Errorf("reading the audit log %s: %w", path, err)
		}
		received := ev.RequestReceivedTimestamp
		if received.IsZero() {
			received = ev.StageTimestamp
		}
		if !at.IsZero() && received.After(at) {
			after.add(ev)
		} else {
			before.add(ev)
		}
	}
	if err := sc.Err(); err != nil {
		return before, after, fmt.Errorf("reading the audit log %s: %w", path, err)
	}
	return before, after, nil
}

func newKubeAudit() kubeAudit {
	return kubeAudit{requests: map[string]int64{}, collector: map[string]int64{}, poolStatusWrites: map[string][]time.Time{}}
}

func (a *kubeAudit) add(ev auditEvent) {
	if ev.User.Username == cluster.CollectorUser {
		if ev.ObjectRef != nil && isWrite(ev.Verb) {
			a.writes = append(a.writes, auditWrite{at: ev.StageTimestamp, verb: ev.Verb, resource: ev.ObjectRef.Resource, ns: ev.ObjectRef.Namespace, collector: true})
			if ev.ObjectRef.Namespace == namespace {
				a.collector[ev.Verb+" "+ev.ObjectRef.Resource]++
			}
		}
		return
	}
	if ev.ObjectRef == nil || ev.ObjectRef.Resource == "" {
		a.requests[ev.Verb+" "+ev.RequestURI]++
		return
	}
	res := ev.ObjectRef.Resource
	if ev.ObjectRef.Subresource != "" {
		res += "/" + ev.ObjectRef.Subresource
	}
	a.requests[ev.Verb+" "+res]++
	if isWrite(ev.Verb) {
		a.writes = append(a.writes, auditWrite{at: ev.StageTimestamp, verb: ev.Verb, resource: res, ns: ev.ObjectRef.Namespace})
	}
	if res == "runnerpools/status" && isWrite(ev.Verb) {
		k := ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
		a.poolStatusWrites[k] = append(a.poolStatusWrites[k], ev.StageTimestamp)
	}
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// kubeAPI sums the audit for a run of jobs on pools pools that ran from start to end.
func (a kubeAudit) kubeAPI(jobs, pools int, start, end time.Time) *KubeAPI {
	k := &KubeAPI{Requests: a.requests}
	var writes, reads int64
	for key, n := range a.requests {
		verb, res := splitKey(key)
		switch {
		case isWrite(verb):
			writes += n
		case (verb == "get" || verb == "list") && res != "" && res[0] != '/':
			reads += n
		}
	}
	var collected int64
	for _, n := range a.collector {
		collected += n
	}
	if collected > 0 {
		k.CollectorDeletes = a.collector
	}
	if jobs > 0 {
		k.WritesPerJob = round2(float64(writes) / float64(jobs))
		k.UncachedReadsPerJob = round2(float64(reads) / float64(jobs))
		k.CollectorDeletesPerJob = round2(float64(collected) / float64(jobs))
		k.AllWritesPerJob = round2(float64(writes+collected) / float64(jobs))
	}
	var sum float64
	for _, ts := range a.poolStatusWrites {
		k.PoolStatusWrites += int64(len(ts))
		sum += meanRate(ts, start, end)
		k.PoolStatusWritesPeak = math.Max(k.PoolStatusWritesPeak, peakRate(within(ts, start, end), peakWindow))
	}
	if n := max(pools, len(a.poolStatusWrites)); n > 0 {
		k.PoolStatusWritesPerSecond = round2(sum / float64(n))
	}
	if !start.IsZero() {
		var startup, during int64
		for _, w := range a.writes {
			switch {
			case w.collector && w.ns != namespace: // as CollectorDeletes: the run's namespace
			case w.at.Before(start):
				if !w.collector {
					startup++
				}
			default: // to the end of the log: the controller is stopped before it is read
				during++
			}
		}
		k.StartupWrites = startup
		if jobs > 0 {
			k.WorkloadWritesPerJob = round2(float64(during) / float64(jobs))
		}
	}
	return k
}

// window counts, by "verb resource", the controller's writes and the garbage
// collector's deletes in the run's namespace made from from to to (both included).
func (a kubeAudit) window(from, to time.Time) (writes, collector map[string]int64) {
	writes, collector = map[string]int64{}, map[string]int64{}
	for _, w := range a.writes {
		switch {
		case w.at.Before(from) || w.at.After(to):
		case w.collector:
			if w.ns == namespace {
				collector[w.verb+" "+w.resource]++
			}
		default:
			writes[w.verb+" "+w.resource]++
		}
	}
	return writes, collector
}

// writesFrom are every write made on the controller's behalf from from to the end of
// the log, by "verb resource", the garbage collector's deletes in the run's namespace
// as "collector verb resource".
func writesFrom(a kubeAudit, from time.Time) map[string]int64 {
	requests, collector := a.window(from, time.Now().Add(24*time.Hour))
	out := map[string]int64{}
	for key, n := range requests {
		if verb, _ := splitKey(key); isWrite(verb) {
			out[key] += n
		}
	}
	for key, n := range collector {
		out["collector "+key] += n
	}
	return out
}

func splitKey(key string) (verb, rest string) {
	verb, rest, _ = strings.Cut(key, " ")
	return verb, rest
}

// formatCounts writes counts largest first: "patch runners/status 2000, create pods 500".
func formatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// meanRate is how many of ts fall in [from, to], per second of it.
func meanRate(ts []time.Time, from, to time.Time) float64 {
	secs := to.Sub(from).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(len(within(ts, from, to))) / secs
}

// within returns the times of ts from from to to, both included.
func within(ts []time.Time, from, to time.Time) []time.Time {
	out := make([]time.Time, 0, len(ts))
	for _, t := range ts {
		if !t.Before(from) && !t.After(to) {
			out = append(out, t)
		}
	}
	return out
}

// peakRate is the most of ts in any window of length w (closed at its start, open at
// its end), per second.
func peakRate(ts []time.Time, w time.Duration) float64 {
	s := slices.Clone(ts)
	sort.Slice(s, func(i, j int) bool { return s[i].Before(s[j]) })
	best, lo := 0, 0
	for hi := range s {
		for s[hi].Sub(s[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return round2(float64(best) / w.Seconds())
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
