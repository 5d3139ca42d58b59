package run

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// The container jobs' report: pod starts paired per pod, each failed job with the
// runner's reason, else the Runner's, the fast ones counted against the prepare-job
// timeout, and the hooks' writes.
func TestContainerJobsReport(t *testing.T) {
	sc := Scenarios["container-jobs"]
	ptr := func(s float64) *time.Time { x := at(s); return &x }
	jobs := []simgithub.Job{
		{ID: 1, Container: "node:22", Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionSuccess, RunnerName: "linux-a", StartedAt: ptr(1), DoneAt: ptr(12)},
		{ID: 2, Container: "unpullable.invalid/node:22", Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionFailure, RunnerName: "linux-b", StartedAt: ptr(1), DoneAt: ptr(18)},
		{ID: 3, Container: "unpullable.invalid/node:22", Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionFailure, RunnerName: "linux-c", StartedAt: ptr(1), DoneAt: ptr(125)},
		{ID: 4, Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionSuccess, RunnerName: "linux-d", StartedAt: ptr(1), DoneAt: ptr(2)},
	}
	events := []agent.Event{
		{Pod: "linux-a", Kind: agent.EventCreated, At: at(0)}, {Pod: "linux-a", Kind: agent.EventRunning, At: at(1)},
		{Pod: "linux-b", Kind: agent.EventCreated, At: at(0)}, {Pod: "linux-b", Kind: agent.EventRunning, At: at(3)},
		{Pod: "linux-a", Kind: agent.EventWorkflowPodCreated, At: at(1.5)}, {Pod: "linux-a", Kind: agent.EventWorkflowPodRunning, At: at(2.5)},
		{Pod: "linux-b", Kind: agent.EventWorkflowPodCreated, At: at(3.5)},
		{Pod: "linux-c", Kind: agent.EventWorkflowPodCreated, At: at(1.5)},
		{Pod: "linux-a", Kind: agent.EventJobCompleted, Job: 1, Hooked: true, Writes: 47, At: at(12)},
		{Pod: "linux-b", Kind: agent.EventKilled, Job: 2, Cause: agent.CausePodDeleted, At: at(17)},
		{Pod: "linux-c", Kind: agent.EventJobCompleted, Job: 3, Hooked: true, Writes: 35, At: at(125),
			Cause: "pod failed to come online with error: Error: Pod linux-c-workflow is unhealthy with phase status Pending"},
		{Pod: "linux-d", Kind: agent.EventJobCompleted, Job: 4, At: at(2)},
	}
	failures := map[string]string{"linux-b": `WorkflowPodImagePullFailed: image "unpullable.invalid/node:22" cannot be pulled`}
	got := containerJobsReport(sc, jobs, events, failures, 6)
	want := &ContainerJobsReport{
		Namespace: jobsNamespace, JobsHooked: 2, WorkflowPods: 3,
		WorkflowPodStart: quantiles([]float64{1}), RunnerPodStart: quantiles([]float64{1, 3}),
		PrepareJobTimeoutSeconds: 120, ImagePullGracePeriodSeconds: 15,
		JobsFailed: []FailedContainerJob{
			{Job: 2, Image: "unpullable.invalid/node:22", Runner: "linux-b", Seconds: 17, Reason: failures["linux-b"]},
			{Job: 3, Image: "unpullable.invalid/node:22", Runner: "linux-c", Seconds: 124, Reason: "pod failed to come online with error: Error: Pod linux-c-workflow is unhealthy with phase status Pending"},
		},
		JobsFailedFast: 1, HookWritesPerJob: 41, KubeWritesPerJob: 6 + 82.0/4,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if containerJobsReport(Scenarios["burst"], jobs, events, failures, 6) != nil {
		t.Error("a scenario without container jobs has a container jobs report")
	}
}

// Every n-th job of a container scenario's burst gets an image that never pulls; the
// others the scenario's image and services.
func TestContainerJobsWorkload(t *testing.T) {
	wl := Scenarios["container-jobs"].workload()
	run := wl.burstRun(0, 24)
	var unpullables []int
	for i, j := range run.Jobs {
		if j.Container == "unpullable.invalid/node:22" {
			unpullables = append(unpullables, i)
		} else if j.Container != "node:22" || j.Services["db"] != "postgres:17" {
			t.Errorf("job %d: container %q, services %v", i, j.Container, j.Services)
		}
	}
	if diff := cmp.Diff([]int{11, 23}, unpullables); diff != "" || run.Matrix != 0 {
		t.Errorf("jobs with an unpullable image (-want +got):\n%s (matrix %d)", diff, run.Matrix)
	}
	if Scenarios["container-jobs"].hasFloor() {
		t.Error("container-jobs measures a floor: the oracle's runners have no hook identity")
	}
}

// A runner Gantry ended because its job's workflow pod could not start is listed
// among the busy runner kills, as such, and not counted a busy runner killed; any
// other pod deleted under a busy runner still is.
func TestWorkflowPodFailuresAreNotBusyRunnerKills(t *testing.T) {
	events := []agent.Event{
		{Pod: "linux-b", Kind: agent.EventKilled, Job: 2, Cause: agent.CausePodDeleted, At: at(17), Node: "n1"},
		{Pod: "linux-c", Kind: agent.EventKilled, Job: 3, Cause: agent.CausePodDeleted, At: at(18), Node: "n1"},
	}
	r := &Report{}
	r.countKills(events, nil, t0, workflowPodFailures(map[string]string{
		"linux-b": "WorkflowPodImagePullFailed: image cannot be pulled", "linux-c": "ImagePullFailed: the runner's own image"}))
	want := []BusyRunnerKill{{Pod: "linux-b", Job: 2, Node: "n1", T: 17, Cause: causeWorkflowPodFailed}, {Pod: "linux-c", Job: 3, Node: "n1", T: 18, Cause: agent.CausePodDeleted}}
	if diff := cmp.Diff(want, r.BusyRunnerKills); diff != "" || r.BusyRunnersKilled != 1 {
		t.Errorf("busy runners killed %d (want 1), kills (-want +got):\n%s", r.BusyRunnersKilled, diff)
	}
}

// The run installs what an install brings for Kubernetes mode: the hook's ClusterRole,
// the admission policy and its binding, read from config/container-hooks.
func TestContainerHookFence(t *testing.T) {
	objs, err := containerHookFence()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, fmt.Sprintf("%T %s", o, o.GetName()))
	}
	want := []string{"*v1.ClusterRole gantry-container-hook", "*v1.ValidatingAdmissionPolicy gantry-container-hook", "*v1.ValidatingAdmissionPolicyBinding gantry-container-hook"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
