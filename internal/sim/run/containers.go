package run

import (
	"sort"
	"time"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// ContainerJobsReport is what a Kubernetes-mode pool's container jobs did: how fast
// their workflow pods started beside the runner pods, which jobs failed and why, what
// the hooks left behind and what they wrote.
type ContainerJobsReport struct {
	// Namespace is spec.containerMode.namespace: where the workflow pods ran with
	// isolation Pool, the model of the runners' own hook namespaces with isolation Runner.
	Namespace string `json:"namespace"`
	// JobsHooked is how many jobs a runner ran through the container hook.
	JobsHooked int `json:"jobs_hooked"`
	// WorkflowPods is how many workflow pods the hooks created.
	WorkflowPods int `json:"workflow_pods"`
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

// containerJobsReport builds the report of a scenario's container jobs.
func containerJobsReport(sc Scenario, jobs []simgithub.Job, events []agent.Event, runnerFailures map[string]string, controllerWrites float64) *ContainerJobsReport {
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
		}
	}
	r.RunnerPodStart, r.WorkflowPodStart = quantiles(runnerStart), quantiles(workflowStart)
	for _, j := range jobs {
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
		case runnerFailures[j.RunnerName] != "":
			f.Reason = runnerFailures[j.RunnerName]
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
	if n := len(jobs); n > 0 {
		r.KubeWritesPerJob = round2(controllerWrites + float64(hookWrites)/float64(n))
	}
	return r
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
