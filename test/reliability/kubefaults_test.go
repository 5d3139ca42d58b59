package reliability

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Kubernetes misbehaves in turn:
//
//   - a node is lost with runner pods on it (idle and busy): its pods are deleted by
//     the node lifecycle controller but stay terminating, no kubelet confirming; the
//     runners fail as NodeLost after recovery.nodeLostTimeout and are replaced;
//   - a drain's eviction of a runner pod is refused by the pool's PodDisruptionBudget;
//     runner pods are preempted: the runners fail as Evicted and are replaced at once —
//     a disruption is not the pool's fault and does not make it back off;
//   - the API server is unreachable briefly, then for longer than the leader's renew
//     deadline (the controller loses its Lease, exits, and is restarted);
//   - a ResourceQuota refuses runner pods: the pool is Degraded (PodsRefused) while it
//     cannot make progress, and recovers by itself when the quota allows pods again.
//
// Through all of it: no job lost, no duplicate runner, no busy runner killed but those
// on the lost node and on preempted pods.
func TestKubernetesFaults(t *testing.T) {
	t.Parallel()
	s := scale()
	w := newWorld(t, worldOptions{viaAPIProxy: true})
	ctl := w.controller("replica-0", nil)
	pool := w.pool("kube").MinIdle(3).MaxRunners(int32(40 * s)).Obj()
	pool.Spec.Recovery = v1alpha1.RecoverySpec{NodeLostTimeout: &metav1.Duration{Duration: 3 * time.Second}}
	w.create(pool)
	w.leader(60 * time.Second)
	idle := func(n int32) func() bool {
		return func() bool { p := w.getPool("kube"); return p.Status.IdleRunners == n && p.Status.PendingRunners == 0 }
	}

	// A node is lost. The jobs run long enough for the pool to be seen with them busy and
	// its idle runners back, on a CI machine running other packages' tests beside it.
	w.queue(6*s, 30*time.Second)
	w.eventually("busy and idle runners", time.Minute, func() bool {
		return w.jobsIn(simgithub.StatusInProgress) == 6*s && idle(3)()
	})
	const lostNode = "node-b"
	onNode := w.kubelet.loseNode(lostNode)
	for _, name := range onNode {
		w.fault(name, "node lost")
	}
	lostAt := time.Now()
	time.Sleep(time.Second)
	// The node lifecycle controller deletes the node's pods; nothing confirms it.
	for _, name := range onNode {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cp.kube.CoreV1().Pods(w.ns).Delete(ctx, name, metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	w.eventually("the lost node's runners to fail as NodeLost", time.Minute, func() bool {
		return w.failedWith(v1alpha1.ReasonNodeLost) == len(onNode)
	})
	w.eventually("replacements for the lost node's idle runners", time.Minute, idle(3))
	w.fig.measure("node_lost_runners", float64(len(onNode)))
	w.fig.measure("node_lost_to_replaced_seconds", round(time.Since(lostAt).Seconds()))
	w.fig.fault(fault{Kind: "node lost with runner pods on it", Count: len(onNode), Survived: !t.Failed(),
		Detail: fmt.Sprintf("%d runners failed as NodeLost after nodeLostTimeout 3s and were replaced in %.1fs", len(onNode), time.Since(lostAt).Seconds())})
	w.eventually("the lost node's pods to be gone", 30*time.Second, func() bool {
		for _, name := range onNode {
			if _, err := cp.kube.CoreV1().Pods(w.ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
				return false
			}
		}
		return true
	})

	// A drain's evictions of idle runners' pods are refused (the pool's budget: Gantry
	// retires idle runners from a node being drained itself); the scheduler preempts
	// them for pods of a higher priority, which no budget stops.
	victims := w.idleRunnerPods(2)
	w.eventually("the pool's PodDisruptionBudget refusing a drain's eviction", time.Minute, func() bool { return w.evictionRefused(victims[0]) })
	evictedAt := time.Now()
	for _, name := range victims {
		w.fault(name, "preempted")
		w.preempt(name)
	}
	w.eventually("the evicted runners to fail as Evicted", time.Minute, func() bool {
		return w.failedWith(v1alpha1.ReasonEvicted) == len(victims)
	})
	w.eventually("replacements for the evicted runners", 30*time.Second, idle(3))
	replaced := time.Since(evictedAt)
	w.fig.measure("evicted_to_replaced_seconds", round(replaced.Seconds()))
	if c := meta.FindStatusCondition(w.getPool("kube").Status.Conditions, v1alpha1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("a preemption made the pool Degraded: %s: %s", c.Reason, c.Message)
	}
	w.fig.fault(fault{Kind: "runner pods preempted (a drain's evictions refused)", Count: len(victims), Survived: !t.Failed(),
		Detail: fmt.Sprintf("replaced in %.1fs", replaced.Seconds())})
	w.eventually("the jobs running before the faults", 2*time.Minute, func() bool { return w.jobsIn(simgithub.StatusInProgress) == 0 })
	w.patchMinIdle("kube", 0)
	w.eventually("idle runners retired", time.Minute, idle(0))

	// The API server is unreachable, briefly and then past the leader's renew deadline.
	for _, outage := range []time.Duration{time.Duration(4*s) * time.Second, 15 * time.Second} {
		startsBefore := ctl.startCount()
		w.apiProxy.setDown(true)
		cutAt := time.Now()
		ids := w.queue(3*s, time.Second)
		time.Sleep(outage)
		w.apiProxy.setDown(false)
		restoredAt := time.Now()
		w.eventually(fmt.Sprintf("the jobs queued during a %s API server outage", outage), 2*time.Minute, func() bool {
			for _, id := range ids {
				if j, _ := w.sim.Job(id); j.StartedAt == nil {
					return false
				}
			}
			return true
		})
		recovered := time.Since(restoredAt)
		// A leader that could not renew in time notices it a moment later and stops.
		time.Sleep(3 * time.Second)
		w.leader(time.Minute)
		restarts := ctl.startCount() - startsBefore
		// Bounds: a pool retries at least every 10 s; past the renew deadline (10 s) the
		// controller exits and its successor waits out the Lease (15 s) first.
		bound := 10*time.Second + 10*time.Second
		if outage > 10*time.Second {
			bound = restartDelay + 15*time.Second + 10*time.Second + 10*time.Second
		}
		if recovered > bound {
			t.Errorf("jobs queued during a %s API server outage started %s after it ended, want at most %s", outage, recovered.Round(time.Millisecond), bound)
		}
		key := fmt.Sprintf("api_outage_%ds_", int(outage.Seconds()))
		w.fig.measure(key+"recovered_seconds", round(recovered.Seconds()))
		w.fig.measure(key+"controller_restarts", float64(restarts))
		w.fig.fault(fault{Kind: fmt.Sprintf("API server unreachable for %s", outage), Count: 1, Seconds: round(restoredAt.Sub(cutAt).Seconds()),
			Survived: !t.Failed(), Detail: fmt.Sprintf("jobs queued during the outage started %.1fs after it ended; controller restarted %d times", recovered.Seconds(), restarts)})
	}

	// A ResourceQuota refuses runner pods.
	w.eventually("no runner pod left", time.Minute, func() bool { return w.runnerPods() == 0 })
	w.createQuota("runner-pods", 0)
	ids := w.queue(3*s, time.Second)
	quotaAt := time.Now()
	var degraded *metav1.Condition
	w.eventually("the pool Degraded while its pods are refused", time.Minute, func() bool {
		degraded = meta.FindStatusCondition(w.getPool("kube").Status.Conditions, v1alpha1.ConditionDegraded)
		return degraded != nil && degraded.Status == metav1.ConditionTrue
	})
	w.fig.measure("quota_to_degraded_seconds", round(time.Since(quotaAt).Seconds()))
	if degraded.Reason != v1alpha1.ReasonPodsRefused {
		t.Errorf("Degraded for %s (%s), want %s", degraded.Reason, degraded.Message, v1alpha1.ReasonPodsRefused)
	}
	if n := w.failedWith(""); n != len(onNode)+len(victims) {
		t.Errorf("%d runners failed; a refused pod must not fail its runner", n-len(onNode)-len(victims))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := cp.c.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "runner-pods"}}); err != nil {
		t.Fatal(err)
	}
	cancel()
	liftedAt := time.Now()
	w.eventually("the pool to recover once the quota allows pods", 2*time.Minute, func() bool {
		c := meta.FindStatusCondition(w.getPool("kube").Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionFalse && w.outstanding(ids) == 0
	})
	w.fig.measure("quota_lifted_to_recovered_seconds", round(time.Since(liftedAt).Seconds()))
	w.fig.fault(fault{Kind: "ResourceQuota refusing runner pods", Count: 1, Seconds: round(liftedAt.Sub(quotaAt).Seconds()), Survived: !t.Failed(),
		Detail: fmt.Sprintf("Degraded %s while refused; jobs ran %.1fs after the quota was lifted", v1alpha1.ReasonPodsRefused, time.Since(liftedAt).Seconds())})

	w.finish(2 * time.Minute)
	w.fig.write()
}

// failedWith counts the runners that failed with reason ("" for any).
func (w *world) failedWith(reason string) int {
	n := 0
	for _, r := range w.obs.failedRunners() {
		if reason == "" || r == reason {
			n++
		}
	}
	return n
}

// idleRunnerPods waits for n Idle runners and returns their pods.
func (w *world) idleRunnerPods(n int) []string {
	w.t.Helper()
	var out []string
	w.eventually(fmt.Sprintf("%d idle runners", n), 30*time.Second, func() bool {
		var list v1alpha1.RunnerList
		if err := cp.c.List(context.Background(), &list, client.InNamespace(w.ns)); err != nil {
			return false
		}
		out = out[:0]
		for _, r := range list.Items {
			if r.Status.Phase == v1alpha1.RunnerIdle && r.DeletionTimestamp.IsZero() && r.Status.PodName != "" && len(out) < n {
				out = append(out, r.Status.PodName)
			}
		}
		return len(out) == n
	})
	return out
}

func (w *world) patchMinIdle(pool string, n int32) {
	w.t.Helper()
	p := w.getPool(pool)
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.MinIdle = n
	if err := cp.c.Patch(context.Background(), p, patch); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) runnerPods() int {
	var pods corev1.PodList
	if err := cp.c.List(context.Background(), &pods, client.InNamespace(w.ns)); err != nil {
		return -1
	}
	return len(pods.Items)
}

// createQuota creates a ResourceQuota allowing pods pods in the namespace. envtest runs
// no quota controller, so its status — what the API server's quota admission checks
// against — is written here.
func (w *world) createQuota(name string, pods int64) {
	w.t.Helper()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}},
	}
	w.create(q)
	q.Status = corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)},
		Used: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(w.runnerPods()), resource.DecimalSI)},
	}
	if err := cp.c.Status().Update(context.Background(), q); err != nil {
		w.t.Fatal(err)
	}
}
