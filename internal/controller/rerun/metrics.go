package rerun

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// What became of a job killed by the infrastructure: the result label of
// gantry_rerun_jobs_total.
const (
	// ResultRerun: Gantry re-ran it.
	ResultRerun = "Rerun"
	// ResultAlreadyRerun: its run already had a newer attempt that runs it again (a
	// person re-ran it, or Gantry did before a restart took the record of it).
	ResultAlreadyRerun = "AlreadyRerun"
	// ResultNotFailed: GitHub concluded the job otherwise than failure (it finished
	// after all, or was canceled): nothing to re-run.
	ResultNotFailed = "NotFailed"
	// ResultRefused: GitHub will not re-run it (its run was re-run 50 times), or Gantry
	// gave up waiting for its run to complete.
	ResultRefused = "Refused"
	// ResultAbandoned: its pool, its run or its job is gone before it could be re-run.
	ResultAbandoned = "Abandoned"
	// ResultUnknownRun: GitHub never said which job the runner took: nothing to re-run.
	ResultUnknownRun = "UnknownRun"
	// ResultNotOptedIn: the pool does not re-run killed jobs (spec.disruption.rerun
	// Never): a job it could have saved.
	ResultNotOptedIn = "NotOptedIn"
)

// Events on the pool.
const (
	// EventJobKilled (Warning): a runner failed for a reason of the infrastructure and
	// killed the job it ran; the message says whether Gantry re-runs it.
	EventJobKilled = "JobKilled"
	// EventJobRerun (Normal): Gantry re-ran a killed job.
	EventJobRerun = "JobRerun"
	// EventJobNotRerun (Warning): a killed job was not re-run, and why.
	EventJobNotRerun = "JobNotRerun"
	// EventRerunNotPermitted (Warning): GitHub refused to show or re-run the job's run
	// to the pool's credentials: they need the Actions write permission.
	EventRerunNotPermitted = "RerunNotPermitted"
)

var rerunJobs = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gantry_rerun_jobs_total",
	Help: "Jobs killed under their runner by the infrastructure, by pool, reason (the runner's) and what became of them: " +
		"Rerun, AlreadyRerun, NotFailed, Refused, Abandoned, UnknownRun, or NotOptedIn (the pool does not re-run: a job it could have saved).",
}, []string{"namespace", "pool", "reason", "result"})

var githubCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gantry_rerun_github_requests_total",
	Help: "GitHub requests made to re-run killed jobs, by kind: get_run (answered 304 Not Modified or not), list_jobs, rerun_job, rerun_failed_jobs.",
}, []string{"kind"})

func init() {
	metrics.Registry.MustRegister(rerunJobs, githubCalls)
	for _, kind := range []string{"get_run", "list_jobs", "rerun_job", "rerun_failed_jobs"} {
		githubCalls.WithLabelValues(kind) // the series exist, at 0, from the start
	}
}

// Count counts a killed job's result.
func Count(namespace, pool, reason, result string) {
	rerunJobs.WithLabelValues(namespace, pool, reason, result).Inc()
}

// CountNotOptedIn counts a job killed in a pool that does not re-run: one it could have
// saved.
func CountNotOptedIn(namespace, pool, reason string) {
	Count(namespace, pool, reason, ResultNotOptedIn)
}
