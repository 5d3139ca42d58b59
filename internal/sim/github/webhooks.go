package github

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // X-Hub-Signature is SHA-1 by GitHub's definition
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// delivery is one attempt to deliver a webhook; a redelivery is a new delivery with
// the same GUID. Its result fields are guarded by Sim.mu.
type delivery struct {
	id         int64
	guid       string
	hook       *hook
	event      string
	action     string
	instID     int64
	repoID     int64
	redelivery bool
	payload    []byte
	created    time.Time
	delayed    bool

	done        bool
	deliveredAt time.Time
	duration    float64
	status      string
	statusCode  int
	reqHeaders  map[string]string
	respHeaders map[string]string
	respBody    string
}

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// hooksForJob are the hooks that receive workflow_job events of repository r, with
// the installation each App hook delivers for.
func (st *state) hooksForJob(r *repo) (hooks []*hook, inst []*installation) {
	for _, h := range r.hooks {
		hooks, inst = append(hooks, h), append(inst, nil)
	}
	for _, h := range r.org.hooks {
		hooks, inst = append(hooks, h), append(inst, nil)
	}
	for _, in := range st.installs {
		if in.app.hook != nil && in.covers(r) {
			hooks, inst = append(hooks, in.app.hook), append(inst, in)
		}
	}
	return hooks, inst
}

// emitJobLocked records a workflow_job delivery for every hook that wants it and
// leaves them in the outbox, sent once the lock is released.
func (s *Sim) emitJobLocked(j *job, action string) {
	s.scaleSetEventLocked(j, action)
	rp := j.repo()
	hooks, insts := s.st.hooksForJob(rp)
	if len(hooks) == 0 {
		return
	}
	u := urls{api: s.publicURL(), html: s.publicURL()}
	payload := map[string]any{
		"action":       action,
		"workflow_job": s.st.jobJSON(u, j),
		"repository":   repoJSON(u, rp, true),
		"organization": orgJSON(u, rp.org),
		"sender":       userJSON(u, j.run.actor, 1, "User"),
	}
	if rp.org.ent != nil {
		payload["enterprise"] = enterpriseJSON(u, rp.org.ent)
	}
	for i, h := range hooks {
		if !h.wants("workflow_job") {
			continue
		}
		d := &delivery{id: s.st.newID(), guid: newGUID(), hook: h, event: "workflow_job", action: action,
			repoID: rp.id, created: s.now()}
		if in := insts[i]; in != nil {
			d.instID = in.id
			payload["installation"] = map[string]any{"id": in.id, "node_id": nodeID("Installation", in.id)}
		} else {
			delete(payload, "installation")
		}
		d.payload, _ = json.Marshal(payload)
		s.recordDeliveryLocked(d)
	}
}

func (s *Sim) recordDeliveryLocked(d *delivery) {
	d.hook.deliveries = append(d.hook.deliveries, d)
	s.st.deliveries[d.id] = d
	s.outbox = append(s.outbox, d)
}

// webhookSender posts deliveries from a bounded queue with a fixed pool of workers.
type webhookSender struct {
	s       *Sim
	queue   chan *delivery
	client  *http.Client
	timeout time.Duration
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	pending atomic.Int64
}

func newWebhookSender(s *Sim, opts Options) *webhookSender {
	ws := &webhookSender{s: s, queue: make(chan *delivery, opts.WebhookQueueSize), client: opts.WebhookClient,
		timeout: opts.WebhookTimeout, stop: make(chan struct{})}
	if ws.client == nil {
		ws.client = &http.Client{Timeout: opts.WebhookTimeout}
	}
	for range opts.WebhookWorkers {
		ws.wg.Add(1)
		go ws.work()
	}
	return ws
}

func (ws *webhookSender) close() {
	ws.once.Do(func() { close(ws.stop) })
	ws.wg.Wait()
}

// enqueue hands d to the workers; a full queue fails the delivery at once.
func (ws *webhookSender) enqueue(d *delivery) {
	ws.pending.Add(1)
	select {
	case ws.queue <- d:
	default:
		ws.finish(d, 0, "We couldn’t deliver this payload: the simulator's delivery queue is full", nil, nil, "", 0)
	}
}

func (ws *webhookSender) work() {
	defer ws.wg.Done()
	for {
		select {
		case <-ws.stop:
			return
		case d := <-ws.queue:
			ws.deliver(d)
		}
	}
}

