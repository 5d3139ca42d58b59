package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/hookrelease"
	"github.com/gantry-dev/gantry/internal/usage"
)

// usageEvents records the events a Reconciler writes, with their annotations.
type usageEvents struct {
	mu     sync.Mutex
	notes  []string
	annots []map[string]string
}

func (u *usageEvents) Eventf(_, _ runtime.Object, _, reason, _, note string, args ...any) {
	u.AnnotatedEventf(nil, nil, nil, "", reason, "", note, args...)
}

func (u *usageEvents) AnnotatedEventf(_, _ runtime.Object, annotations map[string]string, _, reason, _, note string, args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if reason == usage.EventReason {
		u.notes, u.annots = append(u.notes, fmt.Sprintf(note, args...)), append(u.annots, annotations)
	}
}

// runnerPod is rn's pod, created at created, requesting cpu and memory in its runner
// container and 100m and 64Mi in a sidecar.
func runnerPod(t *testing.T, c ctrl.Client, rn *v1alpha1.Runner, created time.Time, cpu, memory string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rn.Namespace, Name: rn.Name, CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{
			{Name: v1alpha1.RunnerContainerName, Image: "runner", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}},
			{Name: "dind", Image: "docker", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if err := controllerutil.SetControllerReference(rn, pod, c.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// exitPod has the pod's runner container exit with code at, and the pod Succeeded.
func exitPod(t *testing.T, c ctrl.Client, pod *corev1.Pod, at time.Time) {
	t.Helper()
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.NewTime(at)}}}}
	if err := c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

// usageLines are the usage records of the JSON log lines in b.
func usageLines(t *testing.T, b []byte) []usage.Record {
	t.Helper()
	var out []usage.Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a log line is not JSON: %s", sc.Text())
		}
		if string(line["msg"]) != `"`+usage.LogMessage+`"` {
			continue
		}
		rec, err := usage.Parse(line[usage.LogKey])
		if err != nil {
			t.Fatalf("the usage line %s: %v", sc.Text(), err)
		}
		out = append(out, rec)
	}
	return out
}

// counter is the value of a usage counter's series, or 0.
func counter(c *prometheus.CounterVec, labels ...string) float64 {
	m := &dto.Metric{}
	if err := c.WithLabelValues(labels...).Write(m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// A runner that ran a known job gets one usage record when its finalizer is removed —
// as a JSON log line and, with UsageOptions.Events, as an event holding the same
// record — with the job as GitHub described it, the pod's life from its creation to its
// runner's exit, and its requests (sidecar included) over that life; the metrics count
// it under its pool and repository. More finalize passes write nothing more.
func TestAFinishedRunnerGetsOneUsageRecord(t *testing.T) {
	r, c, pool, rn := unwrittenWorld(t)
	r.Clock = clock.RealClock{} // the exited runners' reaper waits on it
	rec := &usageEvents{}
	r.Events = rec
	r.Usage = UsageOptions{Repositories: 10, Events: true}
	t0 := time.Now().Truncate(time.Second).Add(-time.Hour)
	tracked := clocktesting.NewFakeClock(t0.Add(-9 * time.Second))
	r.Tracker = demand.NewTracker(demand.NewRouter(), tracked)
	job := demand.Job{ID: 7, RunID: 70, Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "linux"},
		Workflow: "CI", Name: "build (linux)", RunAttempt: 2, CreatedAt: t0.Add(-10 * time.Second)}
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionQueued, Job: job})
	tracked.SetTime(t0.Add(5200 * time.Millisecond))
	started := job
	started.RunnerName, started.StartedAt = rn.Name, t0.Add(5*time.Second)
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: started})
	tracked.SetTime(t0.Add(99500 * time.Millisecond))
	done := started
	done.CompletedAt, done.Conclusion = t0.Add(99*time.Second), "success"
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionCompleted, Job: done})

	pod := runnerPod(t, c, rn, t0, "500m", "1Gi")
	exitPod(t, c, pod, t0.Add(100*time.Second))
	var logs bytes.Buffer
	ctx := log.IntoContext(context.Background(), zap.New(zap.WriteTo(&logs), zap.JSONEncoder()))
	s := &scope{runner: rn, pool: pool, before: rn.DeepCopy()}
	if err := c.Get(ctx, runnerKey(rn), pod); err != nil {
		t.Fatal(err)
	}
	s.pod = pod
	if _, _, err := r.trackUsage(ctx, s); err != nil {
		t.Fatal(err)
	}
	runnerSecondsBefore := counter(usageRunnerSeconds, "ci", "linux", "acme/api", "")
	jobsBefore := counter(usageJobs, "ci", "linux", "acme/api", "")
	if err := c.Delete(ctx, rn); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.Runner{}
	if err := c.Get(ctx, runnerKey(rn), got); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.finalize(ctx, got); err != nil {
			t.Fatalf("finalize: %v", err)
		}
	}

	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	queued := 15.0
	want := usage.Record{
		Version: 1, Namespace: "ci", Pool: "linux", Runner: rn.Name,
		Repository: "acme/api", Workflow: "CI", Job: "build (linux)", JobID: 7, RunID: 70, RunAttempt: 2, Rerun: true,
		Labels: []string{"self-hosted", "linux"}, Outcome: "success",
		QueuedAt: at(-10 * time.Second), PickedUpAt: at(5200 * time.Millisecond), StartedAt: at(5 * time.Second), FinishedAt: at(99 * time.Second),
		QueueSeconds: &queued, RunnerResult: usage.RunnerSucceeded,
		PodCreatedAt: t0, EndedAt: t0.Add(100 * time.Second), RunnerSeconds: 100,
		CPURequestCores: 0.6, MemoryRequestBytes: 1<<30 + 64<<20, RequestedCPUSeconds: 60, RequestedMemoryGiBSeconds: 106.25,
	}
	lines := usageLines(t, logs.Bytes())
	if len(lines) != 1 {
		t.Fatalf("%d usage log lines, want 1:\n%s", len(lines), logs.String())
	}
	if d := cmp.Diff(want, lines[0]); d != "" {
		t.Errorf("the usage log line (-want +got):\n%s", d)
	}
	if len(rec.annots) != 1 {
		t.Fatalf("%d usage events, want 1", len(rec.annots))
	}
	fromEvent, err := usage.Parse([]byte(rec.annots[0][usage.Annotation]))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, fromEvent); d != "" {
		t.Errorf("the usage event's record (-want +got):\n%s", d)
	}
	wantNote := `acme/api, workflow "CI", job "build (linux)": 100s on the runner after 15s queued, success; runner Succeeded`
	if rec.notes[0] != wantNote || len(rec.notes[0]) > 1024 {
		t.Errorf("event note = %q, want %q", rec.notes[0], wantNote)
	}
	if d := counter(usageRunnerSeconds, "ci", "linux", "acme/api", "") - runnerSecondsBefore; d != 100 {
		t.Errorf("runner-seconds counted %v, want 100", d)
	}
	if d := counter(usageJobs, "ci", "linux", "acme/api", "") - jobsBefore; d != 1 {
		t.Errorf("jobs counted %v, want 1", d)
	}
}

