package ux

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
	"github.com/gantry-dev/gantry/internal/usage"
)

// A job run through the real manager (with --usage-events): the runner pod of a pool
// with podLabels is labeled with the job once the runner takes it; when the runner
// exits, a RunnerUsage event holds the job's usage record — read back from the API server as `gantry usage`
// reads it (a field selector on the events' reason) — with the job as GitHub gave it,
// the pod's requests and its life from creation to its runner's exit.
func TestAJobsUsageRecord(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, func(o *stack.Options) { o.UsageEvents = true })
	pool := w.pool("used").MaxRunners(1).Obj()
	pool.Spec.Usage = &v1alpha1.UsageSpec{PodLabels: true}
	pool.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	w.create(pool)
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Workflow: "CI / Build", Name: "build (linux)",
		Labels: []string{"linux"}, Duration: simgithub.Duration(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	rn := w.runnerWithPod("used")
	w.runJob(rn.Name, job.ID)

	pod := &corev1.Pod{}
	w.eventually("the runner pod labeled with its job", 30*time.Second, func() (bool, error) {
		err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, pod)
		return err == nil && pod.Labels[usage.PodLabelRepository] == "acme.api", err
	})
	if pod.Labels[usage.PodLabelWorkflow] != "CI-Build" || pod.Annotations[usage.PodLabelWorkflow] != "CI / Build" {
		t.Errorf("pod labels %v, annotations %v: want the workflow as a label value and as it is", pod.Labels, pod.Annotations)
	}

	exited := metav1.NewTime(time.Now().Truncate(time.Second))
	w.updatePodStatus(rn.Name, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: exited}}}}
	})
	w.event(rn.Name, corev1.EventTypeNormal, usage.EventReason, 30*time.Second)
	recs, bad, err := usage.FromEvents(w.ctx(), w.c, w.ns, time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
	if err != nil || bad != 0 || len(recs) != 1 {
		t.Fatalf("records from the events: %d (%d unreadable), %v; want 1", len(recs), bad, err)
	}
	got := recs[0]
	seconds := exited.Sub(pod.CreationTimestamp.Time).Seconds()
	want := usage.Record{
		Version: 1, Namespace: w.ns, Pool: "used", Runner: rn.Name,
		Repository: "acme/api", Workflow: "CI / Build", Job: "build (linux)", JobID: job.ID, RunID: job.RunID, RunAttempt: 1,
		Labels: []string{"linux"}, Outcome: "success", RunnerResult: usage.RunnerSucceeded,
		PodCreatedAt: pod.CreationTimestamp.Time, EndedAt: exited.Time, RunnerSeconds: seconds,
		CPURequestCores: 0.5, MemoryRequestBytes: 1 << 30, RequestedCPUSeconds: seconds / 2, RequestedMemoryGiBSeconds: seconds,
	}
	// The job's times are the simulator's; each is there and in order.
	if got.QueuedAt == nil || got.PickedUpAt == nil || got.StartedAt == nil || got.FinishedAt == nil || got.QueueSeconds == nil ||
		got.StartedAt.Before(*got.QueuedAt) || got.FinishedAt.Before(*got.StartedAt) {
		t.Errorf("the job's times: queued %v, picked up %v, started %v, finished %v, queue %v", got.QueuedAt, got.PickedUpAt, got.StartedAt, got.FinishedAt, got.QueueSeconds)
	}
	got.QueuedAt, got.PickedUpAt, got.StartedAt, got.FinishedAt, got.QueueSeconds = nil, nil, nil, nil, nil
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the usage record (-want +got):\n%s", d)
	}
	m := findMetric(t, "gantry_usage_requested_cpu_seconds_total", map[string]string{"namespace": w.ns, "pool": "used", "repository": "acme/api"})
	if m == nil || m.GetCounter().GetValue() != seconds/2 {
		t.Errorf("requested CPU-seconds counted %v, want %v", m, seconds/2)
	}
}
