package run

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// ContainerJobsReport is what a Kubernetes-mode pool's container jobs did: how fast
// their workflow pods started beside the runner pods, which jobs failed and why, what
// the hooks made, left behind and wrote, and what the controller wrote per job, burst by
// burst.
type ContainerJobsReport struct {
	// Namespace is spec.containerMode.namespace: where the workflow pods ran with
	// isolation Pool, the model of the runners' own hook namespaces with isolation Runner.
	Namespace string `json:"namespace"`
	// JobsHooked is how many jobs a runner ran through the container hook.
	JobsHooked int `json:"jobs_hooked"`
	// WorkflowPods is how many workflow pods the hooks created, StepPods how many step
	// pods (of image actions).
	WorkflowPods int `json:"workflow_pods"`
	StepPods     int `json:"step_pods"`
	// PodsWithHostPort is how many pods of the run (runner, workflow and step pods, as
	// the watches saw them created) ask for a hostPort: 0 when no port mapping reached
	// the cluster as one.
	PodsWithHostPort int `json:"pods_with_host_port"`
	// PortMappedJobs are the jobs whose job container or a service maps a port
	// ("5432:5432"), but for those the scenario makes fail (an image that never pulls, a
	// Dockerfile action); PortMappedJobsGreen how many of them succeeded.
	PortMappedJobs      int `json:"port_mapped_jobs"`
	PortMappedJobsGreen int `json:"port_mapped_jobs_green"`
	// WorkflowPodStart is each workflow pod's start (created → Running, as a watch saw
	// them), RunnerPodStart each runner pod's, measured alike.
	WorkflowPodStart Quantiles `json:"workflow_pod_start_seconds"`
	RunnerPodStart   Quantiles `json:"runner_pod_start_seconds"`
	// PrepareJobTimeoutSeconds is how long the hook waits for a workflow pod
	// (containerMode.prepareJobTimeout); ImagePullGracePeriodSeconds the pool's
	// recovery.imagePullGracePeriod, within which Gantry ends a runner whose workflow
	// pod cannot pull its image.
	PrepareJobTimeoutSeconds    float64 `json:"prepare_job_timeout_seconds"`
	ImagePullGracePeriodSeconds float64 `json:"image_pull_grace_period_seconds"`
	// JobsFailed are the container jobs that did not succeed; JobsFailedFast how many
	// of them ended before the hook's own timeout would have ended them.
	JobsFailed     []FailedContainerJob `json:"jobs_failed"`
	JobsFailedFast int                  `json:"jobs_failed_fast"`
	// HookWritesPerJob is the writes the hooks made with the runners' tokens per job
	// they ran (permission reviews, pods, Secrets, execs, deletes); KubeWritesPerJob the
	// controller's and the hooks' writes together, per job of the run.
	HookWritesPerJob float64 `json:"hook_writes_per_job"`
	KubeWritesPerJob float64 `json:"kube_writes_per_job"`
	// Bursts are the writes made on the controller's behalf per burst (the second, if
	// any, on the hook slots the first made).
	Bursts []BurstWrites `json:"bursts,omitempty"`
}

// BurstWrites is what a burst of container jobs cost in Kubernetes writes made on the
// controller's behalf — its own and the garbage collector's, in any namespace — from
// the burst's start to the next's (the first burst's from the run's start).
type BurstWrites struct {
	Jobs int `json:"jobs"`
	// WritesPerJob is every such write per job of the burst: SlotWritesPerJob plus
	// JobWritesPerJob.
	WritesPerJob float64 `json:"writes_per_job"`
	// NewSlots is how many hook slots the burst made (their namespaces); SlotWritesPerJob
	// what making them wrote (namespaces, ServiceAccounts, RoleBindings, NetworkPolicies
	// created), per job: the one-time cost of a slot, which later bursts reuse.
	NewSlots         int     `json:"new_slots"`
	SlotWritesPerJob float64 `json:"slot_writes_per_job"`
	// JobWritesPerJob is the rest, per job: what each job costs on a slot that exists.
	JobWritesPerJob float64 `json:"job_writes_per_job"`
	// Writes are the burst's writes by "verb resource".
	Writes map[string]int64 `json:"writes"`
}

