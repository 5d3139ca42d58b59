package run

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/hookrelease"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/trace"
)

// workload is what a run queues: a burst, Poisson arrivals, or a trace replay.
type workload struct {
	burst  int
	rate   float64
	steady time.Duration
	// job is the template of burst and steady jobs.
	job simgithub.JobSpec
	// repos, when set, are the repositories (OWNER/REPO) steady jobs are drawn from
	// instead of job's.
	repos []string
	// spread, when set, are the runs-on labels the burst's jobs take in turn (job i
	// the i-th modulo their number) instead of job's: one pool's scale set each.
	spread [][]string
	trace  *trace.Trace
	speed  float64
	// pipeline, when set, is queued instead: runs of jobs that need others.
	pipeline *Pipeline
	// unpullableEvery: every n-th job's container image never pulls (0: none).
	unpullableEvery int
	// org, when set, is where steady jobs come from (org.go).
	org *Org
	// containers, when set, are the container jobs' options (ContainerJobsSpec.options).
	containers *ContainerJobsSpec
}

// jobAt is the template job as the i-th job of the workload (from 0): its container
// image one that never pulls for every unpullableEvery-th, its container options.
func (wl workload) jobAt(i int) simgithub.JobSpec {
	j := wl.job
	if n := wl.unpullableEvery; n > 0 && j.Container != "" && i%n == n-1 {
		j.Container = unpullable(j.Container)
	}
	if wl.containers != nil {
		j.ContainerOptions = wl.containers.options(i)
	}
	return j
}

func (s Scenario) workload() workload {
	wl := workload{
		burst: s.Burst, rate: s.Rate, steady: s.Steady, trace: s.Trace, speed: s.TraceSpeed, pipeline: s.Pipeline,
		job: simgithub.JobSpec{Repo: org + "/app", Labels: s.jobLabels(), Duration: simgithub.Duration(s.JobDuration)},
	}
	if cj := s.ContainerJobs; cj != nil {
		wl.job.Container, wl.job.Services, wl.unpullableEvery, wl.containers = cj.Image, cj.Services, cj.UnpullableEvery, cj
	}
	if wl.org = s.Org; wl.org != nil && len(wl.org.Repos) > 0 {
		wl.job.Repo = org + "/" + wl.org.Repos[0].Name // acme/app is not one of its repositories
	}
	if s.Repos > 1 {
		for _, name := range repoNames(s) {
			wl.repos = append(wl.repos, org+"/"+name)
		}
	}
	if s.pools() > 1 {
		// runs-on: the scale set's name, as workflows select a scale set: GitHub offers
		// the job to that scale set alone (the pools share every other label).
		for i, name := range s.burstPools() {
			labels := []string{name}
			if s.Fleet != nil {
				labels = s.fleetJobLabels(i, name) // a webhook pool's by its label
			}
			wl.spread = append(wl.spread, labels)
		}
	}
	return wl
}

// burstRun is the run of the burst's jobs from the i-th to the i+n-th: a matrix of the
// job, or those jobs one by one with their labels when the burst is spread over pools.
func (wl workload) burstRun(i, n int) simgithub.RunSpec {
	run := simgithub.RunSpec{Repo: wl.job.Repo, Workflow: "CI"}
	if len(wl.spread) == 0 && wl.unpullableEvery == 0 && (wl.containers == nil || wl.containers.DockerfileEvery == 0) {
		run.Matrix, run.Template = n, wl.jobAt(i)
		return run
	}
	for k := i; k < i+n; k++ {
		j := wl.jobAt(k)
		if len(wl.spread) > 0 {
			j.Labels = wl.spread[k%len(wl.spread)]
		}
		j.Name = fmt.Sprintf("build (%d)", k+1)
		run.Jobs = append(run.Jobs, j)
	}
	return run
}

// jobQueue is where a workload queues its jobs: the GitHub simulator.
type jobQueue interface {
	QueueRun(simgithub.RunSpec) (simgithub.Run, error)
	QueueJob(simgithub.JobSpec) (simgithub.Job, error)
}

