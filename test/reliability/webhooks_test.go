package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/internal/demand"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Webhooks get lost, duplicated, replayed, forged and mangled:
//
//   - a share of deliveries is dropped: every job still runs, and a job whose queued
//     delivery was lost waits at most about one --resync-interval longer;
//   - every delivery is redelivered by GitHub (same delivery ID) and replayed with a
//     new ID and a valid signature: no runner is created for any of them;
//   - bad and missing signatures (401), oversized bodies (413), malformed JSON (400)
//     and other methods (405) get their answers, are counted in
//     gantry_webhook_deliveries_total, and create nothing.
func TestLostAndHostileWebhooks(t *testing.T) {
	t.Parallel()
	s := scale()
	w := newWorld(t, worldOptions{})
	ctl := w.controller("replica-0", nil)
	w.create(w.pool("hooks").MaxRunners(int32(100 * s)).Obj())
	w.leader(60 * time.Second)

	// A first job in each repository, delivered: an organization pool with a token
	// learns its repositories from webhooks (docs/reliability.md says why).
	ids := w.queue(len(repos), time.Second)
	w.eventually("the first jobs", time.Minute, func() bool { return w.outstanding(ids) == 0 })

	// Every delivery lost: each job waits for resync, and no longer than its bound —
	// one resync interval, plus a reconcile, a registration and a pod start.
	w.sim.SetFaults(simgithub.Faults{Seed: 7, Webhooks: simgithub.WebhookFaults{DropRate: 1}})
	ids = w.queue(3*s, time.Second)
	w.eventually("every job, though no webhook arrived", 2*time.Minute, func() bool { return w.outstanding(ids) == 0 })
	var worst time.Duration
	for _, id := range ids {
		j, _ := w.sim.Job(id)
		worst = max(worst, j.StartedAt.Sub(j.QueuedAt))
	}
	w.fig.measure("lost_delivery_worst_pickup_seconds", round(worst.Seconds()))
	if bound := resyncInterval + 10*time.Second; worst > bound {
		t.Errorf("a job whose deliveries were all lost waited %s, want at most %s", worst.Round(time.Millisecond), bound)
	}
	dropped := w.droppedDeliveries()
	w.fig.fault(fault{Kind: "webhook deliveries all dropped", Count: dropped, Survived: !t.Failed(),
		Detail: fmt.Sprintf("worst pickup %.1fs with --resync-interval %s", worst.Seconds(), resyncInterval)})

	// A share lost, under load.
	const dropRate = 0.3
	w.sim.SetFaults(simgithub.Faults{Seed: 8, Webhooks: simgithub.WebhookFaults{DropRate: dropRate}})
	ids = w.queue(12*s, time.Second)
	w.eventually("every job, despite the lost deliveries", 2*time.Minute, func() bool { return w.outstanding(ids) == 0 })
	w.sim.SetFaults(simgithub.Faults{})
	w.fig.fault(fault{Kind: fmt.Sprintf("webhook deliveries dropped (%.0f%%)", dropRate*100), Count: w.droppedDeliveries() - dropped, Survived: !t.Failed()})
	w.fig.measure("deliveries_dropped", float64(w.droppedDeliveries()))
	w.eventually("the pool to drain", time.Minute, func() bool { return w.leftovers() == 0 })

	// Duplicates and replays of everything delivered so far.
	before := ctl.metrics()
	replayedAt := time.Now()
	hook := w.hookID()
	redelivered, replayed := 0, 0
	for _, d := range w.sim.Deliveries() {
		if d.StatusCode/100 != 2 || d.Redelivery {
			continue
		}
		if w.restPOST(fmt.Sprintf("/orgs/%s/hooks/%d/deliveries/%d/attempts", org, hook, d.ID)) == http.StatusAccepted {
			redelivered++
		}
		var detail struct {
			Request struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"request"`
		}
		if err := w.restGET(fmt.Sprintf("/orgs/%s/hooks/%d/deliveries/%d", org, hook, d.ID), &detail); err != nil {
			t.Fatal(err)
		}
		if code := w.deliver("workflow_job", "replay-"+randomHex(8), detail.Request.Payload, demand.Sign([]byte(w.hookKey), detail.Request.Payload)); code != http.StatusAccepted {
			t.Errorf("a replayed delivery was answered %d, want 202", code)
		}
		replayed++
	}
	flush, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := w.sim.FlushWebhooks(flush); err != nil {
		t.Fatal(err)
	}
	cancel()
	w.fig.badInput("redelivered (same delivery ID)", redelivered)
	w.fig.badInput("replayed (new delivery ID, valid signature)", replayed)

	// Hostile and broken deliveries.
	body := []byte(fmt.Sprintf(`{"action":"queued","workflow_job":{"id":987654321,"labels":["linux"]},"repository":{"name":"api","html_url":"%s/%s/api","owner":{"login":"%s"}}}`, w.simURL, org, org))
	n := 5 * s
	bad := []struct {
		kind, result string
		want         int
		send         func(i int) int
	}{
		{"bad signature", demand.ResultBadSignature, http.StatusUnauthorized, func(i int) int {
			return w.deliver("workflow_job", fmt.Sprintf("forged-%d", i), body, demand.Sign([]byte("not-the-secret"), body))
		}},
		{"missing signature", demand.ResultBadSignature, http.StatusUnauthorized, func(i int) int {
			return w.deliver("workflow_job", fmt.Sprintf("unsigned-%d", i), body, "")
		}},
		{"oversized body", demand.ResultTooLarge, http.StatusRequestEntityTooLarge, func(i int) int {
			big := bytes.Repeat([]byte("x"), demand.MaxWebhookBody+1)
			return w.deliver("workflow_job", fmt.Sprintf("big-%d", i), big, demand.Sign([]byte(w.hookKey), big))
		}},
		{"malformed JSON", demand.ResultMalformed, http.StatusBadRequest, func(i int) int {
			mangled := []byte(`{"action":"queued","workflow_job":{"id":`)
			return w.deliver("workflow_job", fmt.Sprintf("mangled-%d", i), mangled, demand.Sign([]byte(w.hookKey), mangled))
		}},
		{"not a POST", demand.ResultBadMethod, http.StatusMethodNotAllowed, func(i int) int {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, w.svc.url+"/webhook", nil)
			return httpDo(req)
		}},
	}
	wantCounts := map[string]int{}
	for _, b := range bad {
		for i := range n {
			if code := b.send(i); code != b.want {
				t.Errorf("%s: answered %d, want %d", b.kind, code, b.want)
			}
		}
		wantCounts[b.result] += n
		w.fig.badInput(b.kind, n)
	}
	after := ctl.metrics()
	for result, want := range wantCounts {
		l := map[string]string{"result": result}
		if got := metricValue(after, "gantry_webhook_deliveries_total", l) - metricValue(before, "gantry_webhook_deliveries_total", l); int(got) != want {
			t.Errorf("gantry_webhook_deliveries_total{result=%q} rose by %v, want %d", result, got, want)
		}
	}
	dup := metricValue(after, "gantry_webhook_deliveries_total", map[string]string{"result": demand.ResultDuplicate}) -
		metricValue(before, "gantry_webhook_deliveries_total", map[string]string{"result": demand.ResultDuplicate})
	w.fig.measure("redeliveries_counted_duplicate", dup)
	if int(dup) != redelivered {
		t.Errorf("%v redeliveries counted as duplicates, want %d", dup, redelivered)
	}
	// None of it is demand: give the pool a resync interval to act on it if it were.
	time.Sleep(resyncInterval + time.Second)
	if n := w.obs.createdSince(replayedAt); n != 0 {
		t.Errorf("%d runners created for duplicated, replayed or hostile deliveries", n)
	}
	if q := w.getPool("hooks").Status.QueuedJobs; q != 0 {
		t.Errorf("the pool counts %d queued jobs after the replays, want 0", q)
	}
	w.finish(time.Minute)
	w.fig.write()
}

// droppedDeliveries counts the deliveries the simulator never sent.
func (w *world) droppedDeliveries() int {
	n := 0
	for _, d := range w.sim.Deliveries() {
		if d.StatusCode == 0 {
			n++
		}
	}
	return n
}

// hookID is the organization webhook's id.
func (w *world) hookID() int64 {
	for _, d := range w.sim.Deliveries() {
		return d.HookID
	}
	w.t.Fatal("no delivery yet")
	return 0
}

// deliver posts a webhook delivery to the controllers' Service, as GitHub would.
func (w *world) deliver(event, id string, body []byte, sig string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.svc.url+"/webhook", bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	if sig != "" {
		req.Header.Set("X-Hub-Signature-256", sig)
	}
	return httpDo(req)
}

func (w *world) restGET(path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.simURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return json.Unmarshal(b, out)
}

func (w *world) restPOST(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.simURL+path, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	return httpDo(req)
}
