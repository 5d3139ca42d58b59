package demand

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

var testSecret = []byte("it's-a-secret-to-everybody")

func payload(action string, id int64, labels ...string) []byte {
	quoted := make([]string, len(labels))
	for i, l := range labels {
		quoted[i] = fmt.Sprintf("%q", l)
	}
	return []byte(fmt.Sprintf(`{"action":%q,"workflow_job":{"id":%d,"run_id":7,"labels":[%s],"status":%q,
"workflow_name":"CI","runner_name":null,"created_at":"2026-01-01T00:00:00Z"},
"repository":{"name":"api","full_name":"acme/api","html_url":"https://github.com/acme/api","owner":{"login":"acme"}},
"organization":{"login":"acme"},"sender":{"login":"octocat"}}`, action, id, strings.Join(quoted, ","), action))
}

func deliver(h http.Handler, method, event, delivery string, body []byte, sig string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(context.Background(), method, "/webhook", bytes.NewReader(body))
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	if sig != "" {
		req.Header.Set("X-Hub-Signature-256", sig)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestWebhookHandlerAnswers(t *testing.T) {
	tr, _, _ := newTestTracker(t)
	clk := clocktesting.NewFakeClock(time.Now())
	h := NewWebhookHandler(func() [][]byte { return [][]byte{[]byte("old-secret"), testSecret} }, tr, clk, logr.Discard())

	good := payload("queued", 1, "self-hosted", "linux")
	big := append([]byte(`{"action":"queued","pad":"`), bytes.Repeat([]byte("x"), MaxWebhookBody)...)
	tests := []struct {
		name       string
		method     string
		event      string
		delivery   string
		body       []byte
		sig        string
		wantCode   int
		wantResult string
	}{
		{"signed queued job", http.MethodPost, "workflow_job", "d1", good, Sign(testSecret, good), http.StatusAccepted, ResultAccepted},
		{"duplicate delivery", http.MethodPost, "workflow_job", "d1", good, Sign(testSecret, good), http.StatusAccepted, ResultDuplicate},
		{"signed with the rotated-out secret", http.MethodPost, "workflow_job", "d2", good, Sign([]byte("old-secret"), good), http.StatusAccepted, ResultAccepted},
		{"missing signature", http.MethodPost, "workflow_job", "d3", good, "", http.StatusUnauthorized, ResultBadSignature},
		{"wrong secret", http.MethodPost, "workflow_job", "d4", good, Sign([]byte("nope"), good), http.StatusUnauthorized, ResultBadSignature},
		{"signature not hex", http.MethodPost, "workflow_job", "d5", good, "sha256=zz", http.StatusUnauthorized, ResultBadSignature},
		{"sha1 signature", http.MethodPost, "workflow_job", "d6", good, "sha1=abcd", http.StatusUnauthorized, ResultBadSignature},
		{"malformed json", http.MethodPost, "workflow_job", "d7", []byte(`{"action":`), Sign(testSecret, []byte(`{"action":`)), http.StatusBadRequest, ResultMalformed},
		{"no job id", http.MethodPost, "workflow_job", "d8", []byte(`{"action":"queued","workflow_job":{}}`), Sign(testSecret, []byte(`{"action":"queued","workflow_job":{}}`)), http.StatusBadRequest, ResultMalformed},
		{"ping", http.MethodPost, "ping", "d9", []byte(`{"zen":"hi"}`), Sign(testSecret, []byte(`{"zen":"hi"}`)), http.StatusOK, ResultIgnored},
		{"other event", http.MethodPost, "push", "d10", []byte(`{}`), Sign(testSecret, []byte(`{}`)), http.StatusOK, ResultIgnored},
		{"unknown action", http.MethodPost, "workflow_job", "d11", []byte(`{"action":"exploded"}`), Sign(testSecret, []byte(`{"action":"exploded"}`)), http.StatusOK, ResultIgnored},
		{"GET", http.MethodGet, "workflow_job", "d12", nil, "", http.StatusMethodNotAllowed, ResultBadMethod},
		{"oversized body", http.MethodPost, "workflow_job", "d13", big, Sign(testSecret, big), http.StatusRequestEntityTooLarge, ResultTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testutil.ToFloat64(WebhookDeliveries.WithLabelValues(tt.wantResult))
			rec := deliver(h, tt.method, tt.event, tt.delivery, tt.body, tt.sig)
			if rec.Code != tt.wantCode {
				t.Errorf("status = %d, want %d (body %q)", rec.Code, tt.wantCode, rec.Body.String())
			}
			if got := testutil.ToFloat64(WebhookDeliveries.WithLabelValues(tt.wantResult)) - before; got != 1 {
				t.Errorf("deliveries{result=%q} grew by %v, want 1", tt.wantResult, got)
			}
			if strings.Contains(rec.Body.String(), string(testSecret)) {
				t.Error("the answer contains the webhook secret")
			}
		})
	}

	// Two deliveries were accepted (d1, d2), both for job 1: it is queued once.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { h.Run(stop); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(h.queue) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	<-done
	if got := tr.Demand(key("linux")).Queued; got != 1 {
		t.Errorf("queued jobs after the deliveries = %d, want 1", got)
	}
}

func TestWebhookHandlerAnswers503WhenItsQueueIsFull(t *testing.T) {
	tr, _, _ := newTestTracker(t)
	h := NewWebhookHandler(func() [][]byte { return [][]byte{testSecret} }, tr, clocktesting.NewFakeClock(time.Now()), logr.Discard())
	h.queue = make(chan JobEvent, 1)
	b1, b2 := payload("queued", 1, "linux"), payload("queued", 2, "linux")
	if rec := deliver(h, http.MethodPost, "workflow_job", "a", b1, Sign(testSecret, b1)); rec.Code != http.StatusAccepted {
		t.Fatalf("first delivery: %d", rec.Code)
	}
	if rec := deliver(h, http.MethodPost, "workflow_job", "b", b2, Sign(testSecret, b2)); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("delivery into a full queue: %d, want 503", rec.Code)
	}
	// GitHub's redelivery of the refused one must not be taken for a duplicate.
	<-h.queue
	if rec := deliver(h, http.MethodPost, "workflow_job", "b", b2, Sign(testSecret, b2)); rec.Code != http.StatusAccepted {
		t.Fatalf("redelivery after 503: %d, want 202", rec.Code)
	}
}

func TestParseWorkflowJob(t *testing.T) {
	got, err := ParseWorkflowJob([]byte(`{"action":"in_progress","workflow_job":{"id":42,"run_id":7,"labels":["self-hosted","linux"],
"workflow_name":"CI","runner_name":"gantry-abc","runner_id":31,"created_at":"2026-01-01T00:00:00Z"},
"repository":{"name":"api","html_url":"https://GHE.example.com/acme/api","owner":{"login":"acme"}},"enterprise":{"slug":"bigco"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := JobEvent{Action: ActionInProgress, Job: Job{
		ID: 42, RunID: 7, Host: "ghe.example.com", Enterprise: "bigco", Owner: "acme", Repo: "api",
		Labels: []string{"self-hosted", "linux"}, Workflow: "CI", RunnerName: "gantry-abc", RunnerID: 31,
		CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
