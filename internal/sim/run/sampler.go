package run

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Sample is the system's state at one moment of a run.
type Sample struct {
	T       float64 `json:"t"` // seconds since the workload started
	Queued  int     `json:"queued"`
	Pending int     `json:"pending"`
	Idle    int     `json:"idle"`
	Busy    int     `json:"busy"`
	Done    int     `json:"done"`
	RSS     int64   `json:"controller_rss_bytes"`
}

type sampler struct {
	c     client.Client
	sim   *simgithub.Sim
	pid   int
	out   io.Writer
	start time.Time

	mu  sync.Mutex
	all []Sample
}

func newSampler(c client.Client, sim *simgithub.Sim, pid int, out io.Writer) *sampler {
	return &sampler{c: c, sim: sim, pid: pid, out: out, start: time.Now()}
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for i := 0; ; i++ {
		smp := s.take(ctx)
		s.mu.Lock()
		s.all = append(s.all, smp)
		s.mu.Unlock()
		if i%2 == 0 {
			fmt.Fprintf(s.out, "  t=%4.0fs  queued %5d  pending %5d  idle %5d  busy %5d  done %5d\n",
				smp.T, smp.Queued, smp.Pending, smp.Idle, smp.Busy, smp.Done)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) take(ctx context.Context) Sample {
	smp := Sample{T: time.Since(s.start).Seconds()}
	for _, j := range s.sim.Jobs() {
		switch j.Status {
		case simgithub.StatusQueued:
			smp.Queued++
		case simgithub.StatusCompleted:
			smp.Done++
		}
	}
	var rs v1alpha1.RunnerList
	if err := s.c.List(ctx, &rs, client.InNamespace(namespace)); err == nil {
		for _, r := range rs.Items {
			switch r.Status.Phase {
			case v1alpha1.RunnerIdle:
				smp.Idle++
			case v1alpha1.RunnerBusy:
				smp.Busy++
			case v1alpha1.RunnerFailed, v1alpha1.RunnerSucceeded:
			default:
				smp.Pending++
			}
		}
	}
	smp.RSS = rss(s.pid)
	return smp
}

func (s *sampler) samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.all...)
}

func rss(pid int) int64 { return procStatusBytes(pid, "VmRSS:") }