// FailedContainerJob is a container job that did not succeed.
type FailedContainerJob struct {
	Job    int64  `json:"job"`
	Image  string `json:"image"`
	Runner string `json:"runner,omitempty"`
	// Seconds is from the runner taking the job to GitHub concluding it.
	Seconds float64 `json:"seconds"`
	// Reason is the runner's (the hook's message) when it reported the job, else the
	// Runner's failure reason and message when Gantry ended it, else GitHub's.
	Reason string `json:"reason"`
}

// queueSecondBurst waits until the first burst's runners are gone, then queues the
// scenario's second burst of container jobs; it returns its jobs and when it was queued.
func queueSecondBurst(ctx context.Context, w *world, sc Scenario, seed uint64, deadline time.Time, out io.Writer) ([]queuedJob, time.Time, error) {
	if !waitDrained(ctx, w.cl.Client, w.runners, w.sim, deadline) {
		fmt.Fprintln(out, "The first burst's runners are not all gone: the second burst starts anyway")
	}
	wl := sc.workload()
	wl.burst = sc.ContainerJobs.SecondBurst
	at := time.Now()
	fmt.Fprintf(out, "Queueing the second burst of %d container jobs, on the hook slots of the first\n", wl.burst)
	q, err := queueWorkload(ctx, w.sim, wl, seed, nil)
	if err != nil {
		return nil, at, fmt.Errorf("queueing the second burst: %w", err)
	}
	return q, at, nil
}

// containerJobsReport builds the report of a scenario's container jobs.
func containerJobsReport(sc Scenario, in reportInputs, controllerWrites float64) *ContainerJobsReport {
	cj := sc.ContainerJobs
	if cj == nil {
		return nil
	}
	r := &ContainerJobsReport{Namespace: jobsNamespace, JobsFailed: []FailedContainerJob{},
		PrepareJobTimeoutSeconds: cj.PrepareJobTimeout.Seconds(), ImagePullGracePeriodSeconds: cj.ImagePullGracePeriod.Seconds()}
	if r.PrepareJobTimeoutSeconds == 0 {
		r.PrepareJobTimeoutSeconds = v1alpha1.DefaultPrepareJobTimeout.Seconds()
	}
	if r.ImagePullGracePeriodSeconds == 0 {
		r.ImagePullGracePeriodSeconds = v1alpha1.DefaultImagePullGracePeriod.Seconds()
	}
	completedBy := map[int64]agent.Event{}
	killed := map[int64]agent.Event{}
	var hookWrites int64
	events := in.events
	runnerStart, workflowStart := starts(events, agent.EventCreated, agent.EventRunning), starts(events, agent.EventWorkflowPodCreated, agent.EventWorkflowPodRunning)
	for _, e := range events {
		switch e.Kind {
		case agent.EventJobCompleted:
			completedBy[e.Job] = e
			if e.Hooked {
				r.JobsHooked++
				hookWrites += e.Writes
			}
		case agent.EventKilled:
			if e.Job != 0 {
				killed[e.Job] = e
			}
		case agent.EventWorkflowPodCreated:
			r.WorkflowPods++
		case agent.EventStepPodCreated:
			r.StepPods++
		}
		if e.HostPorts > 0 {
			r.PodsWithHostPort++
		}
	}
	r.RunnerPodStart, r.WorkflowPodStart = quantiles(runnerStart), quantiles(workflowStart)
	for _, j := range in.jobs {
		if portMapped(j) && !failsByDesign(j) {
			r.PortMappedJobs++
			if j.Status == simgithub.StatusCompleted && j.Conclusion == simgithub.ConclusionSuccess {
				r.PortMappedJobsGreen++
			}
		}
		if j.Container == "" || j.Status != simgithub.StatusCompleted || j.Conclusion == simgithub.ConclusionSuccess {
			continue
		}
		f := FailedContainerJob{Job: j.ID, Image: j.Container, Runner: j.RunnerName}
		if j.StartedAt != nil && j.DoneAt != nil {
			f.Seconds = round1(j.DoneAt.Sub(*j.StartedAt).Seconds())
		}
		switch e, ok := completedBy[j.ID]; {
		case ok && e.Cause != "":
			f.Reason = e.Cause
		case in.runnerFailures[j.RunnerName] != "":
			f.Reason = in.runnerFailures[j.RunnerName]
		default:
			f.Reason = "GitHub concluded it " + j.Conclusion
			if k, ok := killed[j.ID]; ok {
				f.Reason += " after its runner was killed (" + k.Cause + ")"
			}
			for _, ev := range j.Timeline {
				if ev.Type == simgithub.EventRunnerLost {
					f.Reason += ": its runner went silent"
					break
				}
			}
		}
		if f.Seconds < r.PrepareJobTimeoutSeconds {
			r.JobsFailedFast++
		}
		r.JobsFailed = append(r.JobsFailed, f)
	}
	sort.Slice(r.JobsFailed, func(a, b int) bool { return r.JobsFailed[a].Job < r.JobsFailed[b].Job })
	if r.JobsHooked > 0 {
		r.HookWritesPerJob = round2(float64(hookWrites) / float64(r.JobsHooked))
	}
	if n := len(in.jobs); n > 0 {
		r.KubeWritesPerJob = round2(controllerWrites + float64(hookWrites)/float64(n))
	}
	r.Bursts = burstWrites(in.audit.writes, in.jobs, in.secondBurstAt)
	return r
}

