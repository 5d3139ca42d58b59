package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	resourcehelper "k8s.io/component-helpers/resource"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/hookrelease"
	"github.com/gantry-dev/gantry/internal/usage"
)

// Who used the runners (docs/usage.md). Every runner that had a pod or ran a job gets
// one usage record when it ends — after its finalizer is removed, so once per runner
// whatever the number of finalize passes: a log line, a RunnerUsage event on the
// Runner (with UsageOptions.Events) and the usage metrics (usagemetrics.go). A
// controller killed between the finalizer's removal and the record loses that one
// record; one restarted never repeats it.
//
// What the record needs is gathered on the way, in memory and with no write:
// trackUsage (a phase, after ensurePod) notes the runner pod's creation, requests and
// exit, and in Kubernetes mode the workflow pod's; finalize notes the pod once more
// (notePodUsage) for a process that restarted meanwhile. The job comes from the
// Tracker (demand.RanJob), else from the Runner's status.

// UsageOptions say how the controller records who used the runners.
type UsageOptions struct {
	// Repositories is how many repositories get usage series of their own (the first
	// to finish a job since the controller started); the rest are counted as "other".
	// 0 keeps none.
	Repositories int
	// Workflows is how many (repository, workflow) pairs get series of their own; the
	// rest of a kept repository's workflows are "other". 0: the workflow label is
	// empty.
	Workflows int
	// Events adds a RunnerUsage event to the log line and the metrics: one API server
	// write per runner, so off unless asked for (docs/usage.md#what-it-costs).
	Events bool
}

// usageBook is what the usage records need, per runner, until they are written: the
// pods as last seen, and the bounded label values of the metrics. Its zero value is
// ready; its bounds are set from UsageOptions on first use.
type usageBook struct {
	entries sync.Map // types.NamespacedName → *usageEntry
	once    sync.Once
	repos   *usage.Bounded
	flows   *usage.Bounded
}

// usageEntry is one runner's. A Runner's reconciles never run at once, and its entry is
// touched only from them.
type usageEntry struct {
	uid      types.UID
	pod      *podSeen
	workflow *podSeen
	// labeled: the runner pod was labeled with its job (spec.usage.podLabels);
	// labelFailed: a patch failed, and was logged.
	labeled, labelFailed bool
}

// podSeen is a pod's life and requests as the controller saw them.
type podSeen struct {
	name    string
	created time.Time
	cpu     float64 // cores
	memory  int64   // bytes
	// exited is when its runner container (a workflow pod: its last container)
	// terminated, and exitCode how; gone when the controller first saw it deleted or
	// missing.
	exited   time.Time
	exitCode int32
	gone     time.Time
}

func (b *usageBook) entry(rn *v1alpha1.Runner) *usageEntry {
	key := runnerKey(rn)
	if v, ok := b.entries.Load(key); ok && v.(*usageEntry).uid == rn.UID {
		return v.(*usageEntry)
	}
	e := &usageEntry{uid: rn.UID}
	b.entries.Store(key, e)
	return e
}

func (b *usageBook) peek(rn *v1alpha1.Runner) *usageEntry {
	if v, ok := b.entries.Load(runnerKey(rn)); ok && v.(*usageEntry).uid == rn.UID {
		return v.(*usageEntry)
	}
	return nil
}

func (b *usageBook) forget(key types.NamespacedName) { b.entries.Delete(key) }

// bounds returns the repositories and workflows with series of their own.
func (b *usageBook) bounds(o UsageOptions) (repos, flows *usage.Bounded) {
	b.once.Do(func() { b.repos, b.flows = usage.NewBounded(o.Repositories), usage.NewBounded(o.Workflows) })
	return b.repos, b.flows
}

// see notes a pod as it is now.
func (p *podSeen) see(pod *corev1.Pod, container string, now time.Time) {
	if p.created.IsZero() {
		p.name, p.created = pod.Name, pod.CreationTimestamp.Time
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		p.cpu = req.Cpu().AsApproximateFloat64()
		p.memory = req.Memory().Value()
	}
	for _, cs := range pod.Status.ContainerStatuses {
		term := cs.State.Terminated
		if (container != "" && cs.Name != container) || term == nil {
			continue
		}
		at := term.FinishedAt.Time
		if at.IsZero() {
			at = now // a kubelet always says when; seen now, it ended by now
		}
		if p.exited.IsZero() || at.After(p.exited) {
			p.exited, p.exitCode = at, term.ExitCode
		}
	}
	if pod.DeletionTimestamp != nil && p.gone.IsZero() {
		p.gone = now
	}
}

