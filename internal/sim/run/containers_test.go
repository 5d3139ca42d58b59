package run

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// The container jobs' report: pod starts paired per pod, each failed job with the
// runner's reason, else the Runner's, the fast ones counted against the prepare-job
// timeout, the hooks' writes, step pods, pods with a hostPort, the port-mapped jobs
// (but those made to fail) and how many of them were green.
func TestContainerJobsReport(t *testing.T) {
	sc := Scenarios["container-jobs"]
	ptr := func(s float64) *time.Time { x := at(s); return &x }
	mapped := &runnerapi.ContainerOptions{ServicePorts: map[string][]string{"postgres": {"5432:5432"}}}
	jobs := []simgithub.Job{
		{ID: 1, Container: "node:22", ContainerOptions: mapped, Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionSuccess, RunnerName: "linux-a", StartedAt: ptr(1), DoneAt: ptr(12)},
		{ID: 2, Container: "unpullable.invalid/node:22", ContainerOptions: mapped, Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionFailure, RunnerName: "linux-b", StartedAt: ptr(1), DoneAt: ptr(18)},
		{ID: 3, Container: "unpullable.invalid/node:22", Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionFailure, RunnerName: "linux-c", StartedAt: ptr(1), DoneAt: ptr(125)},
		{ID: 4, Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionSuccess, RunnerName: "linux-d", StartedAt: ptr(1), DoneAt: ptr(2)},
		{ID: 5, Container: "node:22", ContainerOptions: mapped, Status: simgithub.StatusCompleted, Conclusion: simgithub.ConclusionFailure, RunnerName: "linux-e", StartedAt: ptr(1), DoneAt: ptr(3)},
	}
	events := []agent.Event{
		{Pod: "linux-a", Kind: agent.EventCreated, At: at(0)}, {Pod: "linux-a", Kind: agent.EventRunning, At: at(1)},
		{Pod: "linux-b", Kind: agent.EventCreated, At: at(0)}, {Pod: "linux-b", Kind: agent.EventRunning, At: at(3)},
		{Pod: "linux-a", Kind: agent.EventWorkflowPodCreated, At: at(1.5)}, {Pod: "linux-a", Kind: agent.EventWorkflowPodRunning, At: at(2.5)},
		{Pod: "linux-a", Kind: agent.EventStepPodCreated, At: at(3)},
		{Pod: "linux-b", Kind: agent.EventWorkflowPodCreated, At: at(3.5)},
		{Pod: "linux-c", Kind: agent.EventWorkflowPodCreated, At: at(1.5), HostPorts: 1},
		{Pod: "linux-a", Kind: agent.EventJobCompleted, Job: 1, Hooked: true, Writes: 47, At: at(12)},
		{Pod: "linux-b", Kind: agent.EventKilled, Job: 2, Cause: agent.CausePodDeleted, At: at(17)},
		{Pod: "linux-c", Kind: agent.EventJobCompleted, Job: 3, Hooked: true, Writes: 35, At: at(125),
			Cause: "pod failed to come online with error: Error: Pod linux-c-workflow is unhealthy with phase status Pending"},
		{Pod: "linux-d", Kind: agent.EventJobCompleted, Job: 4, At: at(2)},
		{Pod: "linux-e", Kind: agent.EventJobCompleted, Job: 5, Hooked: true, Writes: 18, At: at(3), Cause: "failed to create job pod: hostPort"},
	}
	failures := map[string]string{"linux-b": `WorkflowPodImagePullFailed: image "unpullable.invalid/node:22" cannot be pulled`}
	in := reportInputs{jobs: jobs, events: events, runnerFailures: failures}
	got := containerJobsReport(sc, in, 6)
	want := &ContainerJobsReport{
		Namespace: jobsNamespace, JobsHooked: 3, WorkflowPods: 3, StepPods: 1, PodsWithHostPort: 1, PortMappedJobs: 2, PortMappedJobsGreen: 1,
		WorkflowPodStart: quantiles([]float64{1}), RunnerPodStart: quantiles([]float64{1, 3}),
		PrepareJobTimeoutSeconds: 120, ImagePullGracePeriodSeconds: 15,
		JobsFailed: []FailedContainerJob{
			{Job: 2, Image: "unpullable.invalid/node:22", Runner: "linux-b", Seconds: 17, Reason: failures["linux-b"]},
			{Job: 3, Image: "unpullable.invalid/node:22", Runner: "linux-c", Seconds: 124, Reason: "pod failed to come online with error: Error: Pod linux-c-workflow is unhealthy with phase status Pending"},
			{Job: 5, Image: "node:22", Runner: "linux-e", Seconds: 2, Reason: "failed to create job pod: hostPort"},
		},
		JobsFailedFast: 2, HookWritesPerJob: round2(100.0 / 3), KubeWritesPerJob: 6 + 100.0/5,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if containerJobsReport(Scenarios["burst"], in, 6) != nil {
		t.Error("a scenario without container jobs has a container jobs report")
	}
}

// The writes on the controller's behalf are split at the second burst, each burst's per
// job of its own, the creates that make new hook slots apart from the job's own writes.
func TestBurstWrites(t *testing.T) {
	jobs := []simgithub.Job{{ID: 1, QueuedAt: at(0)}, {ID: 2, QueuedAt: at(0)}, {ID: 3, QueuedAt: at(50)}, {ID: 4, QueuedAt: at(50)}}
	w := func(s float64, verb, res string) auditWrite {
		return auditWrite{at: at(s), verb: verb, resource: res, ns: "x"}
	}
	writes := []auditWrite{
		w(1, "create", "runners"), w(1, "create", "runners"), w(2, "create", "namespaces"), w(2, "create", "namespaces"),
		w(2, "create", "serviceaccounts"), w(2, "create", "serviceaccounts"), w(2, "create", "rolebindings"), w(3, "delete", "runners"),
		w(51, "create", "runners"), w(51, "patch", "serviceaccounts"), w(52, "create", "runners"),
		{at: at(60), verb: "delete", resource: "pods", collector: true},
	}
	got := burstWrites(writes, jobs, at(50))
	want := []BurstWrites{
		{Jobs: 2, WritesPerJob: 4, NewSlots: 2, SlotWritesPerJob: 2.5, JobWritesPerJob: 1.5,
			Writes: map[string]int64{"create runners": 2, "create namespaces": 2, "create serviceaccounts": 2, "create rolebindings": 1, "delete runners": 1}},
		{Jobs: 2, WritesPerJob: 2, JobWritesPerJob: 2,
			Writes: map[string]int64{"create runners": 2, "patch serviceaccounts": 1, "collector delete pods": 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if one := burstWrites(writes, jobs, time.Time{}); len(one) != 1 || one[0].Jobs != 4 || one[0].NewSlots != 2 {
		t.Errorf("without a second burst: %+v, want one burst of 4 jobs, 2 new slots", one)
	}
}

// Every n-th job of a container scenario's burst gets an image that never pulls, every
// DockerfileEvery-th a Dockerfile action step too; the others the scenario's image,
// services, ports, credentials and image action.
func TestContainerJobsWorkload(t *testing.T) {
	wl := Scenarios["container-jobs"].workload()
	run := wl.burstRun(0, 24)
	var unpullables, dockerfiles []int
	for i, j := range run.Jobs {
		o := j.ContainerOptions
		if j.Container == "unpullable.invalid/node:22" {
			unpullables = append(unpullables, i)
		} else if j.Container != "node:22" || j.Services["postgres"] != "postgres:17" || j.Services["redis"] != "redis:7" {
			t.Errorf("job %d: container %q, services %v", i, j.Container, j.Services)
		}
		if o == nil || !o.Credentials || len(o.ServicePorts["postgres"]) != 1 || o.ServicePorts["postgres"][0] != "5432:5432" ||
			len(o.Steps) == 0 || o.Steps[0].Image != "alpine:3.20" || o.Steps[0].Entrypoint == "" {
			t.Errorf("job %d: container options %+v", i, o)
			continue
		}
		if last := o.Steps[len(o.Steps)-1]; last.Action != "" {
			dockerfiles = append(dockerfiles, i)
		}
	}
	if diff := cmp.Diff([]int{11, 23}, unpullables); diff != "" || run.Matrix != 0 {
		t.Errorf("jobs with an unpullable image (-want +got):\n%s (matrix %d)", diff, run.Matrix)
	}
	if diff := cmp.Diff([]int{0, 20}, dockerfiles); diff != "" {
		t.Errorf("jobs with a Dockerfile action (-want +got):\n%s", diff)
	}
	if err := Scenarios["container-jobs"].Validate(); err != nil {
		t.Errorf("container-jobs: %v", err)
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
