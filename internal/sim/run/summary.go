package run

import (
	"fmt"
	"strings"
)

// Summary is the report as a few lines for a terminal.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario %s (demand: %s): %d jobs, %d never picked up, %d unfinished, %d failed; finished %v, drained %v\n",
		r.Scenario, r.DemandSource, r.JobsTotal, r.JobsNeverPickedUp, r.JobsUnfinished, r.JobsFailed, r.Finished, r.Drained)
	if s := r.Sessions; s != nil {
		opened := "not all within 5m"
		if s.Seconds != nil {
			opened = fmt.Sprintf("all open %.1fs after the controller was ready", *s.Seconds)
		}
		fmt.Fprintf(&b, "  %d pools: %d scale-set sessions open before the workload (%s)\n", s.Pools, s.Open, opened)
	}
	if i := r.Idle; i != nil {
		fmt.Fprintf(&b, "  idle: %s\n", i.summary())
	}
	if f := r.Fleet; f != nil {
		b.WriteString(f.summary(r.Sessions))
	}
	fmt.Fprintf(&b, "  pickup   p50 %.2fs  p95 %.2fs  p99 %.2fs  max %.2fs  at a cost of %.2f idle runner-seconds per job\n",
		r.PickupSeconds.P50, r.PickupSeconds.P95, r.PickupSeconds.P99, r.PickupSeconds.Max, r.IdleRunnerSecondsPerJob)
	if w := r.Warm; w != nil {
		fmt.Fprintf(&b, "  after the first %.0fs (the prediction's warm-up), %d jobs: pickup p50 %.2fs  p95 %.2fs  p99 %.2fs  max %.2fs  at a cost of %.2f idle runner-seconds per job\n",
			w.WarmUpSeconds, w.Jobs, w.PickupSeconds.P50, w.PickupSeconds.P95, w.PickupSeconds.P99, w.PickupSeconds.Max, w.IdleRunnerSecondsPerJob)
	}
	fmt.Fprintf(&b, "  reaction p50 %.2fs  p95 %.2fs  p99 %.2fs  max %.2fs  (job → runner pod; job → Runner object: p50 %.2fs p99 %.2fs)\n",
		r.ReactionSeconds.P50, r.ReactionSeconds.P95, r.ReactionSeconds.P99, r.ReactionSeconds.Max, r.PoolReaction.P50, r.PoolReaction.P99)
	if d := r.WebhookDelivery; d != nil {
		fmt.Fprintf(&b, "  queued webhook delivered (job → the controller's answer, GitHub's part of reaction): p50 %.2fs  p99 %.2fs  max %.2fs\n", d.P50, d.P99, d.Max)
	}
	fmt.Fprintf(&b, "  runners created %d, idle runner-seconds %.0f, drain %.1fs, busy runners killed %d\n", r.RunnersCreated, r.IdleRunnerSeconds, r.DrainSeconds, r.BusyRunnersKilled)
	if f := r.Floor; f != nil {
		fmt.Fprintf(&b, "  floor (oracle, %d workers, same jobs after Gantry's; load %.1f→%.1f): pickup p50 %.2fs p99 %.2fs, reaction p50 %.2fs p99 %.2fs; Gantry/floor p99: pickup %s, reaction %s\n",
			f.Workers, f.LoadAvg[0], f.LoadAvg[1], f.PickupSeconds.P50, f.PickupSeconds.P99, f.ReactionSeconds.P50, f.ReactionSeconds.P99, num(f.Ratio.PickupSeconds.P99), num(f.Ratio.ReactionSeconds.P99))
		if f.CPUMsPerJob != nil {
			fmt.Fprintf(&b, "  floor CPU (the oracle's process, start-up included): %.2f CPU-seconds, %.2f ms per job; Gantry's controller/floor: %s\n",
				*f.CPUSeconds, *f.CPUMsPerJob, num(f.Ratio.CPUMsPerJob))
		}
		if f.Error != "" || !f.Finished || !f.ClusterDrained {
			fmt.Fprintf(&b, "  floor NOT trustworthy: finished %v, cluster drained before %v, %d errors %s\n", f.Finished, f.ClusterDrained, f.Errors, f.Error)
		}
	}
	if r.WatchersCut != nil {
		fmt.Fprintf(&b, "  watchers the kube-apiserver cut for falling behind: %d during Gantry's part", *r.WatchersCut)
		if r.Floor != nil && r.Floor.WatchersCut != nil {
			fmt.Fprintf(&b, ", %d during the floor's", *r.Floor.WatchersCut)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  GitHub calls per job %.2f (REST %.2f, Actions service %.2f); the controller's Kubernetes API writes per job %.2f\n",
		r.GitHubCallsPerJob, r.RESTCallsPerJob, r.ActionsServiceCallsPerJob, r.KubeWritesPerJob)
	if k := r.KubeAPI; k != nil {
		fmt.Fprintf(&b, "  kube-apiserver audit of the controller: writes per job %.2f, uncached reads per job %.2f, pool status writes %d (%.2f/s per pool, busiest 10 s %.2f/s)\n",
			k.WritesPerJob, k.UncachedReadsPerJob, k.PoolStatusWrites, k.PoolStatusWritesPerSecond, k.PoolStatusWritesPeak)
		fmt.Fprintf(&b, "    by verb: %s\n", formatCounts(k.Requests))
		if k.CollectorDeletes != nil {
			fmt.Fprintf(&b, "  garbage collector's deletes for it: %.2f per job (%s); every write on the controller's behalf: %.2f per job\n",
				k.CollectorDeletesPerJob, formatCounts(k.CollectorDeletes), k.AllWritesPerJob)
		}
	}
	fmt.Fprintf(&b, "  left over: runners %d, pods %d, secrets %d, GitHub runners %d\n", r.Leftover.Runners, r.Leftover.Pods, r.Leftover.Secrets, r.Leftover.GitHubRunners)
	if c := r.ContainerJobs; c != nil {
		fmt.Fprintf(&b, "  container jobs: %d through the hook, workflow pod start p50 %.2fs p99 %.2fs (runner pods p50 %.2fs p99 %.2fs); %d failed, %d before the hook's %.0fs timeout; left over %d workflow pods, %d step pods, %d hook Secrets; Kubernetes writes per job %.2f (hooks %.2f per job they ran)\n",
			c.JobsHooked, c.WorkflowPodStart.P50, c.WorkflowPodStart.P99, c.RunnerPodStart.P50, c.RunnerPodStart.P99,
			len(c.JobsFailed), c.JobsFailedFast, c.PrepareJobTimeoutSeconds, r.Leftover.WorkflowPods, r.Leftover.StepPods, r.Leftover.HookSecrets, c.KubeWritesPerJob, c.HookWritesPerJob)
		fmt.Fprintf(&b, "    %d workflow pods, %d step pods; %d pods with a hostPort; port-mapped jobs: %d of %d green\n",
			c.WorkflowPods, c.StepPods, c.PodsWithHostPort, c.PortMappedJobsGreen, c.PortMappedJobs)
		for i, bw := range c.Bursts {
			fmt.Fprintf(&b, "    burst %d: %d jobs, %.2f writes per job on the controller's behalf = %.2f the job's own + %.2f for %d new hook slots (%s)\n",
				i+1, bw.Jobs, bw.WritesPerJob, bw.JobWritesPerJob, bw.SlotWritesPerJob, bw.NewSlots, formatCounts(bw.Writes))
		}
		for _, f := range c.JobsFailed {
			fmt.Fprintf(&b, "    job %d (%s) failed after %.1fs: %s\n", f.Job, f.Image, f.Seconds, f.Reason)
		}
	}
	if d := r.Disruptions; d != nil {
		b.WriteString(d.summary())
	}
	fmt.Fprintf(&b, "  controller: %.1f CPU-seconds (%.1f ms per job), peak RSS %.0f MiB (%d process(es))\n", r.Controller.CPUSeconds, r.ControllerCPUPerJob, float64(r.Controller.PeakRSSBytes)/(1<<20), r.Controller.Processes)
	if f := r.Faults; f != nil {
		rec := "never"
		if f.RecoverySeconds != nil {
			rec = fmt.Sprintf("%.1fs", *f.RecoverySeconds)
		}
		fmt.Fprintf(&b, "  faults: %d jobs lost, %d left over, %d busy runners killed, %d busy runners lost with their node (%d jobs failed by it), worst recovery %s\n",
			f.JobsLost, f.Leftover, f.BusyRunnersKilled, f.BusyRunnersLostWithNode, f.JobsFailedRunnerLost, rec)
		for _, in := range f.Injections {
			rec := "not recovered"
			if in.RecoverySeconds != nil {
				rec = fmt.Sprintf("recovered %.1fs after", *in.RecoverySeconds)
			}
			fmt.Fprintf(&b, "    %5.1fs–%5.1fs %-30s %s; %s\n", in.StartSeconds, in.EndSeconds, in.Name, in.Detail, rec)
		}
	}
	if c := r.Caches; c != nil {
		state := "cache"
		if !c.Enabled {
			state = "no cache"
		}
		fmt.Fprintf(&b, "  %s: hit rate %.3f, repository hit rate %.3f (%d jobs after a %.0fs warm-up); setup %.0fs, %.0fs saved; shared mount violations %d, pods pending on the cache %d; volumes at most %d, left %d (persistent volumes %d)\n",
			state, c.HitRate, c.RepoHitRate, c.Jobs, c.WarmUpSeconds, c.SetupSeconds, c.SetupSecondsSaved, c.SharedMountViolations, c.PodsPendingOnCache, c.VolumesMax, c.VolumesLeft, c.PersistentVolumesLeft)
	}
	if t := r.Trace; t != nil && t.RecordedPickupSeconds != nil {
		fmt.Fprintf(&b, "  trace %s: recorded pickup p50 %.2fs p99 %.2fs (simulated above)\n", t.File, t.RecordedPickupSeconds.P50, t.RecordedPickupSeconds.P99)
	}
	fmt.Fprintf(&b, "  host: %d CPUs, load average %.2f at the start, %.2f at the end\n", r.Host.CPUs, r.Host.LoadAvgStart[0], r.Host.LoadAvgEnd[0])
	if len(r.CPUSeconds) > 0 {
		fmt.Fprintf(&b, "  CPU-seconds by process: %s\n", formatCPU(r.CPUSeconds))
	}
	return b.String()
}