// trackUsage notes, with no write, what the runner's usage record will need: its pod,
// and in Kubernetes mode its workflow pod. A pool with spec.usage.podLabels has its
// runner pod labeled with the job once the runner takes one: one patch. Always done.
func (r *Reconciler) trackUsage(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	if s.pod == nil {
		return reconcile.Result{}, true, nil
	}
	e := r.usage.entry(s.runner)
	if e.pod == nil {
		e.pod = &podSeen{}
	}
	now := r.Clock.Now()
	e.pod.see(s.pod, v1alpha1.RunnerContainerName, now)
	if s.pool.Spec.ContainerMode.IsKubernetes() {
		if hook := hookOfPod(s.pod); hook != nil {
			wf := &corev1.Pod{}
			err := r.Client.Get(ctx, types.NamespacedName{Namespace: hook.Namespace, Name: hookrelease.WorkflowPodName(s.pod.Name)}, wf)
			switch {
			case err == nil:
				if e.workflow == nil || e.workflow.name != wf.Name || !e.workflow.created.Equal(wf.CreationTimestamp.Time) {
					e.workflow = &podSeen{}
				}
				e.workflow.see(wf, "", now)
			case apierrors.IsNotFound(err):
				if e.workflow != nil && e.workflow.gone.IsZero() {
					e.workflow.gone = now
				}
			default:
				// Usage never holds a runner back: containerHooks reads the same pod
				// and says what is wrong.
				log.FromContext(ctx).V(1).Info("Workflow pod not read for the usage record", "error", err.Error())
			}
		}
	}
	r.labelPod(ctx, s, e)
	return reconcile.Result{}, true, nil
}

// labelPod labels a running runner pod of a pool with spec.usage.podLabels with the
// repository and workflow of the job its runner took, once. A patch that fails is
// logged (once per runner) and tried again on the runner's next reconcile: the labels
// are for cost tools, and never hold the runner back.
func (r *Reconciler) labelPod(ctx context.Context, s *scope, e *usageEntry) {
	job := s.runner.Status.Job
	if e.labeled || !s.pool.Spec.Usage.PodLabelsOn() || job == nil || job.Repository == "" ||
		s.pod.DeletionTimestamp != nil || s.pod.Status.Phase != corev1.PodRunning {
		return
	}
	annotations := map[string]string{usage.PodLabelRepository: job.Repository, usage.PodLabelWorkflow: job.Workflow}
	labels := map[string]string{usage.PodLabelRepository: usage.RepositoryLabelValue(job.Repository), usage.PodLabelWorkflow: usage.LabelValue(job.Workflow)}
	pod := s.pod.DeepCopy()
	changed := false
	for k := range labels {
		if pod.Labels[k] != labels[k] || pod.Annotations[k] != annotations[k] {
			changed = true
		}
	}
	if changed {
		patch := ctrl.MergeFrom(s.pod)
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		for k := range labels {
			pod.Labels[k], pod.Annotations[k] = labels[k], annotations[k]
		}
		log.FromContext(ctx).V(1).Info("Labeling the runner pod with its job", "repository", job.Repository, "workflow", job.Workflow)
		if err := r.Client.Patch(ctx, pod, patch); ctrl.IgnoreNotFound(err) != nil {
			if !e.labelFailed {
				log.FromContext(ctx).Info("Could not label the runner pod with its job for cost tools; trying again", "error", err.Error())
			}
			e.labelFailed = true
			return
		}
	}
	e.labeled = true
}

// notePodUsage notes the runner's pod as finalize finds it in the cache: a process that
// restarted while the runner ended has not seen it yet.
func (r *Reconciler) notePodUsage(ctx context.Context, rn *v1alpha1.Runner) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: rn.Namespace, Name: rn.Name}, pod); err != nil || !metav1.IsControlledBy(pod, rn) {
		return
	}
	e := r.usage.entry(rn)
	if e.pod == nil {
		e.pod = &podSeen{}
	}
	e.pod.see(pod, v1alpha1.RunnerContainerName, r.Clock.Now())
}

