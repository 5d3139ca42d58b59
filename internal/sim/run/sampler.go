package run

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

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
	runners *runnerWatch
	sim     *simgithub.Sim
	pid     func() int // the controller's, 0 while none runs
	out     io.Writer
	start   time.Time

	mu  sync.Mutex
	all []Sample
}

func newSampler(runners *runnerWatch, sim *simgithub.Sim, pid func() int, out io.Writer) *sampler {
	return &sampler{runners: runners, sim: sim, pid: pid, out: out, start: time.Now()}
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
	if s.runners != nil {
		for _, r := range s.runners.runners() {
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
	if pid := s.pid(); pid > 0 {
		smp.RSS = rss(pid)
	}
	return smp
}

func (s *sampler) samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.all...)
}

func rss(pid int) int64 { return procStatusBytes(pid, "VmRSS:") }

// procStatusBytes reads a "kB" field of /proc/PID/status, in bytes; 0 if absent.
func procStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
