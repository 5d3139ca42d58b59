package reliability

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// The controller is killed (SIGKILL) with jobs running on busy runners, jobs queued
// whose runners' pods are still starting, and jobs queued with no runner at all (the
// pool at maxRunners); more jobs are queued while it is down, their webhooks failing.
// The kubelet restarts it. The restarted controller rebuilds its demand from the
// cluster (its Runners, the pool's status) and from GitHub (resync), and then:
// every job runs, no runner is created twice or retired and recreated, no busy runner
// is killed.
func TestRestartRebuildsDemand(t *testing.T) {
	t.Parallel()
	s := scale()
	w := newWorld(t, worldOptions{})
	ctl := w.controller("replica-0", nil)
	nBusy, nPending, nWaiting, nDown := 3*s, 4*s, 2*s, 3*s
	w.create(w.pool("restart").MaxRunners(int32(nBusy + nPending)).Obj())
	w.leader(30 * time.Second)

	// Busy runners: long jobs, running when the controller dies. They are in another
	// repository than the queued jobs, so that their in_progress and completed
	// webhooks tell the restarted controller nothing about the queued ones.
	w.queueIn([]string{"docs"}, nBusy, 25*time.Second)
	w.eventually("busy runners", 60*time.Second, func() bool { return w.jobsIn(simgithub.StatusInProgress) == nBusy })

	// Pending runners: their pods do not start until after the restart.
	var hold holdSwitch
	hold.set(true)
	w.kubelet.setHold(func(*corev1.Pod) bool { return hold.get() })
	queued := []string{"api", "web"}
	w.queueIn(queued, nPending, 2*time.Second)
	w.eventually("a pending runner with a pod for every queued job", 60*time.Second, func() bool {
		return w.runnersWithPods("restart") == nBusy+nPending
	})
	// Queued with no runner: the pool is at maxRunners.
	w.queueIn(queued, nWaiting, 2*time.Second)
	w.eventually("the pool to count every queued job", 30*time.Second, func() bool {
		return int(w.getPool("restart").Status.QueuedJobs) == nPending+nWaiting
	})
	createdBefore, _, _ := w.obs.counts()
	// The runners whose pods are held: the restarted controller must keep every one.
	// (The busy runners' 25 s jobs may end meanwhile, and their runners with them.)
	held := w.heldPods("restart")
	if len(held) != nPending {
		t.Fatalf("%d runner pods held before the kill, want %d", len(held), nPending)
	}

	killedAt := time.Now()
	ctl.kill()
	// Jobs queued while it is down: their webhooks find no leader.
	w.queueIn(queued, nDown, 2*time.Second)

	w.leader(60 * time.Second)
	leadingAt := time.Now()
	w.fig.measure("restart_to_leading_seconds", round(leadingAt.Sub(killedAt).Seconds()))
	want := nPending + nWaiting + nDown
	w.eventually("the restarted controller to count every queued job", 4*resyncInterval+30*time.Second, func() bool {
		return int(w.getPool("restart").Status.QueuedJobs) == want && w.jobsIn(simgithub.StatusQueued) == want
	})
	w.fig.measure("demand_rebuilt_after_leading_seconds", round(time.Since(leadingAt).Seconds()))
	// Two resync passes with the pods still held: a controller that forgot its demand
	// would retire the pending runners now.
	time.Sleep(2 * resyncInterval)
	after := map[string]bool{}
	for _, name := range w.runnersWithPodsIn("restart") {
		after[name] = true
	}
	for _, name := range held {
		if !after[name] {
			t.Errorf("pending runner %s was retired after the restart: the restarted controller forgot its demand", name)
		}
	}
	hold.set(false)

	w.finish(3 * time.Minute)
	created, _, _ := w.obs.counts()
	w.fig.measure("runners_created_after_restart", float64(created-createdBefore))
	// Exactly one runner per job: the ones waiting for capacity and the ones queued
	// while the controller was down, nothing retired and recreated.
	if got, wantNew := created-createdBefore, nWaiting+nDown; got != wantNew {
		t.Errorf("%d runners created after the restart, want %d (one per job that had none)", got, wantNew)
	}
	if unused := w.obs.unused(); unused != 0 {
		t.Errorf("%d runners never ran a job: runners were retired and created again", unused)
	}
	w.fig.fault(fault{Kind: "controller SIGKILL with jobs queued, runners pending and busy", Count: 1, Survived: !t.Failed(),
		Seconds: round(leadingAt.Sub(killedAt).Seconds())})
	w.fig.write()
}

// holdSwitch is a flag the kubelet's hold function reads.
type holdSwitch struct{ v atomic.Bool }

func (h *holdSwitch) set(v bool) { h.v.Store(v) }
func (h *holdSwitch) get() bool  { return h.v.Load() }

// runnersWithPods counts the pool's Runners that are alive and have their pod.
func (w *world) runnersWithPods(pool string) int {
	names := w.runnersWithPodsIn(pool)
	if names == nil {
		return -1
	}
	return len(names)
}

// heldPods names the pool's runner pods still Pending: those the kubelet holds.
func (w *world) heldPods(pool string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := cp.c.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		return nil
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodPending {
			names = append(names, p.Name)
		}
	}
	return names
}

// runnersWithPodsIn names the pool's runners that have a pod and are not being
// deleted or failed; nil when they cannot be listed.
func (w *world) runnersWithPodsIn(pool string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list v1alpha1.RunnerList
	if err := cp.c.List(ctx, &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		return nil
	}
	names := []string{}
	for _, r := range list.Items {
		if !r.DeletionTimestamp.IsZero() || r.Status.Phase == v1alpha1.RunnerFailed {
			continue
		}
		// The pod itself, not status.podName: a new runner's status records its pod
		// with its first change.
		if err := cp.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: r.Name}, &corev1.Pod{}); err != nil {
			continue
		}
		names = append(names, r.Name)
	}
	return names
}
