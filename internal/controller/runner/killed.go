package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/rerun"
)

// Jobs killed under their runner. A runner that fails while it runs a job kills that
// job: GitHub fails it about ten minutes later, when the runner's job lease runs out.
// Whether the failure was the infrastructure's — and the job worth running again — is
// killedByInfrastructure's rule; the record that has it re-run (status.rerun, Waiting)
// is written with the failure itself, so no write is added, and the rerun package
// takes it from there. A pool that does not re-run is told what it could have saved.

// killedByInfrastructure reports whether a runner that failed for reason, while it ran
// a job, was killed by the infrastructure rather than by its job:
//   - NodeLost, NodeDeleted (a spot reclaim), DrainTimeout: yes;
//   - Evicted (a drain's eviction, a preemption, the taint manager, a kubelet under node
//     pressure): yes, unless the kubelet evicted the pod for going over a limit of its
//     own (ephemeral storage of the pod, a container or an emptyDir: the job's doing);
//   - OOMKilled: yes (the reason is set only where the pool re-runs OOM-killed jobs);
//   - anything else — the pod deleted by someone, a container that exited — no.
func killedByInfrastructure(reason string, pod *corev1.Pod) bool {
	switch reason {
	case v1alpha1.ReasonNodeLost, v1alpha1.ReasonNodeDeleted, v1alpha1.ReasonDrainTimeout, v1alpha1.ReasonOOMKilled:
		return true
	case v1alpha1.ReasonEvicted:
		return !evictedForOwnLimit(pod)
	}
	return false
}

// evictedForOwnLimit reports whether the kubelet evicted the pod for using more local
// storage than its own limits allow. The kubelet's messages (pkg/kubelet/eviction,
// helpers.go): "Pod ephemeral local storage usage exceeds the total limit of containers
// …", "Usage of EmptyDir volume … exceeds the limit …", "Container … exceeded its local
// ephemeral storage limit …"; under node pressure it says "The node was low on
// resource: …".
func evictedForOwnLimit(pod *corev1.Pod) bool {
	if pod == nil || pod.Status.Reason != "Evicted" {
		return false
	}
	msg := pod.Status.Message
	return strings.Contains(msg, "exceeds the total limit of containers") ||
		(strings.Contains(msg, "Usage of EmptyDir volume") && strings.Contains(msg, "exceeds the limit")) ||
		strings.Contains(msg, "exceeded its local ephemeral storage limit")
}

// oomKilled reports whether the runner container ended killed for its memory.
func oomKilled(pod *corev1.Pod) bool {
	cs := runnerStatus(pod)
	return cs != nil && cs.State.Terminated != nil && cs.State.Terminated.Reason == "OOMKilled"
}

// ranJob reports whether the runner had a job when it failed: GitHub gave it one (the
// job is known) or GitHub refused to remove it as busy.
func ranJob(rn *v1alpha1.Runner) bool {
	return rn.Status.Job != nil || rn.Status.Phase == v1alpha1.RunnerBusy
}

// noteKilledJob is fail's word on the job of a runner failing for reason: when it ran
// one and the infrastructure killed it, the pool is told (an event) and it is counted
// (gantry_runner_jobs_killed_total); in a pool that re-runs such jobs the re-run record
// is set, Waiting, in the status being written — Skipped at once when the job's run is
// not known — and in one that does not, the job is counted among those it could have
// saved (gantry_rerun_jobs_total, result NotOptedIn). A runner of a pool being deleted
// is lost on purpose: nothing is noted.
func (r *Reconciler) noteKilledJob(ctx context.Context, s *scope, reason string) {
	rn, pool := s.runner, s.pool
	if !ranJob(rn) || !killedByInfrastructure(reason, s.pod) || !pool.DeletionTimestamp.IsZero() || rn.Status.Rerun != nil {
		return
	}
	jobsKilled.WithLabelValues(rn.Namespace, pool.Name, reason).Inc()
	what := "its job"
	if j := rn.Status.Job; j != nil && j.ID > 0 {
		what = fmt.Sprintf("job %d", j.ID)
	}
	if j := rn.Status.Job; j != nil && j.RunID != 0 {
		what += fmt.Sprintf(" (workflow run %d of %s)", j.RunID, j.Repository)
	}
	if !pool.Spec.Disruption.RerunsInfrastructureFailures() {
		rerun.CountNotOptedIn(rn.Namespace, pool.Name, reason)
		r.Events.Eventf(pool, rn, corev1.EventTypeWarning, rerun.EventJobKilled, "Rerun",
			"runner %s failed (%s) and killed %s, which GitHub fails; set spec.disruption.rerun: InfrastructureFailures to have Gantry re-run such jobs",
			rn.Name, reason, what)
		return
	}
	rn.Status.Rerun = &v1alpha1.RunnerRerun{State: v1alpha1.RerunWaiting,
		Message: "waiting for the job's workflow run to complete: GitHub re-runs a job only then"}
	if j := rn.Status.Job; j == nil || j.RunID == 0 || !strings.Contains(j.Repository, "/") {
		rn.Status.Rerun = &v1alpha1.RunnerRerun{State: v1alpha1.RerunSkipped,
			Message: "the job's workflow run is not known (GitHub never said which job the runner took): nothing can be re-run"}
		rerun.Count(rn.Namespace, pool.Name, reason, rerun.ResultUnknownRun)
		log.FromContext(ctx).Info("Killed job cannot be re-run: its workflow run is not known")
		return
	}
	r.Events.Eventf(pool, rn, corev1.EventTypeWarning, rerun.EventJobKilled, "Rerun",
		"runner %s failed (%s) and killed %s; Gantry re-runs it once its workflow run has completed", rn.Name, reason, what)
}