// queuedJob is a job the workload queued and the conclusion it asked its runner to
// report.
type queuedJob struct {
	id         int64
	conclusion string
}

// queueWorkload queues the workload's jobs — a burst, Poisson arrivals (seeded), or a
// trace replay — telling notify (if set) of each as soon as it is queued, and returns
// them once the last is queued.
func queueWorkload(ctx context.Context, q jobQueue, wl workload, seed uint64, notify func(queuedJob)) ([]queuedJob, error) {
	var out []queuedJob
	add := func(j queuedJob) {
		out = append(out, j)
		if notify != nil {
			notify(j)
		}
	}
	if wl.trace != nil {
		return out, replay(ctx, q, wl, add)
	}
	if wl.pipeline != nil {
		return out, queuePipeline(ctx, q, *wl.pipeline, wl.job.Labels, seed, add)
	}
	for i := 0; i < wl.burst; {
		n := min(wl.burst-i, 256) // GitHub's matrix limit
		run, err := q.QueueRun(wl.burstRun(i, n))
		if err != nil {
			return nil, fmt.Errorf("queueing the burst: %w", err)
		}
		for _, j := range run.Jobs {
			add(queuedJob{id: j.ID, conclusion: simgithub.ConclusionSuccess})
		}
		i += n
	}
	if wl.rate <= 0 || wl.steady <= 0 {
		return out, nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	repoRNG := rand.New(rand.NewPCG(seed^0x5bd1e995, seed))
	end := time.Now().Add(wl.steady)
	next := time.Now()
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / wl.rate * float64(time.Second)))
		if next.After(end) {
			return out, nil
		}
		if !fault.SleepUntil(ctx, next) {
			return nil, ctx.Err()
		}
		spec := wl.jobAt(len(out))
		if len(wl.repos) > 0 {
			spec.Repo = wl.repos[repoRNG.IntN(len(wl.repos))]
		}
		if wl.org != nil {
			j := wl.org.draw(repoRNG, time.Duration(wl.job.Duration), len(out))
			spec.Repo, spec.Workflow, spec.Name, spec.Duration = org+"/"+j.repo, j.workflow, j.name, simgithub.Duration(j.duration)
		}
		j, err := q.QueueJob(spec)
		if err != nil {
			return nil, fmt.Errorf("queueing a job: %w", err)
		}
		add(queuedJob{id: j.ID, conclusion: simgithub.ConclusionSuccess})
	}
}

// replay queues a trace's jobs at their times, each in its repository of acme and in
// its run (the first job of a run key creates the run).
func replay(ctx context.Context, q jobQueue, wl workload, add func(queuedJob)) error {
	speed := wl.speed
	if speed <= 0 {
		speed = 1
	}
	start := time.Now()
	runs := map[string]int64{}
	first := wl.trace.Jobs[0].At
	for _, tj := range wl.trace.Jobs {
		at := start.Add(time.Duration(float64((tj.At - first).Duration()) / speed))
		if !fault.SleepUntil(ctx, at) {
			return ctx.Err()
		}
		spec := simgithub.JobSpec{
			Repo: org + "/" + tj.RepoName(), Labels: tj.Labels, Name: tj.Name, Workflow: tj.Workflow, Branch: tj.Branch,
			Duration:   simgithub.Duration(time.Duration(float64(tj.Duration.Duration()) / speed)),
			Conclusion: tj.Conclusion, Container: tj.Container, Services: tj.Services,
		}
		key := ""
		if tj.Run != "" {
			key = strings.ToLower(tj.RepoName()) + "\x00" + string(tj.Run)
			spec.RunID = runs[key]
		}
		j, err := q.QueueJob(spec)
		if err != nil {
			return fmt.Errorf("replaying a job of %s queued at %.3fs: %w", tj.Repo, float64(tj.At), err)
		}
		if key != "" {
			runs[key] = j.RunID
		}
		concl := tj.Conclusion
		if concl == "" {
			concl = simgithub.ConclusionSuccess
		}
		add(queuedJob{id: j.ID, conclusion: concl})
	}
	return nil
}

