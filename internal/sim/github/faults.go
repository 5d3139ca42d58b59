package github

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration string
// ("250ms", "1m"); a bare JSON number is read as milliseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q", s)
		}
		*d = Duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f < 0 || f > float64(1<<53) {
		return fmt.Errorf("invalid duration %s", b)
	}
	*d = Duration(time.Duration(f * float64(time.Millisecond)))
	return nil
}

// Faults are the fault-injection settings. The same Seed and the same sequence of
// requests give the same faults.
type Faults struct {
	Seed int64 `json:"seed"`
	// Endpoints maps a route ("POST /orgs/{org}/actions/runners/generate-jitconfig",
	// as in CallCounts) or "*" (every REST route without its own entry) to its faults.
	Endpoints map[string]EndpointFaults `json:"endpoints,omitempty"`
	Webhooks  WebhookFaults             `json:"webhooks"`
}

// EndpointFaults are the faults of one REST route.
type EndpointFaults struct {
	// ErrorRate is the probability (0..1) of answering with ErrorStatus instead.
	ErrorRate float64 `json:"error_rate,omitempty"`
	// ErrorStatus is the injected status (default 502).
	ErrorStatus int `json:"error_status,omitempty"`
	// Latency is added before the request is served, plus up to Jitter at random.
	Latency Duration `json:"latency,omitempty"`
	Jitter  Duration `json:"jitter,omitempty"`
}

// WebhookFaults are the faults of webhook deliveries.
type WebhookFaults struct {
	// DropRate is the probability that a delivery is never sent; it is logged as
	// failed, so a redelivery can recover it, as when a receiver missed it.
	DropRate float64 `json:"drop_rate,omitempty"`
	// DelayRate is the probability that a delivery is held back by Delay (on the
	// simulator's clock) before it is sent.
	DelayRate float64  `json:"delay_rate,omitempty"`
	Delay     Duration `json:"delay,omitempty"`
}

type faultInjector struct {
	mu  sync.Mutex
	cfg Faults
	rnd *rand.Rand
}

func newFaultInjector(f Faults) *faultInjector {
	fi := &faultInjector{}
	fi.set(f)
	return fi
}

func (fi *faultInjector) set(f Faults) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.cfg = f
	seed := uint64(f.Seed) //nolint:gosec // any bit pattern is a fine seed
	fi.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func (fi *faultInjector) get() Faults {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	return fi.cfg
}

// endpoint decides the faults of one request of routeID: the latency to add and
// the status to answer with instead (0: none).
func (fi *faultInjector) endpoint(routeID string) (latency time.Duration, status int) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if len(fi.cfg.Endpoints) == 0 {
		return 0, 0
	}
	ef, ok := fi.cfg.Endpoints[routeID]
	if !ok {
		if ef, ok = fi.cfg.Endpoints["*"]; !ok {
			return 0, 0
		}
	}
	latency = time.Duration(ef.Latency)
	if ef.Jitter > 0 {
		latency += time.Duration(fi.rnd.Int64N(int64(ef.Jitter)))
	}
	if ef.ErrorRate > 0 && fi.rnd.Float64() < ef.ErrorRate {
		status = ef.ErrorStatus
		if status == 0 {
			status = 502
		}
	}
	return latency, status
}

// webhook decides the fate of one delivery attempt.
func (fi *faultInjector) webhook() (drop bool, delay time.Duration) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	w := fi.cfg.Webhooks
	if w.DropRate > 0 && fi.rnd.Float64() < w.DropRate {
		return true, 0
	}
	if w.DelayRate > 0 && w.Delay > 0 && fi.rnd.Float64() < w.DelayRate {
		return false, time.Duration(w.Delay)
	}
	return false, 0
}