// recordUsage writes the runner's usage record — log line, event, metrics — and
// forgets what was noted of it. finalize calls it once the finalizer is gone.
func (r *Reconciler) recordUsage(ctx context.Context, rn *v1alpha1.Runner) {
	e := r.usage.peek(rn)
	defer r.usage.forget(runnerKey(rn))
	rec, ok := r.usageRecord(ctx, rn, e)
	if !ok {
		return
	}
	log.FromContext(ctx).Info(usage.LogMessage, usage.LogKey, rec)
	r.observeUsage(rec)
	if !r.Usage.Events {
		return
	}
	note := usageNote(rec)
	if a, ok := r.Events.(events.AnnotatedEventRecorder); ok {
		b, err := json.Marshal(rec)
		if err == nil {
			a.AnnotatedEventf(rn, r.poolRef(rn), map[string]string{usage.Annotation: string(b)}, corev1.EventTypeNormal, usage.EventReason, usage.EventAction, "%s", note)
			return
		}
	}
	r.Events.Eventf(rn, r.poolRef(rn), corev1.EventTypeNormal, usage.EventReason, usage.EventAction, "%s", note)
}

// poolRef is the Runner's pool as an event's related object.
func (r *Reconciler) poolRef(rn *v1alpha1.Runner) *v1alpha1.RunnerPool {
	pool := &v1alpha1.RunnerPool{}
	pool.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("RunnerPool"))
	pool.Namespace, pool.Name = rn.Namespace, rn.Spec.PoolName
	return pool
}

// usageRecord builds the runner's record from what was noted (e, nil when nothing
// was), the Tracker and the Runner. false: there is nothing to record — no pod was
// ever made for it and it ran no job.
func (r *Reconciler) usageRecord(ctx context.Context, rn *v1alpha1.Runner, e *usageEntry) (usage.Record, bool) {
	rec := usage.Record{Version: usage.Version, Namespace: rn.Namespace, Pool: rn.Spec.PoolName, Runner: rn.Name}
	finishedJob := r.usageJob(&rec, rn)
	var pod podSeen
	switch {
	case e != nil && e.pod != nil:
		pod = *e.pod
	case rn.Status.PodName != "" || rec.HasJob():
		// Its pod was made, but not seen by this process: a restart. Its life is taken
		// from the Runner's, its requests from the pool's template.
		rec.Estimated = true
		pod.created = rn.CreationTimestamp.Time
		if pool := r.poolOf(ctx, rn); pool != nil {
			req := resourcehelper.PodRequests(&corev1.Pod{Spec: pool.Spec.Template.Spec}, resourcehelper.PodResourcesOptions{})
			pod.cpu, pod.memory = req.Cpu().AsApproximateFloat64(), req.Memory().Value()
		}
	default:
		return rec, false
	}
	now := r.Clock.Now()
	failed := meta.FindStatusCondition(rn.Status.Conditions, ConditionFailed)
	switch {
	case rn.Status.Phase == v1alpha1.RunnerFailed && failed != nil:
		rec.RunnerResult, rec.Reason = usage.RunnerFailed, rn.Status.Reason
	case (!pod.exited.IsZero() && pod.exitCode == 0) || rn.Status.Phase == v1alpha1.RunnerSucceeded || finishedJob:
		rec.RunnerResult = usage.RunnerSucceeded
	default:
		rec.RunnerResult = usage.RunnerRemoved
	}
	// The pod's end: its runner's exit; a failed runner's pod was deleted when it
	// failed; else the pod was gone when its finalizer went, a moment ago.
	end := now
	switch {
	case !pod.exited.IsZero():
		end = pod.exited
	case rec.RunnerResult == usage.RunnerFailed:
		end = failed.LastTransitionTime.Time
	case !pod.gone.IsZero():
		end = pod.gone
	}
	end = maxTime(end, pod.created)
	rec.PodCreatedAt, rec.EndedAt = pod.created, end
	rec.CPURequestCores, rec.MemoryRequestBytes = pod.cpu, pod.memory
	rec.RunnerSeconds, rec.RequestedCPUSeconds, rec.RequestedMemoryGiBSeconds = usage.Lifetime(pod.created, end, pod.cpu, pod.memory)
	if rec.HasJob() && rec.FinishedAt == nil && rec.RunnerResult == usage.RunnerSucceeded {
		rec.FinishedAt = &end // GitHub's word did not come: the runner's exit
	}
	if e != nil && e.workflow != nil && !e.workflow.created.IsZero() {
		w := e.workflow
		wend := end
		switch {
		case !w.exited.IsZero():
			wend = w.exited
		case !w.gone.IsZero():
			wend = w.gone
		}
		wend = maxTime(wend, w.created)
		wp := &usage.PodUsage{Name: w.name, CreatedAt: w.created, EndedAt: wend, CPURequestCores: w.cpu, MemoryRequestBytes: w.memory}
		wp.Seconds, wp.RequestedCPUSeconds, wp.RequestedMemoryGiBSeconds = usage.Lifetime(w.created, wend, w.cpu, w.memory)
		rec.WorkflowPod = wp
	}
	return rec, true
}

