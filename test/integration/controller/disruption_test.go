package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/controller/runnerpool"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// Nodes going away under runners. envtest has no kubelet and no scheduler: the tests
// create the Node objects, bind the pods (the binding subresource, as the scheduler
// does), write their status, and confirm a deleted pod gone (a force-delete, as the
// kubelet confirms it) — playing the parts a cluster plays, while kube-controller-
// manager's disruption controller computes the pool's PodDisruptionBudget and the
// eviction API enforces it, as in a real cluster. GitHub's side is the simulator, its
// job lease (RunnerLostTimeout) a few seconds.

// lease is the simulator's runner lease in these tests: a started job its runner stops
// renewing fails this long after, as GitHub fails it after about ten minutes.
const lease = 3 * time.Second

// createNode creates a Ready node.
func (w *world) createNode(name string) {
	w.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}}
	if err := w.c.Create(w.ctx(), n); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = w.c.Delete(context.Background(), n) })
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := w.c.Status().Update(w.ctx(), n); err != nil {
		w.t.Fatal(err)
	}
}

// cordon marks a node unschedulable, as kubectl drain does first.
func (w *world) cordon(name string) {
	w.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := w.c.Patch(w.ctx(), n, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`))); err != nil {
		w.t.Fatal(err)
	}
}

// startOn binds a runner's pod to node and plays its kubelet and agent: the runner
// container running and Ready, the agent online. It returns the agent.
func (w *world) startOn(rn, node string) *runnerapi.Client {
	w.t.Helper()
	w.bindPod(rn, node)
	w.updatePodStatus(rn, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName, Ready: true,
			Image: p.Spec.Containers[0].Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	})
	a := w.agent(rn)
	if _, err := a.Connect(w.t.Context()); err != nil {
		w.t.Fatalf("connecting runner %s: %v", rn, err)
	}
	return a
}

// takeJob has the agent take the job GitHub assigns it and start it; it returns the job.
func (w *world) takeJob(a *runnerapi.Client, want int64) *runnerapi.Job {
	w.t.Helper()
	got, err := a.NextJob(w.t.Context(), 10*time.Second)
	if err != nil || got == nil || (want != 0 && got.ID != want) {
		w.t.Fatalf("NextJob = %+v, %v; want job %d", got, err, want)
	}
	if err := a.StartJob(w.t.Context(), got.ID); err != nil {
		w.t.Fatal(err)
	}
	return got
}

// busyRunner queues a job of its own run, waits for a runner of pool, starts it on node
// and has it take the job; it returns the runner's name, its agent and the job.
func (w *world) busyRunner(pool, node string, skip ...string) (string, *runnerapi.Client, simgithub.Job) {
	w.t.Helper()
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Name: "build " + node, Duration: simgithub.Duration(time.Hour)})
	if err != nil {
		w.t.Fatal(err)
	}
	rn := w.newRunner(pool, skip...)
	a := w.startOn(rn.Name, node)
	w.takeJob(a, job.ID)
	w.eventually("runner "+rn.Name+" busy with job "+fmt.Sprint(job.ID), func() (bool, error) {
		r, err := w.getRunner(rn.Name)
		return err == nil && r.Status.Phase == v1alpha1.RunnerBusy && r.Status.Job != nil && r.Status.Job.ID == job.ID, nil
	})
	return rn.Name, a, job
}

// evict asks the eviction API to evict a pod, as kubectl drain does; nil when accepted.
func (w *world) evictPod(name string) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
	return w.c.SubResource("eviction").Create(w.ctx(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}, ev)
}

// confirmDeletions plays the kubelet of every node: a pod being deleted is confirmed
// gone (force-deleted).
func (w *world) confirmDeletions() {
	var pods corev1.PodList
	if err := w.c.List(w.ctx(), &pods, client.InNamespace(w.ns)); err != nil {
		return
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; !p.DeletionTimestamp.IsZero() {
			_ = w.c.Delete(w.ctx(), p, client.GracePeriodSeconds(0))
		}
	}
}

// drainNode plays `kubectl drain`: cordon, then evict each of the node's pods, an
// eviction refused (429) retried every retry, each pod waited for until gone, while
// the kubelet confirms deletions. It returns, per pod, how many evictions were refused
// and when the drain saw it gone, and when the drain finished.
func (w *world) drainNode(node string, pods []string, retry, timeout time.Duration) (map[string]int, map[string]time.Time, time.Time) {
	w.t.Helper()
	w.cordon(node)
	refused, gone := map[string]int{}, map[string]time.Time{}
	left := slices.Clone(pods)
	deadline := time.Now().Add(timeout)
	for len(left) > 0 {
		if time.Now().After(deadline) {
			w.dump()
			w.t.Fatalf("the drain of %s did not end within %s: pods %v left", node, timeout, left)
		}
		var next []string
		for _, p := range left {
			err := w.evictPod(p)
			switch {
			case apierrors.IsNotFound(err):
				gone[p] = time.Now()
				continue
			case apierrors.IsTooManyRequests(err):
				refused[p]++
			case err != nil:
				w.t.Fatalf("evicting %s: %v", p, err)
			}
			next = append(next, p)
		}
		left = next
		if len(left) > 0 {
			w.confirmDeletions()
			time.Sleep(retry)
		}
	}
	return refused, gone, time.Now()
}

// busyAndIdle makes node and pool (at most 4 runners) and, on the node, a busy runner
// (busyRunner) and then a warm one, idle beside it, both counted by the pool's budget.
func (w *world) busyAndIdle(poolName, node string) (string, *runnerapi.Client, simgithub.Job, v1alpha1.Runner) {
	w.t.Helper()
	w.createNode(node)
	w.create(w.pool(poolName).MaxRunners(4).Obj())
	busy, agent, job := w.busyRunner(poolName, node)
	pool := w.getPool(poolName)
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.MinIdle = 1
	if err := w.c.Patch(w.ctx(), pool, patch); err != nil {
		w.t.Fatal(err)
	}
	idle := w.newRunner(poolName, busy)
	w.startOn(idle.Name, node)
	w.eventually("the idle runner online", func() (bool, error) {
		r, err := w.getRunner(idle.Name)
		return err == nil && r.Status.Phase == v1alpha1.RunnerIdle, nil
	})
	w.budgetReady(poolName, 2)
	return busy, agent, job, idle
}

// budgetReady waits for the pool's PodDisruptionBudget to count n healthy runner pods.
func (w *world) budgetReady(pool string, n int32) {
	w.t.Helper()
	w.eventually("the PodDisruptionBudget of pool "+pool+" counting its runners", func() (bool, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: runnerpool.BudgetName(pool)}, pdb); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == n && pdb.Status.DisruptionsAllowed == 0, nil
	})
}

// A drain through the eviction API waits for a busy runner and not for idle ones: the
// idle runner is retired at once (removed from GitHub, then its pod), the busy one is
// never evicted — its condition Draining says why the drain waits — and finishes its
// job, after which its pod goes and the drain ends.
func TestDrainWaitsForBusyRunnersNotIdleOnes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	busy, agent, job, idle := w.busyAndIdle("drain", "node-a")

	// The busy runner's job ends a few seconds into the drain.
	jobEnds := make(chan time.Time, 1)
	go func() {
		time.Sleep(4 * time.Second)
		at := time.Now()
		if err := agent.CompleteJob(context.Background(), job.ID, "success"); err != nil {
			t.Errorf("completing the job: %v", err)
		}
		_ = w.exitPod(busy, 0)
		jobEnds <- at
	}()
	started := time.Now()
	refused, gone, drained := w.drainNode("node-a", []string{idle.Name, busy}, 500*time.Millisecond, 30*time.Second)
	ended := <-jobEnds

	// The idle runner was retired at once: gone well before the busy runner's job ended.
	if at := gone[idle.Name]; at.IsZero() || !at.Before(ended) {
		t.Errorf("the idle runner's pod was gone at %s, not before the busy job ended at %s: the drain waited for it",
			at.Format(time.StampMilli), ended.Format(time.StampMilli))
	} else {
		t.Logf("idle runner gone %s into the drain; busy job ended %s in; drain ended %s in",
			at.Sub(started), ended.Sub(started), drained.Sub(started))
	}
	if refused[busy] == 0 {
		t.Errorf("the busy runner's pod was never refused eviction: %v", refused)
	}
	if drained.Before(ended) {
		t.Errorf("the drain ended at %s, before the busy runner's job at %s", drained.Format(time.StampMilli), ended.Format(time.StampMilli))
	}
	if over := drained.Sub(ended); over > 5*time.Second {
		t.Errorf("the drain ended %s after the last job: want within 5 s", over)
	}
	if got := w.simJob(job.ID); got.Conclusion != "success" {
		t.Errorf("the busy runner's job concluded %q, want success", got.Conclusion)
	}
	for _, name := range []string{idle.Name, busy} {
		if r, err := w.getRunner(name); err == nil && r.Status.Phase == v1alpha1.RunnerFailed {
			t.Errorf("runner %s failed (%s): a drain must not kill a runner", name, r.Status.Reason)
		}
	}
	if !slices.ContainsFunc(w.events(idle.Name), func(e eventView) bool { return e.Reason == "Retired" }) {
		t.Errorf("no Retired event on the idle runner: %+v", w.events(idle.Name))
	}
	for _, ev := range w.events(busy) {
		if ev.Reason == "Evicted" {
			t.Errorf("the busy runner was evicted: %s", ev.Note)
		}
	}
}

// A busy runner holds a drain for at most drainTimeout: then its pod is deleted, it
// fails DrainTimeout, and (the pool re-running killed jobs) its job is re-run once its
// run has completed.
func TestDrainTimeoutEndsTheWaitAndTheJobIsRerun(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, stack.Options{RunnerLostTimeout: lease})
	w.createNode("node-b")
	const bound = 3 * time.Second
	w.create(w.pool("bound").MaxRunners(4).Disruption(v1alpha1.DisruptionSpec{
		DrainTimeout: &metav1.Duration{Duration: bound}, Rerun: v1alpha1.RerunInfrastructureFailures}).Obj())
	busy, _, job := w.busyRunner("bound", "node-b")
	w.budgetReady("bound", 1)

	w.cordon("node-b")
	if err := w.evictPod(busy); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting the busy runner's pod: %v, want 429 (its PodDisruptionBudget)", err)
	}
	w.eventually("the busy runner Draining", func() (bool, error) {
		r, err := w.getRunner(busy)
		return err == nil && meta.IsStatusConditionTrue(r.Status.Conditions, runner.ConditionDraining), nil
	})
	failed := w.expectFailed("bound", busy, v1alpha1.ReasonDrainTimeout, 1, "drainTimeout (3s)", "cordoned")
	draining := meta.FindStatusCondition(failed.Status.Conditions, runner.ConditionDraining)
	if at := failedAt(t, failed); at.Sub(draining.LastTransitionTime.Time) < bound {
		t.Errorf("failed %s after the drain began, before drainTimeout (%s)", at.Sub(draining.LastTransitionTime.Time), bound)
	}
	if failed.Status.Rerun == nil || failed.Status.Rerun.State != v1alpha1.RerunWaiting {
		t.Errorf("record %+v, want Waiting", failed.Status.Rerun)
	}
	w.confirmDeletions()
	w.expectRerunOnce(busy, job)
}

// expectRerunOnce waits for the killed job to be re-run, checks that it was re-run
// after its run completed, once, and that the record says Done; then it leaves the
// re-run job to a runner of the pool and lets the run end green.
func (w *world) expectRerunOnce(rn string, job simgithub.Job) {
	w.t.Helper()
	w.eventuallyWithin(time.Minute, "the killed job's record Done", func() (bool, error) {
		r, err := w.getRunner(rn)
		if err != nil {
			return false, err
		}
		return r.Status.Rerun != nil && r.Status.Rerun.State == v1alpha1.RerunDone, nil
	})
	run, ok := w.sim.Workflows().Run(job.RunID)
	if !ok || len(run.Attempts) != 2 {
		w.t.Fatalf("run %d: %+v, want two attempts", job.RunID, run)
	}
	first, second := run.Attempts[0], run.Attempts[1]
	if first.DoneAt == nil || second.StartedAt.Before(*first.DoneAt) {
		w.t.Errorf("the re-run started at %s, before the run completed (%v)", second.StartedAt, first.DoneAt)
	}
	if !slices.Contains(second.Requested, job.ID) {
		w.t.Errorf("attempt 2 re-ran %v, not the killed job %d", second.Requested, job.ID)
	}
	if killed := w.simJob(job.ID); killed.Conclusion != "failure" {
		w.t.Errorf("the killed job concluded %q, want failure (its lease ran out)", killed.Conclusion)
	}
	// Nothing more: the record is Done, and a while later the run has no third attempt.
	time.Sleep(2 * time.Second)
	if run, _ := w.sim.Workflows().Run(job.RunID); len(run.Attempts) != 2 {
		w.t.Errorf("run %d has %d attempts, want 2: re-run more than once", job.RunID, len(run.Attempts))
	}
	if !slices.ContainsFunc(w.events(w.poolOf(rn)), func(e eventView) bool { return e.Reason == "JobRerun" }) {
		w.t.Errorf("no JobRerun event on the pool: %+v", w.events(w.poolOf(rn)))
	}
}

func (w *world) poolOf(rn string) string {
	r, err := w.getRunner(rn)
	if err != nil {
		w.t.Fatal(err)
	}
	return r.Spec.PoolName
}

// events are the events about an object of the namespace.
func (w *world) events(object string) []eventView {
	var out []eventView
	var list corev1.EventList
	_ = w.c.List(w.ctx(), &list, client.InNamespace(w.ns))
	for _, e := range list.Items {
		if e.InvolvedObject.Name == object || (e.Related != nil && e.Related.Name == object) {
			out = append(out, eventView{Reason: e.Reason, Note: e.Message, Type: e.Type, Object: e.InvolvedObject.Name})
		}
	}
	return out
}

type eventView struct{ Reason, Note, Type, Object string }

// spotReclaim deletes a node and its pods as a cloud and the pod garbage collector do
// when a spot node is reclaimed: the node object goes, and each of its pods is marked
// Failed with DisruptionTarget DeletionByPodGC and force-deleted.
func (w *world) spotReclaim(node string) {
	w.t.Helper()
	if err := w.c.Delete(w.ctx(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		w.t.Fatal(err)
	}
	var pods corev1.PodList
	if err := w.c.List(w.ctx(), &pods, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node {
			continue
		}
		p.Status.Phase = corev1.PodFailed
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists", LastTransitionTime: metav1.Now()})
		if err := w.c.Status().Update(w.ctx(), p); err != nil {
			w.t.Fatal(err)
		}
		if err := w.c.Delete(w.ctx(), p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			w.t.Fatal(err)
		}
	}
}

// A job killed by a spot reclaim is re-run once, only after its whole run completed:
// another job of the run runs on for a while, and the killed job waits for it.
func TestKilledJobIsRerunOnceAfterItsRunCompletes(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, stack.Options{RunnerLostTimeout: lease})
	w.createNode("spot-1")
	w.createNode("on-demand-1")
	w.create(w.pool("spot").MaxRunners(4).Rerun(v1alpha1.RerunInfrastructureFailures).Obj())
	run, err := w.sim.QueueRun(simgithub.RunSpec{Repo: "acme/api", Jobs: []simgithub.JobSpec{
		{Name: "build", Labels: []string{"linux"}, Duration: simgithub.Duration(time.Hour)},
		{Name: "test", Labels: []string{"linux"}, Duration: simgithub.Duration(time.Hour)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	first := w.newRunner("spot")
	a1 := w.startOn(first.Name, "spot-1")
	j1 := w.takeJob(a1, 0)
	second := w.newRunner("spot", first.Name)
	a2 := w.startOn(second.Name, "on-demand-1")
	j2 := w.takeJob(a2, 0)
	w.eventually("both runners busy", func() (bool, error) {
		r1, e1 := w.getRunner(first.Name)
		r2, e2 := w.getRunner(second.Name)
		return e1 == nil && e2 == nil && r1.Status.Job != nil && r2.Status.Job != nil, nil
	})
	// The other job renews its lease, as a live runner does.
	go func() {
		for ctx := w.t.Context(); ctx.Err() == nil; time.Sleep(time.Second) {
			_ = a2.RenewJob(ctx, j2.ID)
		}
	}()

	w.spotReclaim("spot-1")
	failed := w.expectFailed("spot", first.Name, v1alpha1.ReasonNodeDeleted, 1, "spot-1")
	if failed.Status.Rerun == nil || failed.Status.Rerun.State != v1alpha1.RerunWaiting {
		t.Fatalf("record %+v, want Waiting", failed.Status.Rerun)
	}
	// The killed job fails when its lease runs out; the run goes on while the other
	// job runs: nothing may be re-run meanwhile.
	w.eventuallyWithin(30*time.Second, "GitHub failing the killed job", func() (bool, error) {
		return w.simJob(j1.ID).Conclusion == "failure", nil
	})
	time.Sleep(3 * time.Second)
	if r, _ := w.sim.Workflows().Run(run.ID); len(r.Attempts) != 1 {
		t.Fatalf("the run was re-run before it completed: %+v", r)
	}
	if err := a2.CompleteJob(w.t.Context(), j2.ID, "success"); err != nil {
		t.Fatal(err)
	}
	w.expectRerunOnce(first.Name, w.simJob(j1.ID))
}

// A job that failed on its own — its steps failed, or its runner container was
// OOM-killed in a pool that does not re-run OOM-killed jobs — is never re-run, though
// the pool re-runs jobs killed by the infrastructure.
func TestJobFailedOnItsOwnIsNotRerun(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, stack.Options{RunnerLostTimeout: lease})
	w.createNode("node-c")
	w.create(w.pool("own").MaxRunners(4).Rerun(v1alpha1.RerunInfrastructureFailures).Obj())

	// Its steps failed: the runner reports failure and exits 0.
	stepsFailed, a1, j1 := w.busyRunner("own", "node-c")
	if err := a1.CompleteJob(w.t.Context(), j1.ID, "failure"); err != nil {
		t.Fatal(err)
	}
	w.setPodExitedUnlessGone(stepsFailed, 0)

	// Its runner container was OOM-killed mid-job: GitHub fails it when its lease runs
	// out.
	oom, _, j2 := w.busyRunner("own", "node-c", stepsFailed)
	w.updatePodStatus(oom, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	})
	w.eventuallyWithin(30*time.Second, "both jobs failed and their runs completed", func() (bool, error) {
		for _, j := range []int64{j1.ID, j2.ID} {
			r, _ := w.sim.Workflows().Run(w.simJob(j).RunID)
			if r.Status != "completed" {
				return false, nil
			}
		}
		return true, nil
	})
	// Longer than the rerun controller's first looks: nothing is re-run.
	time.Sleep(5 * time.Second)
	for _, j := range []int64{j1.ID, j2.ID} {
		if r, _ := w.sim.Workflows().Run(w.simJob(j).RunID); len(r.Attempts) != 1 {
			t.Errorf("job %d's run was re-run: %+v", j, r)
		}
	}
	for _, rn := range w.runners("own") {
		if rn.Status.Rerun != nil {
			t.Errorf("runner %s has a re-run record %+v", rn.Name, rn.Status.Rerun)
		}
	}
}

// A pool that has not opted in re-runs nothing: a job killed by a spot reclaim stays
// failed, and the pool says it could have been saved (an event, and the metric's
// NotOptedIn).
func TestPoolNotOptedInRerunsNothing(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, stack.Options{RunnerLostTimeout: lease})
	w.createNode("spot-2")
	w.create(w.pool("plain").MaxRunners(4).Obj())
	killed, _, job := w.busyRunner("plain", "spot-2")
	w.spotReclaim("spot-2")
	failed := w.expectFailed("plain", killed, v1alpha1.ReasonNodeDeleted, 1, "spot-2")
	if failed.Status.Rerun != nil {
		t.Errorf("record %+v in a pool that does not re-run", failed.Status.Rerun)
	}
	w.eventuallyWithin(30*time.Second, "the killed job failed and its run completed", func() (bool, error) {
		r, _ := w.sim.Workflows().Run(job.RunID)
		return r.Status == "completed", nil
	})
	time.Sleep(3 * time.Second)
	if r, _ := w.sim.Workflows().Run(job.RunID); len(r.Attempts) != 1 {
		t.Errorf("the run was re-run: %+v", r)
	}
	var said bool
	for _, ev := range w.events("plain") {
		said = said || (ev.Reason == "JobKilled" && strings.Contains(ev.Note, "spec.disruption.rerun: InfrastructureFailures"))
	}
	if !said {
		t.Errorf("no JobKilled event on the pool saying the job could have been re-run: %+v", w.events("plain"))
	}
	if got := counterValue(t, "gantry_rerun_jobs_total", map[string]string{"namespace": w.ns, "pool": "plain", "reason": v1alpha1.ReasonNodeDeleted, "result": "NotOptedIn"}); got != 1 {
		t.Errorf("gantry_rerun_jobs_total{result=NotOptedIn} = %v, want 1", got)
	}
}

// simJob is the simulator's job id.
func (w *world) simJob(id int64) simgithub.Job {
	w.t.Helper()
	j, ok := w.sim.Job(id)
	if !ok {
		w.t.Fatalf("the simulator has no job %d", id)
	}
	return j
}

// counterValue reads a counter of the controller's registry with exactly these labels.
func counterValue(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// A scale-set pool re-runs its killed jobs too: the scale set's messages carry an id of
// the Actions service's own, not the job's, and the job is found among its run's by the
// runner that ran it.
func TestScaleSetPoolRerunsAKilledJob(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, stack.Options{RunnerLostTimeout: lease, ActionsPollHold: 2 * time.Second})
	w.createNode("spot-3")
	w.create(w.pool("ssrerun").ScaleSet("").MaxRunners(2).Rerun(v1alpha1.RerunInfrastructureFailures).Obj())
	w.waitSession("ssrerun")
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"ssrerun"}, Name: "build", Duration: simgithub.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	rn := w.newRunner("ssrerun")
	a := w.startOn(rn.Name, "spot-3")
	w.takeJob(a, job.ID)
	w.eventually("the runner busy with a job of a known run", func() (bool, error) {
		r, err := w.getRunner(rn.Name)
		return err == nil && r.Status.Job != nil && r.Status.Job.RunID == job.RunID, nil
	})
	w.spotReclaim("spot-3")
	failed := w.expectFailed("ssrerun", rn.Name, v1alpha1.ReasonNodeDeleted, 1, "spot-3")
	if failed.Status.Rerun == nil || failed.Status.Rerun.State != v1alpha1.RerunWaiting {
		t.Fatalf("record %+v, want Waiting", failed.Status.Rerun)
	}
	w.expectRerunOnce(rn.Name, job)
}
