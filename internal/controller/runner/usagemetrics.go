package runner

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/internal/usage"
)

// The usage metrics, by pool, repository and workflow (docs/usage.md). Their label
// values are bounded: at most UsageOptions.Repositories repositories and
// UsageOptions.Workflows (repository, workflow) pairs have series of their own, the
// rest are "other"; a runner's time without a job is repository "none". The workflow
// label is empty unless workflows are counted. A series stays until the controller
// restarts: counters of a deleted pool keep their last value.
var (
	usageLabels = []string{"namespace", "pool", "repository", "workflow"}

	usageJobs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_usage_jobs_total",
		Help: "Jobs whose runner ended, by pool, repository and workflow (docs/usage.md).",
	}, usageLabels)
	usageRunnerSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_usage_runner_seconds_total",
		Help: "Seconds runner pods lived, from creation to their runner's end (start and idle time before the job included), by pool, repository and workflow; repository \"none\": runners that ended without a job.",
	}, usageLabels)
	usageCPUSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_usage_requested_cpu_seconds_total",
		Help: "CPU core-seconds runner pods requested over their life (requests × runner-seconds), by pool, repository and workflow.",
	}, usageLabels)
	usageQueueSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gantry_usage_queue_seconds",
		Help:    "How long jobs waited for a runner, GitHub's queued to started, by pool, repository and workflow.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	}, usageLabels)
)

func init() {
	metrics.Registry.MustRegister(usageJobs, usageRunnerSeconds, usageCPUSeconds, usageQueueSeconds)
}

// observeUsage counts a usage record in the metrics, under its bounded labels.
func (r *Reconciler) observeUsage(rec usage.Record) {
	repos, flows := r.usage.bounds(r.Usage)
	repo, workflow := usage.None, ""
	if r.Usage.Workflows > 0 {
		workflow = usage.None
	}
	if rec.HasJob() {
		repo = repos.Value(rec.Repository)
		if r.Usage.Workflows > 0 {
			switch wf := rec.Workflow; {
			case repo == usage.Other:
				workflow = usage.Other // another repository's workflow of the same name is another workflow
			case wf == "":
				workflow = usage.OutcomeUnknown
			default:
				workflow = flows.Value(rec.Repository + "\x00" + wf)
				if workflow != usage.Other {
					workflow = wf
				}
			}
		}
	}
	labels := prometheus.Labels{"namespace": rec.Namespace, "pool": rec.Pool, "repository": repo, "workflow": workflow}
	usageRunnerSeconds.With(labels).Add(rec.RunnerSeconds)
	usageCPUSeconds.With(labels).Add(rec.RequestedCPUSeconds)
	if !rec.HasJob() {
		return
	}
	usageJobs.With(labels).Inc()
	if rec.QueueSeconds != nil {
		usageQueueSeconds.With(labels).Observe(*rec.QueueSeconds)
	}
}
