package demand

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// UnmatchedJobs counts queued self-hosted jobs that matched no pool when they were
// queued. No labels: a job's labels and repository are unbounded; the log line names
// them. Register it with the metrics registry (the manager does).
var UnmatchedJobs = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "gantry_demand_unmatched_jobs_total",
	Help: "Queued self-hosted jobs that matched no RunnerPool (see the \"No pool matches job\" log line for its labels, repository and the pools considered).",
})

// maxConsidered bounds the pools named in one unmatched-job log line.
const maxConsidered = 10

// SetLogger sets where the Tracker says that a queued self-hosted job matched no pool.
func (t *Tracker) SetLogger(l logr.Logger) {
	t.mu.Lock()
	t.log = l
	t.mu.Unlock()
}

// selfHosted reports whether a job asks for a self-hosted runner: only those can be
// Gantry's. A job for GitHub's hosted runners (ubuntu-latest) is none of its business.
func selfHosted(j Job) bool {
	return slices.ContainsFunc(j.Labels, func(l string) bool { return normalizeLabel(l) == "self-hosted" })
}

// reportUnmatched logs a queued self-hosted job that matched no pool, with its labels,
// its repository and why each pool did not take it, and counts it. Called without the
// Tracker's lock.
func reportUnmatched(log logr.Logger, j Job, considered []string) {
	UnmatchedJobs.Inc()
	if log.GetSink() == nil {
		return
	}
	log.Info("No pool matches job; it waits until a pool with its labels and scope exists",
		"job", j.ID, "labels", j.Labels, "repository", j.Owner+"/"+j.Repo, "host", j.Host,
		"enterprise", j.Enterprise, "poolsConsidered", considered)
}

// Explain says, for each pool the Router knows (at most maxConsidered, then how many
// more), why it does not take the job: another host or scope, or the job labels it lacks.
func (r *Router) Explain(j Job) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	keys := make([]PoolKey, 0, len(r.pools))
	for k := range r.pools {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b PoolKey) int { return strings.Compare(a.String(), b.String()) })
	out := []string{}
	for i, k := range keys {
		if i == maxConsidered {
			out = append(out, fmt.Sprintf("and %d more", len(keys)-maxConsidered))
			break
		}
		p := r.pools[k]
		out = append(out, k.String()+": "+p.whyNot(j))
	}
	return out
}

// whyNot says why a pool does not take a job, or "matches" when it does.
func (p *routedPool) whyNot(j Job) string {
	if !strings.EqualFold(p.Host, j.Host) {
		return "another host (" + p.Host + ")"
	}
	probe := j
	probe.Labels = nil
	if !p.matches(probe) {
		switch p.Kind {
		case ScopeRepository:
			return "another repository (" + p.Owner + "/" + p.Repo + ")"
		case ScopeOrganization:
			return "another organization (" + p.Owner + ")"
		default:
			return "another enterprise (" + p.Enterprise + "), or the job's payload names none"
		}
	}
	var missing []string
	for _, l := range j.Labels {
		probe.Labels = []string{l}
		if !p.matches(probe) {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return "matches"
	}
	return "lacks labels " + strings.Join(missing, ", ")
}
