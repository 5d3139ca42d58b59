package resync

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/internal/github"
)

// Lookback is how far back the first pass after a start reads a GitHub App's delivery
// log: deliveries that failed while no controller was running are redelivered.
const Lookback = time.Hour

// maxDeliveryPages bounds one pass's reading of a delivery log (100 per page).
const maxDeliveryPages = 10

var redelivered = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "gantry_resync_redeliveries_total",
	Help: "Failed workflow_job webhook deliveries Gantry asked GitHub to send again.",
})

func init() { metrics.Registry.MustRegister(redelivered) }

// deliveryLog remembers, per App credential, how far its delivery log has been read.
type deliveryLog struct {
	mu       sync.Mutex
	readUpTo map[types.NamespacedName]time.Time
}

// redeliverFailed asks GitHub to send again every workflow_job delivery of the App
// that failed (no 2xx answer on any attempt) since the last pass (or Lookback after a
// start). Not an App credential: nothing to do. It costs one call per page read and
// one per redelivery.
func (r *Resync) redeliverFailed(ctx context.Context, gh github.Client, sc github.Scope, creds types.NamespacedName) error {
	now := r.Clock.Now()
	r.log.mu.Lock()
	if r.log.readUpTo == nil {
		r.log.readUpTo = map[types.NamespacedName]time.Time{}
	}
	since, ok := r.log.readUpTo[creds]
	r.log.mu.Unlock()
	if !ok {
		since = now.Add(-Lookback)
	}
	// A margin of one interval: an attempt in flight during the last pass shows later.
	since = since.Add(-r.Interval)

	failed := map[string]github.HookDelivery{} // GUID → its newest failed attempt
	ok2xx := map[string]bool{}
	cursor := ""
	for page := 0; page < maxDeliveryPages; page++ {
		p, err := gh.ListHookDeliveries(ctx, sc, cursor)
		if github.IsUnauthorized(err) && page == 0 {
			return nil // PAT credentials: no App delivery log
		}
		if err != nil {
			return err
		}
		older := false
		for _, d := range p.Deliveries {
			if d.DeliveredAt.Before(since) {
				older = true
				continue
			}
			if d.Event != "workflow_job" {
				continue
			}
			if d.StatusCode/100 == 2 {
				ok2xx[d.GUID] = true
			} else if _, seen := failed[d.GUID]; !seen {
				failed[d.GUID] = d
			}
		}
		if older || p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	logger := log.FromContext(ctx).WithName("resync")
	for guid, d := range failed {
		if ok2xx[guid] {
			continue
		}
		logger.V(1).Info("Asking GitHub to redeliver a failed webhook", "delivery", guid, "action", d.Action)
		if err := gh.RedeliverHookDelivery(ctx, sc, d.ID); err != nil && !github.IsNotFound(err) {
			return err
		}
		redelivered.Inc()
	}
	r.log.mu.Lock()
	r.log.readUpTo[creds] = now
	r.log.mu.Unlock()
	return nil
}