// The RunnerUsage event costs a write per runner: written only when asked for, while
// the log line and the metrics are written either way.
func TestUsageEventOnlyWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		name       string
		opts       UsageOptions
		wantEvents int
	}{
		{name: "default", opts: UsageOptions{Repositories: 10}, wantEvents: 0},
		{name: "events asked for", opts: UsageOptions{Repositories: 10, Events: true}, wantEvents: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, _, _, rn := unwrittenWorld(t)
			t0 := time.Now().Truncate(time.Second).Add(-time.Hour)
			r.Clock = clocktesting.NewFakeClock(t0.Add(time.Minute))
			rec := &usageEvents{}
			r.Events, r.Usage = rec, tt.opts
			rn.Status = v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerDeleting, PodName: "p"}
			e := r.usage.entry(rn)
			e.pod = &podSeen{name: "p", created: t0, cpu: 1, gone: t0.Add(30 * time.Second)}
			var logs bytes.Buffer
			ctx := log.IntoContext(context.Background(), zap.New(zap.WriteTo(&logs), zap.JSONEncoder()))
			r.recordUsage(ctx, rn)
			if n := len(usageLines(t, logs.Bytes())); n != 1 {
				t.Errorf("%d usage log lines, want 1", n)
			}
			if len(rec.notes) != tt.wantEvents {
				t.Errorf("%d RunnerUsage events, want %d", len(rec.notes), tt.wantEvents)
			}
		})
	}
}

