package fault

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeDisruptions records what the steps asked for; a drain lasts drainFor.
type fakeDisruptions struct {
	mu       sync.Mutex
	calls    []string
	drainFor time.Duration
}

func (f *fakeDisruptions) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeDisruptions) PickNode(_ context.Context, pick string) (string, error) {
	f.record("pick %s", pick)
	return "node-" + pick, nil
}

func (f *fakeDisruptions) Drain(ctx context.Context, node string, d Drain, consolidation bool) (DrainResult, error) {
	f.record("drain %s then=%q timeout=%s consolidation=%t", node, d.Then, time.Duration(d.Timeout), consolidation)
	select {
	case <-time.After(f.drainFor):
		return DrainResult{PodsOnNode: 3, BusyPodsOnNode: 1, WaitedFor: []string{"linux-a"}}, nil
	case <-ctx.Done():
		return DrainResult{PodsOnNode: 3, BusyPodsOnNode: 1, TimedOut: true}, ctx.Err()
	}
}

func (f *fakeDisruptions) SpotReclaim(_ context.Context, node string) (int, int, error) {
	f.record("reclaim %s", node)
	return 4, 2, nil
}

func (f *fakeDisruptions) KillPods(_ context.Context, kind string, n int, resource string) ([]KilledPod, error) {
	f.record("%s %d %s", kind, n, resource)
	return []KilledPod{{Pod: "linux-b", Node: "n1", Job: 7}}, nil
}

// TestRunPlaysDisruptions: each disruption step reaches its target with its defaults;
// a drain runs in the background — the schedule goes on — and its injection ends when
// the drain does; a drain cut short by the end of the run says so.
func TestRunPlaysDisruptions(t *testing.T) {
	f := &fakeDisruptions{drainFor: 300 * time.Millisecond}
	sched := Schedule{Steps: []Step{
		{Name: "drain", At: 0, Drain: &Drain{Then: ThenUncordon}},
		{Name: "reclaim", At: d("50ms"), SpotReclaim: &SpotReclaim{}},
		{Name: "evict", At: d("100ms"), KubeletEviction: &PodKill{Count: 2}},
		{Name: "oom", At: d("100ms"), OOMKill: &PodKill{}},
		{Name: "consolidate", At: d("150ms"), Consolidate: &Drain{Node: "kwok-node-3"}},
	}}
	if err := sched.Validate(); err != nil {
		t.Fatal(err)
	}
	got := Run(t.Context(), sched, time.Now(), Targets{Disruptions: f})

	want := []string{
		"pick busy", `drain node-busy then="uncordon" timeout=15m0s consolidation=false`,
		"pick busy", "reclaim node-busy",
		"kubelet_eviction 2 memory", "oom_kill 1 ",
		`drain kwok-node-3 then="delete" timeout=15m0s consolidation=true`,
	}
	if diff := cmp.Diff(want, f.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	for _, in := range got {
		if !in.Injected || in.Error != "" {
			t.Errorf("step %s: injected %v, error %q", in.Name, in.Injected, in.Error)
		}
	}
	if dr := got[0]; dr.EndSeconds-dr.StartSeconds < 0.25 || dr.Node != "node-busy" || dr.PodsOnNode != 3 ||
		!cmp.Equal(dr.WaitedFor, []string{"linux-a"}) {
		t.Errorf("drain injection %+v: want it to end with the drain, 0.3 s later, waiting for linux-a", dr)
	}
	if got[1].StartSeconds > 0.2 {
		t.Errorf("the reclaim at 50ms waited for the drain: started at %.2fs", got[1].StartSeconds)
	}
	if sr := got[1]; sr.PodsOnNode != 4 || sr.BusyPodsOnNode != 2 {
		t.Errorf("spot_reclaim injection %+v, want 4 pods, 2 busy", sr)
	}
	if ev := got[2]; len(ev.Pods) != 1 || ev.Pods[0].Job != 7 {
		t.Errorf("kubelet_eviction injection %+v, want the pod killed and its job", ev)
	}

	// A drain longer than the run: it ends with the run's context, timed out.
	f = &fakeDisruptions{drainFor: time.Hour}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	got = Run(ctx, Schedule{Steps: []Step{{At: 0, Drain: &Drain{}}}}, time.Now(), Targets{Disruptions: f})
	if in := got[0]; !in.Injected || !in.TimedOut || in.Error == "" {
		t.Errorf("drain cut short by the run: %+v, want injected, timed out, with an error", in)
	}
	// No cluster to disrupt: each step says so.
	for _, in := range Run(t.Context(), sched, time.Now(), Targets{}) {
		if in.Injected || !strings.Contains(in.Error, "no cluster to disrupt") {
			t.Errorf("step %s without a target: injected %v, error %q", in.Name, in.Injected, in.Error)
		}
	}
}
