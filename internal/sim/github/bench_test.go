package github

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// benchWorld is a simulator without rate limits, with 2,000 idle runners of other
// labels in the org, so assignment must not scan runners that cannot match.
func benchWorld(b *testing.B) *world {
	b.Helper()
	w := newWorld(b, worldOpts{realClock: true, opts: Options{RateLimits: RateLimits{Disabled: true}}})
	for i := range 2000 {
		cfg := must(w.sim.GenerateJITConfig(JITSpec{Scope: "acme", Name: fmt.Sprintf("idle-%d", i), Labels: []string{fmt.Sprintf("other-%d", i%50)}}))
		cfg.URL = w.srv.URL
		if _, err := runnerapi.NewClient(cfg, w.srv.Client()).Connect(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return w
}

// BenchmarkJITAndAssign measures what a Gantry benchmark asks of the simulator per
// job: generate-jitconfig over HTTP, queue the job, the runner comes online over HTTP
// and is assigned the job. It reports jobs/s.
func BenchmarkJITAndAssign(b *testing.B) {
	w := benchWorld(b)
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		hc := w.srv.Client()
		for pb.Next() {
			i := n.Add(1)
			cfg := jitOverHTTP(b, w, hc, i)
			job, err := w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux", "bench"}})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := runnerapi.NewClient(cfg, hc).Connect(context.Background()); err != nil {
				b.Fatal(err)
			}
			_ = job
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	if sum := w.sim.Summary(); sum.Jobs[StatusQueued] != b.N || sum.RunnersBusy != b.N {
		b.Fatalf("summary %+v: want %d jobs each assigned to a runner", sum, b.N)
	}
}

// BenchmarkJobLifecycle adds the rest of a job's life over HTTP: the runner polls,
// starts and completes the job, and the ephemeral runner is removed.
func BenchmarkJobLifecycle(b *testing.B) {
	w := benchWorld(b)
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		hc := w.srv.Client()
		ctx := context.Background()
		for pb.Next() {
			cfg := jitOverHTTP(b, w, hc, n.Add(1))
			if _, err := w.sim.QueueJob(JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "bench"}}); err != nil {
				b.Fatal(err)
			}
			c := runnerapi.NewClient(cfg, hc)
			if _, err := c.Run(ctx, runnerapi.RunOptions{Sleep: func(context.Context, time.Duration) error { return nil }}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

func jitOverHTTP(b *testing.B, w *world, hc *http.Client, i int64) runnerapi.Config {
	body := fmt.Sprintf(`{"name":"bench-%d","runner_group_id":1,"labels":["bench"]}`, i)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, w.srv.URL+"/orgs/acme/actions/runners/generate-jitconfig", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+testPAT)
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		EncodedJITConfig string `json:"encoded_jit_config"`
	}
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("generate-jitconfig: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		b.Fatal(err)
	}
	cfg, err := runnerapi.DecodeConfig(out.EncodedJITConfig)
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}
