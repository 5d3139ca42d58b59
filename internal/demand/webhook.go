package demand

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// MaxWebhookBody caps a delivery's body. workflow_job payloads are a few KiB; GitHub
// caps any payload at 25 MB. A larger body is refused with 413 before it is read whole.
const MaxWebhookBody = 1 << 20

// Webhook delivery results, the values of the result label of
// gantry_webhook_deliveries_total.
const (
	ResultAccepted     = "accepted"
	ResultDuplicate    = "duplicate"
	ResultIgnored      = "ignored"
	ResultBadSignature = "bad_signature"
	ResultMalformed    = "malformed"
	ResultTooLarge     = "too_large"
	ResultBadMethod    = "bad_method"
	ResultOverloaded   = "overloaded"
	// ResultStandby: a replica that is not the leader, and could not forward the
	// delivery to the leader, answered 503.
	ResultStandby = "standby"
	// ResultForwarded: a standby forwarded the delivery to the leader, which counted
	// it under its own result.
	ResultForwarded = "forwarded"
)

// WebhookDeliveries counts webhook deliveries by result.
var WebhookDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gantry_webhook_deliveries_total",
	Help: "GitHub webhook deliveries received, by result.",
}, []string{"result"})

// WebhookHandler receives GitHub's workflow_job webhooks. It verifies the signature,
// drops duplicate deliveries, answers at once (202) and hands the event to the
// Tracker on its own goroutine, so GitHub's 10-second delivery timeout is never at risk.
//
// Answers: 202 accepted or duplicate; 200 for ping and for events Gantry does not use;
// 401 missing or bad signature; 400 malformed payload; 405 not POST; 413 body too
// large; 503 when its queue is full (GitHub records the failed delivery and resync
// recovers the job).
type WebhookHandler struct {
	secrets func() [][]byte
	tracker *Tracker
	clock   clock.PassiveClock
	log     logr.Logger
	dedup   *deliveryDedup
	queue   chan JobEvent
}

// NewWebhookHandler returns a handler that checks signatures against secrets() (read
// on every delivery, so a rotated Secret applies at once). Call Run to process events.
func NewWebhookHandler(secrets func() [][]byte, tracker *Tracker, clk clock.PassiveClock, log logr.Logger) *WebhookHandler {
	return &WebhookHandler{
		secrets: secrets,
		tracker: tracker,
		clock:   clk,
		log:     log,
		dedup:   newDeliveryDedup(100_000, 24*time.Hour),
		queue:   make(chan JobEvent, 10_000),
	}
}

// Run hands queued events to the Tracker until stop is closed.
func (h *WebhookHandler) Run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case ev := <-h.queue:
			h.tracker.Observe(ev)
		}
	}
}

func (h *WebhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.answer(w, http.StatusMethodNotAllowed, ResultBadMethod, "webhooks must be POSTed")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.answer(w, http.StatusRequestEntityTooLarge, ResultTooLarge, "payload too large")
			return
		}
		h.answer(w, http.StatusBadRequest, ResultMalformed, "cannot read the body")
		return
	}
	if err := VerifySignature(h.secrets(), body, r.Header.Get("X-Hub-Signature-256")); err != nil {
		h.log.V(1).Info("Refusing webhook delivery", "delivery", r.Header.Get("X-GitHub-Delivery"), "reason", err.Error())
		h.answer(w, http.StatusUnauthorized, ResultBadSignature, err.Error())
		return
	}
	event := r.Header.Get("X-GitHub-Event")
	if event != "workflow_job" {
		// ping and every other event: acknowledged, not used.
		h.answer(w, http.StatusOK, ResultIgnored, "event "+event+" is not used")
		return
	}
	ev, err := ParseWorkflowJob(body)
	if errors.Is(err, ErrIgnoredAction) {
		h.answer(w, http.StatusOK, ResultIgnored, err.Error())
		return
	}
	if err != nil {
		h.answer(w, http.StatusBadRequest, ResultMalformed, err.Error())
		return
	}
	ev.DeliveryID = r.Header.Get("X-GitHub-Delivery")
	ev.ObservedAt = h.clock.Now()
	if ev.DeliveryID != "" && !h.dedup.firstSeen(ev.DeliveryID, ev.ObservedAt) {
		h.answer(w, http.StatusAccepted, ResultDuplicate, "duplicate delivery")
		return
	}
	select {
	case h.queue <- ev:
		h.answer(w, http.StatusAccepted, ResultAccepted, "accepted")
	default:
		if ev.DeliveryID != "" {
			h.dedup.forget(ev.DeliveryID)
		}
		h.answer(w, http.StatusServiceUnavailable, ResultOverloaded, "too many deliveries queued; retry later")
	}
}

func (h *WebhookHandler) answer(w http.ResponseWriter, code int, result, msg string) {
	WebhookDeliveries.WithLabelValues(result).Inc()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// deliveryDedup remembers delivery GUIDs for a while, bounded in size.
type deliveryDedup struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	seen  map[string]time.Time
	order []string
}

func newDeliveryDedup(max int, ttl time.Duration) *deliveryDedup {
	return &deliveryDedup{max: max, ttl: ttl, seen: map[string]time.Time{}}
}

// firstSeen records id and reports whether it is new.
func (d *deliveryDedup) firstSeen(id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if at, ok := d.seen[id]; ok && now.Sub(at) < d.ttl {
		return false
	}
	for len(d.order) > 0 && (len(d.seen) >= d.max || now.Sub(d.seen[d.order[0]]) >= d.ttl) {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
	d.seen[id] = now
	d.order = append(d.order, id)
	return true
}

func (d *deliveryDedup) forget(id string) {
	d.mu.Lock()
	delete(d.seen, id)
	d.mu.Unlock()
}
