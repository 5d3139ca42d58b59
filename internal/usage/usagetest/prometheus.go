// Package usagetest is a fake Prometheus for the tests of what reads usage from
// Prometheus: `gantry usage --prometheus` and usage.FromPrometheus.
package usagetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// Sample is one series of an instant vector: its labels and its value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Prometheus answers /api/v1/query as Prometheus' HTTP API does (status, data.resultType
// "vector", data.result of {metric, value: [time, "value"]}), from a table of answers
// by exact query: a query not in the table is answered 400 with Prometheus' error
// shape, so a test pins the PromQL asked. It records the queries asked.
type Prometheus struct {
	URL string

	mu      sync.Mutex
	answers map[string][]Sample
	asked   []string
}

// NewPrometheus starts a fake Prometheus answering from answers; it stops with the
// test.
func NewPrometheus(t testing.TB, answers map[string][]Sample) *Prometheus {
	p := &Prometheus{answers: answers}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Asked returns the queries asked, in order.
func (p *Prometheus) Asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

func (p *Prometheus) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/api/v1/query" {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "not_found", "error": "no such endpoint " + r.URL.Path})
		return
	}
	if err := r.ParseForm(); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	ts, _ := strconv.ParseFloat(r.Form.Get("time"), 64)
	p.mu.Lock()
	p.asked = append(p.asked, q)
	samples, ok := p.answers[q]
	p.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data", "error": "the fake has no answer to " + q})
		return
	}
	result := make([]map[string]any, 0, len(samples))
	for _, s := range samples {
		result = append(result, map[string]any{"metric": s.Labels, "value": []any{ts, fmt.Sprint(s.Value)}})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
}