// usageJob fills the record's job from the Tracker, else from the Runner's status, and
// reports whether GitHub said the job completed.
func (r *Reconciler) usageJob(rec *usage.Record, rn *v1alpha1.Runner) bool {
	if r.Tracker != nil {
		if ran, ok := r.Tracker.RanJob(rn.Name); ok {
			j := ran.Job
			rec.Repository, rec.Workflow, rec.Job, rec.JobID, rec.RunID = j.Repository(), j.Workflow, j.Name, j.ID, j.RunID
			rec.RunAttempt, rec.Rerun = j.RunAttempt, j.RunAttempt > 1
			rec.Labels = j.Labels
			rec.QueuedAt = timeOr(j.CreatedAt, ran.QueuedSeenAt)
			rec.PickedUpAt = timeOr(ran.StartedSeenAt)
			rec.StartedAt = timeOr(j.StartedAt)
			rec.FinishedAt = timeOr(j.CompletedAt, ran.CompletedSeenAt)
			rec.Outcome = j.Conclusion
			if rec.Outcome == "" {
				rec.Outcome = usage.OutcomeUnknown
			}
			if start := firstTime(rec.StartedAt, rec.PickedUpAt); start != nil && rec.QueuedAt != nil {
				q := math.Round(max(0, start.Sub(*rec.QueuedAt).Seconds())*1000) / 1000
				rec.QueueSeconds = &q
			}
			return j.Conclusion != "" || !j.CompletedAt.IsZero() || !ran.CompletedSeenAt.IsZero()
		}
	}
	if j := rn.Status.Job; j != nil && j.Repository != "" {
		rec.Repository, rec.Workflow, rec.JobID, rec.RunID = j.Repository, j.Workflow, j.ID, j.RunID
		rec.Outcome = usage.OutcomeUnknown
	}
	return false
}

// usageNote is the event's note: the record for a person, under the API server's 1 KiB.
func usageNote(rec usage.Record) string {
	var b strings.Builder
	if rec.HasJob() {
		fmt.Fprintf(&b, "%s, workflow %q, job %q: ", rec.Repository, truncate(rec.Workflow, 100), truncate(rec.Job, 100))
	} else {
		b.WriteString("no job: ")
	}
	fmt.Fprintf(&b, "%.0fs on the runner", rec.RunnerSeconds)
	if rec.QueueSeconds != nil {
		fmt.Fprintf(&b, " after %.0fs queued", *rec.QueueSeconds)
	}
	if rec.Outcome != "" {
		fmt.Fprintf(&b, ", %s", rec.Outcome)
	}
	fmt.Fprintf(&b, "; runner %s", rec.RunnerResult)
	if rec.Reason != "" {
		fmt.Fprintf(&b, " (%s)", rec.Reason)
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func timeOr(ts ...time.Time) *time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return &t
		}
	}
	return nil
}

func firstTime(ts ...*time.Time) *time.Time {
	for _, t := range ts {
		if t != nil {
			return t
		}
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