// How a runner ended decides its record's end: a failed runner's pod was deleted when
// it failed, an idle runner retired ends when its pod is seen gone, and a runner whose
// pod this process never saw (it restarted) is estimated from the Runner's creation
// and the pool's template. A runner with neither a pod nor a job gets no record.
func TestUsageRecordEnds(t *testing.T) {
	t0 := time.Now().Truncate(time.Second).Add(-time.Hour)
	failedAt := metav1.NewTime(t0.Add(40 * time.Second))
	for _, tt := range []struct {
		name    string
		status  v1alpha1.RunnerStatus
		seen    *podSeen
		want    func(*usage.Record)
		wantNot bool
	}{{
		name:   "failed before a job",
		status: v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerFailed, Reason: v1alpha1.ReasonImagePullFailed, PodName: "p", Conditions: []metav1.Condition{{Type: ConditionFailed, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonImagePullFailed, LastTransitionTime: failedAt}}},
		seen:   &podSeen{name: "p", created: t0, cpu: 2, memory: 4 << 30},
		want: func(r *usage.Record) {
			r.RunnerResult, r.Reason, r.EndedAt, r.RunnerSeconds = usage.RunnerFailed, v1alpha1.ReasonImagePullFailed, failedAt.Time, 40
			r.CPURequestCores, r.MemoryRequestBytes, r.RequestedCPUSeconds, r.RequestedMemoryGiBSeconds = 2, 4<<30, 80, 160
		},
	}, {
		name:   "idle runner retired",
		status: v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerDeleting, PodName: "p"},
		seen:   &podSeen{name: "p", created: t0, cpu: 1, gone: t0.Add(30 * time.Second)},
		want: func(r *usage.Record) {
			r.RunnerResult, r.EndedAt, r.RunnerSeconds, r.CPURequestCores, r.RequestedCPUSeconds = usage.RunnerRemoved, t0.Add(30*time.Second), 30, 1, 30
		},
	}, {
		name:   "pod never seen by this process",
		status: v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerDeleting, PodName: "p"},
		want: func(r *usage.Record) {
			r.RunnerResult, r.Estimated, r.EndedAt, r.RunnerSeconds = usage.RunnerRemoved, true, t0.Add(time.Minute), 60
			r.CPURequestCores, r.MemoryRequestBytes, r.RequestedCPUSeconds, r.RequestedMemoryGiBSeconds = 0.25, 512<<20, 15, 30
		},
	}, {
		name:    "no pod, no job",
		status:  v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerFailed},
		wantNot: true,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			r, c, pool, rn := unwrittenWorld(t)
			pool.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")}
			if err := c.Update(context.Background(), pool); err != nil {
				t.Fatal(err)
			}
			r.Clock = clocktesting.NewFakeClock(t0.Add(time.Minute))
			rn.CreationTimestamp = metav1.NewTime(t0)
			rn.Status = tt.status
			var e *usageEntry
			if tt.seen != nil {
				e = &usageEntry{uid: rn.UID, pod: tt.seen}
			}
			got, ok := r.usageRecord(context.Background(), rn, e)
			if tt.wantNot {
				if ok {
					t.Errorf("a record %+v, want none", got)
				}
				return
			}
			want := usage.Record{Version: 1, Namespace: "ci", Pool: "linux", Runner: rn.Name, PodCreatedAt: t0}
			tt.want(&want)
			if d := cmp.Diff(want, got); d != "" || !ok {
				t.Errorf("usageRecord (-want +got):\n%s", d)
			}
		})
	}
}

// The metrics' repositories are capped: past the cap every repository is "other",
// whose workflows are "other" too; the workflows of a kept repository are capped
// apart; a runner's time without a job is "none"; no second counts lost. A test of
// the bound that holds for an organization of any size.
func TestUsageMetricsAreCapped(t *testing.T) {
	r := &Reconciler{Usage: UsageOptions{Repositories: 3, Workflows: 4}}
	const pool = "capped"
	total := 0.0
	for i := range 2000 {
		repo := "acme/repo-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		rec := usage.Record{Namespace: "ci", Pool: pool, Repository: repo, Workflow: []string{"CI", "Lint", "Release"}[i%3], RunnerSeconds: 2}
		if i%100 == 0 {
			rec.Repository, rec.Workflow = "", "" // a runner without a job
		}
		r.observeUsage(rec)
		total += 2
	}
	series := map[[2]string]float64{}
	ch := make(chan prometheus.Metric, 100)
	go func() { usageRunnerSeconds.Collect(ch); close(ch) }()
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		l := map[string]string{}
		for _, lp := range d.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["pool"] == pool {
			series[[2]string{l["repository"], l["workflow"]}] += d.GetCounter().GetValue()
		}
	}
	// The 4 (repository, workflow) pairs kept, the other workflows of the 3 kept
	// repositories, other/other and none/none.
	if len(series) > 4+3+2 {
		t.Errorf("%d series for 2,000 repositories, want at most 9: %v", len(series), series)
	}
	repos := map[string]bool{}
	sum := 0.0
	for k, v := range series {
		repos[k[0]] = true
		sum += v
	}
	if len(repos) != 5 || !repos[usage.Other] || !repos[usage.None] {
		t.Errorf("repository values %v, want 3 repositories, other and none", repos)
	}
	if series[[2]string{usage.Other, usage.Other}] == 0 || series[[2]string{usage.None, usage.None}] != 40 {
		t.Errorf("other/other = %v, none/none = %v: want the rest and the 20 runners without a job (40 s)",
			series[[2]string{usage.Other, usage.Other}], series[[2]string{usage.None, usage.None}])
	}
	if sum != total {
		t.Errorf("the series add up to %v runner-seconds, want %v", sum, total)
	}
}

// countingClient counts the patches of pods.
type countingClient struct {
	ctrl.Client
	mu      sync.Mutex
	patches int
}