// repoNames are the repositories of acme the workload needs.
func repoNames(sc Scenario) []string {
	if sc.Trace == nil && sc.Org != nil {
		return sc.Org.names()
	}
	if sc.Trace == nil && sc.Repos > 1 {
		out := make([]string, sc.Repos)
		for i := range out {
			out[i] = fmt.Sprintf("repo-%d", i+1)
		}
		return out
	}
	if sc.Trace == nil {
		return []string{"app"}
	}
	seen := map[string]bool{}
	var out []string
	for _, j := range sc.Trace.Jobs {
		if n := strings.ToLower(j.RepoName()); !seen[n] {
			seen[n] = true
			out = append(out, j.RepoName())
		}
	}
	return out
}

// jobLister is where a run reads its jobs back: the GitHub simulator.
type jobLister interface{ Jobs() []simgithub.Job }

// completedJobs counts the completed jobs, and says when the last completed.
func completedJobs(jobs []simgithub.Job) (done int, last time.Time) {
	for _, j := range jobs {
		if j.Status == simgithub.StatusCompleted {
			done++
			if j.DoneAt != nil && j.DoneAt.After(last) {
				last = *j.DoneAt
			}
		}
	}
	return done, last
}

// waitJobs waits until the n jobs queued after the first skip all completed, or the
// deadline. It returns those jobs, whether they all completed, and when the last did.
func waitJobs(ctx context.Context, sim jobLister, skip, n int, deadline time.Time) ([]simgithub.Job, bool, time.Time) {
	var jobs []simgithub.Job
	for {
		all := sim.Jobs()
		jobs = all[min(skip, len(all)):]
		done, last := completedJobs(jobs)
		if len(jobs) >= n && done == len(jobs) {
			return jobs, true, last
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return jobs, false, time.Time{}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitDrained waits until no Runner is left in the cluster nor on GitHub — watched,
// then confirmed by a List — and no pod or Secret of Gantry's nor of the container
// hooks': a finished runner's go with it through the garbage collector.
func waitDrained(ctx context.Context, c client.Client, runners *runnerWatch, sim *simgithub.Sim, deadline time.Time) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(runners.runners()) == 0 && len(sim.Runners()) == 0 {
			var rs v1alpha1.RunnerList
			if err := c.List(ctx, &rs, client.InNamespace(namespace)); err == nil && len(rs.Items) == 0 {
				if lo := leftovers(ctx, c, sim); lo.Pods == 0 && lo.Secrets == 0 && lo.WorkflowPods == 0 && lo.StepPods == 0 && lo.HookSecrets == 0 {
					return true
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}

func leftovers(ctx context.Context, c client.Client, sim *simgithub.Sim) Leftover {
	var lo Leftover
	managed := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	var rs v1alpha1.RunnerList
	if err := c.List(ctx, &rs, client.InNamespace(namespace)); err == nil {
		lo.Runners = len(rs.Items)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), managed); err == nil {
		lo.Pods = len(pods.Items)
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(namespace), managed); err == nil {
		lo.Secrets = len(secrets.Items)
	}
	hooks := client.HasLabels{agent.LabelRunnerPod}
	if err := c.List(ctx, &pods, hooks); err == nil {
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, hookrelease.StepPodPrefix(p.Labels[agent.LabelRunnerPod])) {
				lo.StepPods++
			} else {
				lo.WorkflowPods++
			}
		}
	}
	if err := c.List(ctx, &secrets, hooks); err == nil {
		lo.HookSecrets = len(secrets.Items)
	}
	lo.GitHubRunners = len(sim.Runners())
	return lo
}

// drainTimeout bounds the wait for the pool to drain: two minutes, plus what the
// scenario's recovery settings can hold a runner for after its job.
func drainTimeout(sc Scenario) time.Duration {
	d := 2 * time.Minute
	if sc.Faults != nil {
		grace := sc.PodTerminationGracePeriod
		if grace == 0 {
			grace = 30 * time.Second
		}
		d += sc.NodeLostTimeout + sc.FailedRunnerRetention + sc.RunnerLostTimeout + sc.UnreachableToleration + sc.NodeMonitorGracePeriod + grace
	}
	return d
}
