package runner

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var runnerFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gantry_runner_failures_total",
	Help: "Runners that failed, by pool and reason (see docs/troubleshooting.md).",
}, []string{"namespace", "pool", "reason"})

func init() { metrics.Registry.MustRegister(runnerFailures) }

var jobsKilled = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gantry_runner_jobs_killed_total",
	Help: "Jobs killed with their runner by the infrastructure (node lost or deleted, eviction, drainTimeout), by pool and the runner's reason.",
}, []string{"namespace", "pool", "reason"})

func init() { metrics.Registry.MustRegister(jobsKilled) }