func (c *countingClient) Patch(ctx context.Context, obj ctrl.Object, patch ctrl.Patch, opts ...ctrl.PatchOption) error {
	if _, ok := obj.(*corev1.Pod); ok {
		c.mu.Lock()
		c.patches++
		c.mu.Unlock()
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// A pool with spec.usage.podLabels has its running runner pod labeled once with the
// job its runner took — valid label values, the exact names in annotations — with one
// patch, however many reconciles follow; without it, or before a job, no patch.
func TestPodLabelsCostOnePatchPerJob(t *testing.T) {
	for _, tt := range []struct {
		name        string
		podLabels   bool
		job         *v1alpha1.RunnerJob
		wantPatches int
	}{
		{"labels on, job taken", true, &v1alpha1.RunnerJob{ID: 1, Repository: "acme/web", Workflow: "CI / Build"}, 1},
		{"labels on, no job yet", true, nil, 0},
		{"labels off", false, &v1alpha1.RunnerJob{ID: 1, Repository: "acme/web", Workflow: "CI / Build"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, c, pool, rn := unwrittenWorld(t)
			counting := &countingClient{Client: c}
			r.Client = counting
			if tt.podLabels {
				pool.Spec.Usage = &v1alpha1.UsageSpec{PodLabels: true}
			}
			runnerPod(t, c, rn, time.Now(), "1", "1Gi")
			rn.Status.Job = tt.job
			for range 3 {
				pod := &corev1.Pod{}
				if err := c.Get(context.Background(), runnerKey(rn), pod); err != nil {
					t.Fatal(err)
				}
				s := &scope{runner: rn, pool: pool, pod: pod, before: rn.DeepCopy()}
				if _, done, err := r.trackUsage(context.Background(), s); err != nil || !done {
					t.Fatalf("trackUsage: done %v, %v", done, err)
				}
			}
			if counting.patches != tt.wantPatches {
				t.Errorf("%d pod patches, want %d", counting.patches, tt.wantPatches)
			}
			pod := &corev1.Pod{}
			if err := c.Get(context.Background(), runnerKey(rn), pod); err != nil {
				t.Fatal(err)
			}
			if tt.wantPatches == 1 {
				want := map[string]string{usage.PodLabelRepository: "acme.web", usage.PodLabelWorkflow: "CI-Build"}
				if d := cmp.Diff(want, pod.Labels); d != "" {
					t.Errorf("pod labels (-want +got):\n%s", d)
				}
				if pod.Annotations[usage.PodLabelWorkflow] != "CI / Build" || pod.Annotations[usage.PodLabelRepository] != "acme/web" {
					t.Errorf("pod annotations %v, want the exact names", pod.Annotations)
				}
			}
		})
	}
}

// In Kubernetes mode the record carries the job's workflow pod as the controller saw it:
// its own requests, and its life from creation to its deletion by the hook.
func TestUsageRecordsTheWorkflowPod(t *testing.T) {
	r, c, pool, rn := unwrittenWorld(t)
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	r.Clock = clk
	pool.Spec.ContainerMode = &v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeKubernetes, Namespace: "ci-jobs"}
	t0 := clk.Now().Add(-time.Minute)
	pod := runnerPod(t, c, rn, t0, "250m", "256Mi")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: EnvKubernetesNamespace, Value: "ci-jobs"}}
	wf := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci-jobs", Name: hookrelease.WorkflowPodName(pod.Name), CreationTimestamp: metav1.NewTime(t0.Add(10 * time.Second))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "job", Image: "node:22", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}}}
	if err := c.Create(context.Background(), wf); err != nil {
		t.Fatal(err)
	}
	track := func() {
		t.Helper()
		s := &scope{runner: rn, pool: pool, pod: pod, before: rn.DeepCopy()}
		if _, _, err := r.trackUsage(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	track()
	// The hook deletes the workflow pod when the job is done; the next reconcile sees it gone.
	clk.SetTime(t0.Add(40 * time.Second))
	if err := c.Delete(context.Background(), wf); err != nil {
		t.Fatal(err)
	}
	track()
	clk.SetTime(t0.Add(50 * time.Second))
	got, ok := r.usageRecord(context.Background(), rn, r.usage.peek(rn))
	if !ok {
		t.Fatal("no record")
	}
	want := &usage.PodUsage{Name: wf.Name, CreatedAt: t0.Add(10 * time.Second), EndedAt: t0.Add(40 * time.Second), Seconds: 30,
		CPURequestCores: 2, MemoryRequestBytes: 4 << 30, RequestedCPUSeconds: 60, RequestedMemoryGiBSeconds: 120}
	if d := cmp.Diff(want, got.WorkflowPod); d != "" {
		t.Errorf("the record's workflow pod (-want +got):\n%s", d)
	}
}
