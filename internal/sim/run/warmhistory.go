package run

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// WarmHistory is a predictive pool's past, written into its status before the run
// (Scenario.WarmHistory). Once the workload's jobs are done the pool's prediction is
// turned off (maxIdle 0, stopWarm) so that it drains: its history would keep it warm to
// the end of the hour.
type WarmHistory struct {
	// JobsPerMinute is the arrival rate of the run's hour on past days.
	JobsPerMinute float64 `json:"jobs_per_minute"`
	// Start is the runner start time the pool measured.
	Start time.Duration `json:"start"`
}

// warmHistoryWait bounds the wait for the idle runners the history asks for.
const warmHistoryWait = 2 * time.Minute

// seedWarmHistory writes h into status.warm.predictive of each pool, as a controller
// that saw those days would have: hourOfDay with h's rate at now's hour (UTC), every
// other hour observed quiet, no recent traffic. It runs before the
// controller starts, which reads it as after a restart.
func seedWarmHistory(ctx context.Context, c client.Client, pools []string, h WarmHistory, now time.Time) error {
	hours := make([]string, 24)
	for i := range hours {
		hours[i] = "0.00"
	}
	rate := strconv.FormatFloat(h.JobsPerMinute, 'f', 2, 64)
	hours[now.UTC().Hour()] = rate
	at := metav1.NewTime(now.Truncate(time.Second))
	for _, name := range pools {
		pool := &v1alpha1.RunnerPool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pool); err != nil {
			return err
		}
		pool.Status.Warm = &v1alpha1.WarmStatus{Predictive: &v1alpha1.PredictiveWarmStatus{
			ArrivalsPerMinute: "0.0", HourOfDay: hours, ObservedAt: &at,
			StartSeconds: strconv.FormatFloat(h.Start.Seconds(), 'f', 2, 64),
		}}
		if err := c.Status().Update(ctx, pool); err != nil {
			return fmt.Errorf("writing pool %s's warm history: %w", name, err)
		}
	}
	return nil
}

// waitWarm waits until each pool keeps the idle runners its floor asks for
// (status.warm.minIdle, at least one) and they are idle, or timeout; it says how long
// that took. The wait is not part of the workload's figures.
func waitWarm(ctx context.Context, c client.Client, pools []string, timeout time.Duration, out io.Writer) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ready, floor := 0, 0
		for _, name := range pools {
			pool := &v1alpha1.RunnerPool{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pool); err != nil {
				break
			}
			if w := pool.Status.Warm; w != nil && w.MinIdle > 0 && pool.Status.IdleRunners >= w.MinIdle {
				ready++
			}
			if w := pool.Status.Warm; w != nil {
				floor += int(w.MinIdle)
			}
		}
		if ready == len(pools) {
			fmt.Fprintf(out, "The pools' warm history asks for %d idle runners: all idle %.1fs after the controller started\n", floor, time.Since(start).Seconds())
			return
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "The pools' warm history asks for %d idle runners: not all idle within %s; the workload starts anyway\n", floor, timeout)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stopWarm sets each pool's spec.warm.predictive.maxIdle to 0: the prediction is
// reported and no longer applied, so a pool whose history keeps it warm drains.
func stopWarm(ctx context.Context, c client.Client, pools []string) error {
	for _, name := range pools {
		pool := &v1alpha1.RunnerPool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pool); err != nil {
			return err
		}
		if pool.Spec.Warm == nil || pool.Spec.Warm.Predictive == nil {
			continue
		}
		patch := client.MergeFrom(pool.DeepCopy())
		pool.Spec.Warm.Predictive.MaxIdle = 0
		if err := c.Patch(ctx, pool, patch); err != nil {
			return fmt.Errorf("turning pool %s's prediction off: %w", name, err)
		}
	}
	return nil
}