// signature returns the X-Hub-Signature-256 value of body under secret.
func signature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func signatureSHA1(secret string, body []byte) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write(body)
	return "sha1=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether sig (an X-Hub-Signature-256 value) is the
// signature of body under secret, in constant time.
func VerifySignature(secret string, body []byte, sig string) bool {
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

func (ws *webhookSender) deliver(d *delivery) {
	drop, delay := ws.s.faults.webhook()
	if delay > 0 && !d.delayed {
		d.delayed = true
		t := ws.s.clk.NewTimer(delay)
		go func() {
			defer t.Stop()
			select {
			case <-t.C():
				select {
				case ws.queue <- d:
				case <-ws.stop:
				}
			case <-ws.stop:
			}
		}()
		return
	}
	h := d.hook
	headers := map[string]string{
		"Accept":                                 "*/*",
		"Content-Type":                           "application/json",
		"User-Agent":                             "GitHub-Hookshot/sim",
		"X-GitHub-Delivery":                      d.guid,
		"X-GitHub-Event":                         d.event,
		"X-GitHub-Hook-ID":                       itoa(h.id),
		"X-Hub-Signature":                        signatureSHA1(h.secret, d.payload),
		"X-Hub-Signature-256":                    signature(h.secret, d.payload),
		"X-GitHub-Hook-Installation-Target-ID":   "",
		"X-GitHub-Hook-Installation-Target-Type": "",
	}
	switch {
	case h.app != nil:
		headers["X-GitHub-Hook-Installation-Target-ID"] = itoa(h.app.id)
		headers["X-GitHub-Hook-Installation-Target-Type"] = "integration"
	case h.repo != nil:
		headers["X-GitHub-Hook-Installation-Target-ID"] = itoa(h.repo.id)
		headers["X-GitHub-Hook-Installation-Target-Type"] = "repository"
	default:
		headers["X-GitHub-Hook-Installation-Target-ID"] = itoa(h.org.id)
		headers["X-GitHub-Hook-Installation-Target-Type"] = "organization"
	}
	logged := make(map[string]string, len(headers))
	for k, v := range headers {
		if !strings.HasPrefix(k, "X-Hub-Signature") { // the log never shows signatures
			logged[k] = v
		}
	}
	if h.secret == "" {
		delete(headers, "X-Hub-Signature")
		delete(headers, "X-Hub-Signature-256")
	}
	if drop {
		ws.finish(d, 0, DeliveryStatusDropped, logged, nil, "", 0)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ws.timeout)
	defer cancel()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(d.payload))
	if err != nil {
		ws.finish(d, 0, "We couldn’t deliver this payload: invalid URL", logged, nil, "", 0)
		return
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := ws.client.Do(req)
	dur := time.Since(start).Seconds()
	if err != nil {
		msg := "We couldn’t deliver this payload: failed to connect to host"
		if ctx.Err() != nil || strings.Contains(err.Error(), "Timeout") {
			msg = "We couldn’t deliver this payload: timed out"
		}
		ws.finish(d, 0, msg, logged, nil, "", dur)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	rh := map[string]string{}
	for k := range resp.Header {
		rh[k] = resp.Header.Get(k)
	}
	status := "OK"
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		status = fmt.Sprintf("Invalid HTTP Response: %d", resp.StatusCode)
	}
	ws.finish(d, resp.StatusCode, status, logged, rh, string(body), dur)
}

func (ws *webhookSender) finish(d *delivery, code int, status string, reqH, respH map[string]string, body string, dur float64) {
	s := ws.s
	s.lock()
	d.done, d.statusCode, d.status, d.duration = true, code, status, dur
	d.deliveredAt = s.now()
	d.reqHeaders, d.respHeaders, d.respBody = reqH, respH, body
	s.unlock()
	ws.pending.Add(-1)
}

// DeliveryStatusDropped is the status of a delivery a webhook_drop fault dropped.
const DeliveryStatusDropped = "We couldn’t deliver this payload: simulated drop"

// FlushWebhooks waits until every delivery handed to the senders has been attempted
// (deliveries held back by a delay fault count until they are sent), or ctx ends.
func (s *Sim) FlushWebhooks(ctx context.Context) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for s.hooks.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
