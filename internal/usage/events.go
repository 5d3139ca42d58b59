package usage

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FromEvents reads the usage records of the RunnerUsage events in namespace ("": every
// namespace) whose runner ended within [from, to], and how many events held no readable
// record. The API server keeps events for its --event-ttl (one hour by default): older
// records are gone from the cluster, and only the log lines and metrics keep them.
func FromEvents(ctx context.Context, kube client.Reader, namespace string, from, to time.Time) ([]Record, int, error) {
	var list corev1.EventList
	opts := []client.ListOption{client.MatchingFields{"reason": EventReason}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := kube.List(ctx, &list, opts...); err != nil {
		return nil, 0, fmt.Errorf("listing the %s events: %w", EventReason, err)
	}
	var out []Record
	bad := 0
	for _, ev := range list.Items {
		if ev.Reason != EventReason {
			continue
		}
		rec, err := Parse([]byte(ev.Annotations[Annotation]))
		if err != nil {
			bad++
			continue
		}
		if rec.EndedAt.Before(from) || rec.EndedAt.After(to) {
			continue
		}
		out = append(out, rec)
	}
	return out, bad, nil
}

// SummarizeEvents is Summarize of the records read from events over [from, to]: its
// window starts at the oldest record found (events expire), or at from without one.
func SummarizeEvents(recs []Record, from, to time.Time) Summary {
	s := Summarize(recs)
	s.Source = "the cluster's " + EventReason + " events"
	if s.Records == 0 {
		s.From = from
	}
	s.To = to
	return s
}
