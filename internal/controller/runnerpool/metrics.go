package runnerpool

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
)

var (
	poolRunners = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gantry_pool_runners",
		Help: "Runners of a pool by state: desired, pending, idle, busy, failed.",
	}, []string{"namespace", "pool", "state"})
	poolQueuedJobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gantry_pool_queued_jobs",
		Help: "Jobs routed to a pool and not yet picked up.",
	}, []string{"namespace", "pool"})
	poolDegraded = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gantry_pool_degraded",
		Help: "1 while a pool's Degraded condition is True (bad configuration, or runners failing in a row), else 0. The condition's reason says why.",
	}, []string{"namespace", "pool"})
	poolIdleFloor = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gantry_pool_idle_floor_runners",
		Help: "The idle floor in force: spec.minIdle, raised by an open window of spec.warm.schedules or by the prediction; source says which.",
	}, []string{"namespace", "pool", "source"})
	poolArrivalRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gantry_pool_predicted_arrivals_per_second",
		Help: "The job arrival rate spec.warm.predictive sizes the idle floor from, exponentially weighted over recent minutes.",
	}, []string{"namespace", "pool"})
	poolStartTime = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gantry_pool_runner_start_seconds",
		Help: "The runner start time spec.warm.predictive sizes the idle floor from: a Runner created to its runner container running, weighted over recent runners.",
	}, []string{"namespace", "pool"})
	poolPredictedIdle = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gantry_pool_predicted_idle_runners",
		Help: "The idle runners spec.warm.predictive asks for (capped by its maxIdle), whether or not another source asks for more.",
	}, []string{"namespace", "pool"})
	jobPickup = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gantry_job_pickup_seconds",
		Help:    "Time from a job being seen queued to a runner picking it up.",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600},
	}, []string{"namespace", "pool"})
)

func init() {
	metrics.Registry.MustRegister(poolRunners, poolQueuedJobs, poolDegraded, jobPickup,
		poolIdleFloor, poolArrivalRate, poolStartTime, poolPredictedIdle)
}

func recordMetrics(s *state) {
	ns, name := s.pool.Namespace, s.pool.Name
	st := s.pool.Status
	for state, v := range map[string]int32{
		"desired": st.DesiredRunners, "pending": st.PendingRunners, "idle": st.IdleRunners,
		"busy": st.BusyRunners, "failed": st.FailedRunners,
	} {
		poolRunners.WithLabelValues(ns, name, state).Set(float64(v))
	}
	poolQueuedJobs.WithLabelValues(ns, name).Set(float64(st.QueuedJobs))
	degraded := 0.0
	if meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) {
		degraded = 1
	}
	poolDegraded.WithLabelValues(ns, name).Set(degraded)
	recordWarmMetrics(s)
}

// recordWarmMetrics sets the idle floor's gauges: one source at a time, and the
// prediction's only for a predictive pool.
func recordWarmMetrics(s *state) {
	ns, name := s.pool.Namespace, s.pool.Name
	for _, src := range []string{v1alpha1.WarmSourceMinIdle, v1alpha1.WarmSourceSchedule, v1alpha1.WarmSourcePredictive} {
		if src != s.floor.Source {
			poolIdleFloor.DeleteLabelValues(ns, name, src)
		}
	}
	if s.floor.Source != "" {
		poolIdleFloor.WithLabelValues(ns, name, s.floor.Source).Set(float64(s.floor.MinIdle))
	}
	if w := s.pool.Spec.Warm; w == nil || w.Predictive == nil {
		poolArrivalRate.DeleteLabelValues(ns, name)
		poolStartTime.DeleteLabelValues(ns, name)
		poolPredictedIdle.DeleteLabelValues(ns, name)
		return
	}
	poolArrivalRate.WithLabelValues(ns, name).Set(s.floor.inputs.ArrivalsPerSecond)
	poolStartTime.WithLabelValues(ns, name).Set(s.floor.inputs.Start.Seconds())
	poolPredictedIdle.WithLabelValues(ns, name).Set(float64(min(s.floor.predicted, int(s.pool.Spec.Warm.Predictive.MaxIdle))))
}

func forgetMetrics(key demand.PoolKey) {
	poolRunners.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "pool": key.Name})
	poolQueuedJobs.DeleteLabelValues(key.Namespace, key.Name)
	poolDegraded.DeleteLabelValues(key.Namespace, key.Name)
	jobPickup.DeleteLabelValues(key.Namespace, key.Name)
	poolIdleFloor.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "pool": key.Name})
	poolArrivalRate.DeleteLabelValues(key.Namespace, key.Name)
	poolStartTime.DeleteLabelValues(key.Namespace, key.Name)
	poolPredictedIdle.DeleteLabelValues(key.Namespace, key.Name)
}

// ObservePickup records one job's pickup latency; wire it to Tracker.SetPickupObserver.
func ObservePickup(pool demand.PoolKey, waited time.Duration) {
	jobPickup.WithLabelValues(pool.Namespace, pool.Name).Observe(waited.Seconds())
}