// portMapped reports whether job j's job container or a service maps a host port.
func portMapped(j simgithub.Job) bool {
	o := j.ContainerOptions
	if o == nil {
		return false
	}
	maps := func(ports []string) bool {
		for _, p := range ports {
			if strings.Contains(p, ":") {
				return true
			}
		}
		return false
	}
	if maps(o.Ports) {
		return true
	}
	for _, ports := range o.ServicePorts {
		if maps(ports) {
			return true
		}
	}
	return false
}

// failsByDesign reports whether the scenario made job j to fail: an image that never
// pulls, or a Dockerfile action.
func failsByDesign(j simgithub.Job) bool {
	if cluster.Unpullable(j.Container) {
		return true
	}
	if o := j.ContainerOptions; o != nil {
		for _, st := range o.Steps {
			if st.Action != "" {
				return true
			}
		}
	}
	return false
}

// slotResources are the objects a new hook slot is made of: its namespace, its
// ServiceAccounts (the slot's and the namespace's default), the RoleBinding of the
// hook's role and the runner NetworkPolicy.
var slotResources = map[string]bool{"namespaces": true, "serviceaccounts": true, "rolebindings": true, "networkpolicies": true}

// burstWrites splits the run's writes at the second burst (zero: one burst) and says
// what each burst wrote per job, a new slot's writes apart.
func burstWrites(writes []auditWrite, jobs []simgithub.Job, second time.Time) []BurstWrites {
	if len(writes) == 0 {
		return nil
	}
	bursts := []BurstWrites{{Writes: map[string]int64{}}}
	if !second.IsZero() {
		bursts = append(bursts, BurstWrites{Writes: map[string]int64{}})
	}
	of := func(t time.Time) *BurstWrites {
		if !second.IsZero() && !t.Before(second) {
			return &bursts[1]
		}
		return &bursts[0]
	}
	for _, j := range jobs {
		of(j.QueuedAt).Jobs++
	}
	slot := map[*BurstWrites]int64{}
	all := map[*BurstWrites]int64{}
	for _, w := range writes {
		b := of(w.at)
		key := w.verb + " " + w.resource
		if w.collector {
			key = "collector " + key
		}
		b.Writes[key]++
		all[b]++
		if w.verb == "create" && slotResources[w.resource] && !w.collector {
			slot[b]++
			if w.resource == "namespaces" {
				b.NewSlots++
			}
		}
	}
	for i := range bursts {
		b := &bursts[i]
		if b.Jobs == 0 {
			continue
		}
		n := float64(b.Jobs)
		b.WritesPerJob = round2(float64(all[b]) / n)
		b.SlotWritesPerJob = round2(float64(slot[b]) / n)
		b.JobWritesPerJob = round2(float64(all[b]-slot[b]) / n)
	}
	return bursts
}

// starts are the seconds from each pod's first created event to its first running
// event after it, by the events' Pod.
func starts(events []agent.Event, created, running string) []float64 {
	at := map[string]time.Time{}
	var out []float64
	for _, e := range events {
		switch e.Kind {
		case created:
			if _, ok := at[e.Pod]; !ok {
				at[e.Pod] = e.At
			}
		case running:
			if c, ok := at[e.Pod]; ok {
				out = append(out, e.At.Sub(c).Seconds())
				delete(at, e.Pod)
			}
		}
	}
	return out
}