// podEnd is what the informer last saw of a runner pod that was deleted: its node, and
// the reason of its DisruptionTarget condition, if any. A pod the pod garbage collector
// removed because its node is gone carries DeletionByPodGC, and goes within
// milliseconds: a reconcile rarely reads it before it is gone.
type podEnd struct {
	uid        types.UID
	node       string
	disruption string
	// ownLimit: the kubelet evicted it for going over its own storage limits.
	ownLimit bool
}

// podEnds remembers the last state of deleted runner pods, by runner, until the runner
// is gone. Its zero value is ready.
type podEnds struct {
	m sync.Map // types.NamespacedName (the runner) → podEnd
}

// deleted records a runner pod's deletion, from the pod watch.
func (p *podEnds) deleted(pod *corev1.Pod) {
	name := pod.Labels[v1alpha1.LabelRunner]
	if name == "" {
		return
	}
	end := podEnd{uid: pod.UID, node: pod.Spec.NodeName, ownLimit: evictedForOwnLimit(pod)}
	if c := podCondition(pod, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
		end.disruption = c.Reason
	}
	p.m.Store(types.NamespacedName{Namespace: pod.Namespace, Name: name}, end)
}

func (p *podEnds) get(key types.NamespacedName) (podEnd, bool) {
	v, ok := p.m.Load(key)
	if !ok {
		return podEnd{}, false
	}
	return v.(podEnd), true
}

func (p *podEnds) forget(key types.NamespacedName) { p.m.Delete(key) }

// vanishedUnder says why the pod of a runner that ran a job is gone when GitHub has not
// said the job finished: its node was deleted (the pod garbage collector's
// DeletionByPodGC on the pod's last state, or the node is gone from the cluster or
// being deleted), or the pod was evicted. "" when nothing says so (the pod was deleted
// by someone, or its end is not known): the runner ends as one whose job ended.
func (r *Reconciler) vanishedUnder(ctx context.Context, s *scope) (reason, message string) {
	if r.Tracker != nil && r.Tracker.Finished(s.runner.Name) {
		return "", ""
	}
	job := "its job"
	if j := s.runner.Status.Job; j != nil && j.ID > 0 {
		job = fmt.Sprintf("job %d", j.ID)
	}
	end, _ := r.ends.get(runnerKey(s.runner))
	if end.ownLimit {
		return "", "" // its job's doing: the runner ends as one whose job ended
	}
	node := end.node
	if node == "" {
		node = s.runner.Status.NodeName
	}
	switch end.disruption {
	case "":
	case podGCDisruption:
		return v1alpha1.ReasonNodeDeleted, fmt.Sprintf("node %s was deleted while the runner ran %s (a spot reclaim, or a node removed without a drain); the pod garbage collector removed its pod", node, job)
	default:
		return v1alpha1.ReasonEvicted, fmt.Sprintf("the runner's pod was evicted while running %s (%s) and is gone", job, end.disruption)
	}
	if node == "" || !r.Nodes.Enabled() {
		return "", ""
	}
	n, err := r.Nodes.Get(ctx, node)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil || n.DeletionTimestamp.IsZero():
		return "", ""
	}
	return v1alpha1.ReasonNodeDeleted, fmt.Sprintf("the runner's pod is gone, and so is its node %s, while the runner ran %s (a spot reclaim, or a node removed without a drain)", node, job)
}

// podGCDisruption is the reason of the DisruptionTarget condition the pod garbage
// collector puts on a pod whose node no longer exists before it deletes it
// (kube-controller-manager's podgc: "PodGC: node no longer exists").
const podGCDisruption = "DeletionByPodGC"
