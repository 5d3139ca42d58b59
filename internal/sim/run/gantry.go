package run

import (
	"context"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// runGantry runs the scenario's workload through Gantry — the sampler, the fault
// schedule, the jobs — waits for the jobs and for the pools to drain, takes what the
// report needs of the world, and stops the controller, so that nothing after it (the
// floor) is counted as Gantry's. Before the workload it waits until the controller has
// taken up every pool (waitPoolsTakenUp), for every pool's
// scale-set session (Scenario.waitsForSessions) and for the idle runners a warm
// history asks for (Scenario.WarmHistory), and holds the idle window (Scenario.Idle);
// none counts in the workload's figures. A fleet's controller is restarted after the
// idle window (restartController), and its burst followed by the single-pool burst
// (runSinglePoolBurst), whose figures are its own: the others end where it starts.
func runGantry(ctx context.Context, w *world, sc Scenario, seed uint64, out io.Writer) (reportInputs, error) {
	var sessions *Sessions
	var idle *IdleReport
	var restart *RestartReport
	names := sc.poolNames()
	waitPoolsTakenUp(ctx, w.cl.Client, names, max(poolsTakenUpWait, time.Duration(len(names))*time.Second), out)
	if sc.waitsForSessions() {
		s := waitSessions(ctx, w.sim, sc.sessionPools(), sessionsWait, out)
		if s.Seconds != nil {
			secs := round1(s.openAt.Sub(w.ctrl.launchedAt()).Seconds())
			s.SecondsFromStart = &secs
		}
		sessions = &s
	}
	if sc.WarmHistory != nil {
		waitWarm(ctx, w.cl.Client, names, warmHistoryWait, out)
	}
	if sc.Pipeline != nil && sc.MinIdle > 0 {
		waitMinIdle(ctx, w.cl.Client, names, sc.MinIdle, warmHistoryWait, out)
	}
	if sc.Idle > 0 {
		probe := idleProbe{sim: w.sim, pid: w.ctrl.pid, metricsURL: w.ctrl.metricsURL}
		idle = measureIdle(ctx, probe, w.sim, sc.sessionPools(), sc.Idle, out)
	}
	if sc.Fleet != nil && sc.Fleet.Restart != "" {
		var err error
		if restart, err = restartController(ctx, w, sc, out); err != nil {
			return reportInputs{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return reportInputs{}, err
	}

	smp := newSampler(w.runners, w.sim, w.ctrl.pid, out)
	sctx, stopSampler := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() { smp.run(sctx); close(samplerDone) }()
	defer func() { stopSampler(); <-samplerDone }()

	if w.cache != nil {
		cctx, stopCache := context.WithCancel(ctx)
		cacheDone := make(chan struct{})
		go func() { w.cache.sample(cctx, w.pools[0].Name, out); close(cacheDone) }()
		defer func() { stopCache(); <-cacheDone }()
	}

	start := time.Now()
	var injections []fault.Injection
	faultsDone := make(chan struct{})
	fctx, stopFaults := context.WithCancel(ctx)
	// On every exit path the schedule stops before the controller does: a restart in
	// flight must not outlive the run.
	defer func() { stopFaults(); <-faultsDone }()
	if sc.Faults != nil {
		sched := *sc.Faults
		if sched.Seed == 0 {
			sched.Seed = int64(seed) //nolint:gosec // any bit pattern is a fine seed
		}
		go func() {
			defer close(faultsDone)
			injections = fault.Run(fctx, sched, start, fault.Targets{
				GitHub: w.sim, Controller: w.ctrl, Nodes: simNodes{cl: w.cl, agents: w.agents}, Disruptions: w.disruptor, Log: out,
			})
		}()
	} else {
		close(faultsDone)
	}
	queued, err := queueWorkload(ctx, w.sim, sc.workload(), seed, nil)
	if err != nil {
		return reportInputs{}, err
	}
	var jobs []simgithub.Job
	var finished bool
	var lastDone time.Time
	var secondBurstAt time.Time
	if p := sc.Pipeline; p != nil {
		// Runs whose job the infrastructure killed complete, and may then be re-run.
		jobs, finished, lastDone = waitRuns(ctx, w.sim, p.Runs, sc.rerunSettle(), start.Add(sc.Timeout))
	} else {
		jobs, finished, lastDone = waitJobs(ctx, w.sim, 0, len(queued), start.Add(sc.Timeout))
	}
	if finished && sc.ContainerJobs != nil && sc.ContainerJobs.SecondBurst > 0 {
		more, at, err := queueSecondBurst(ctx, w, sc, seed, start.Add(sc.Timeout), out)
		if err != nil {
			return reportInputs{}, err
		}
		queued, secondBurstAt = append(queued, more...), at
		jobs, finished, lastDone = waitJobs(ctx, w.sim, 0, len(queued), start.Add(sc.Timeout))
	}
	// The schedule ends with the workload at the latest; a step still ahead is
	// reported as not injected.
	stopFaults()
	<-faultsDone
	if w.ctrl.pid() == 0 {
		// The run ended while a fault had the controller down: it drains the pool.
		if _, err := w.ctrl.Start(ctx); err != nil {
			return reportInputs{}, err
		}
	}
	if sc.WarmHistory != nil {
		// The history keeps the pool warm to the end of the hour: report-only from here,
		// so that it drains.
		if err := stopWarm(ctx, w.cl.Client, names); err != nil {
			return reportInputs{}, err
		}
	}
	if sc.Pipeline != nil && sc.MinIdle > 0 {
		if err := stopMinIdle(ctx, w.cl.Client, names, out); err != nil {
			return reportInputs{}, err
		}
	}
	drainStart := time.Now()
	drained := waitDrained(ctx, w.cl.Client, w.runners, w.sim, drainStart.Add(drainTimeout(sc)))
	drainedAt := time.Now()
	stopSampler()
	<-samplerDone
	var caches *cacheInputs
	if w.cache != nil {
		ci := w.cache.inputs()
		if ci.enabled {
			// The pool deleted once drained: its Delete cache's volumes go with it.
			ci.claimsLeft, ci.pvsLeft, ci.deleteErr = deletePool(ctx, w.cl.Client, w.pools[0], 2*time.Minute)
			if ci.deleteErr != nil {
				fmt.Fprintf(out, "Deleting the pool: %v\n", ci.deleteErr)
			}
		}
		caches = &ci
	}

	var lostNodePods map[string]int
	for _, in := range injections {
		if in.Kind == fault.KindNodeLost && in.Node != "" {
			if lostNodePods == nil {
				lostNodePods = map[string]int{}
			}
			pods, err := w.cl.RunnerPodsOn(ctx, in.Node)
			if err == nil {
				lostNodePods[in.Node] = len(pods)
			}
		}
	}
	in := reportInputs{
		start: start, jobs: jobs, queued: queued, events: w.agents.Events(), runnersSeen: w.runners.times(),
		calls: w.sim.CallCounts(), deliveries: w.sim.Deliveries(), samples: smp.samples(), finished: finished, lastJobDone: lastDone,
		drained: drained, drainedAt: drainedAt, injections: injections, lostNodePods: lostNodePods,
		leftover: leftovers(ctx, w.cl.Client, w.sim), cpu: processCPU(),
		sessions: sessions, idle: idle, caches: caches, runnerFailures: w.runners.failed(), secondBurstAt: secondBurstAt,
		restart: restart, launched: w.ctrl.launchedAt(),
	}
	if sc.Fleet != nil {
		in.platforms = poolPlatforms(ctx, w.cl.Client)
	}
	in.disruptions.drains, in.disruptions.reclaims, in.disruptions.kills = w.disruptor.records()
	in.disruptions.runs = w.sim.Workflows().Runs()
	if sc.Fleet != nil && sc.Fleet.SinglePoolBurst {
		if !finished {
			fmt.Fprintln(out, "The fleet burst did not finish: no single-pool burst")
		} else {
			if !drained {
				fmt.Fprintln(out, "The fleet burst's runners are not all gone: the single-pool burst starts anyway")
			}
			// The fleet burst's figures end here; the single-pool burst's are its own.
			in.controller, in.usage = w.ctrl.sofar(), readUsage(ctx, w, sc, start, len(jobs))
			if in.single, err = runSinglePoolBurst(ctx, w, sc, seed, out); err != nil {
				return reportInputs{}, err
			}
			in.leftover = leftovers(ctx, w.cl.Client, w.sim) // after both bursts
		}
	}
	whole := w.ctrl.stop()
	if in.single == nil {
		in.controller, in.usage = whole, readUsage(ctx, w, sc, start, len(jobs))
	}
	if in.controller.Processes > 0 {
		in.cpu["gantry controller"] = round1(in.controller.CPUSeconds) // every process, killed ones too
	}
	if in.single == nil {
		in.audit, in.auditErr = readAudit(w.cl.AuditLog)
	} else {
		in.audit, in.single.audit, in.auditErr = readAuditSplit(w.cl.AuditLog, in.single.start)
		in.single.auditErr = in.auditErr
	}
	in.end = time.Now()
	return in, nil
}

// readUsage reads who used the pools: the controller's usage records in its log, and its
// events as `gantry usage` reads them when the scenario has it write them.
func readUsage(ctx context.Context, w *world, sc Scenario, start time.Time, jobs int) usageInputs {
	var u usageInputs
	u.records, u.err = readUsageLog(w.ctrl.logPath)
	if u.err == nil && len(u.records) == 0 && jobs > 0 {
		u.err = fmt.Errorf("the controller logged no usage record (%s)", w.ctrl.logPath)
	}
	if u.eventsWritten = sc.UsageEvents; u.eventsWritten {
		u.events, u.eventErr = readUsageEvents(ctx, w.cl.Client, start, w.ctrl.opts.OutDir)
	}
	return u
}

// poolsTakenUpWait bounds the wait for the controller to take up its pools.
const poolsTakenUpWait = time.Minute

// waitPoolsTakenUp waits until the controller has reconciled every pool's current
// generation (status.observedGeneration) — from then on it matches a queued job to its
// pool — or timeout, and says how long that took. /readyz answers once the caches
// are synced, a few hundred milliseconds before the pools are reconciled; a workload
// queued in between would time the controller's start-up (its webhooks parked until
// a pool is known) as the jobs' reaction, where the floor's oracle has no start-up.
// A running controller meets a burst with its pools known. The wait is not part of
// the workload's figures.
func waitPoolsTakenUp(ctx context.Context, c client.Client, pools []string, timeout time.Duration, out io.Writer) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	want := make(map[string]bool, len(pools))
	for _, name := range pools {
		want[name] = true
	}
	for {
		taken := 0
		var list v1alpha1.RunnerPoolList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err == nil {
			for _, pool := range list.Items {
				if want[pool.Name] && pool.Status.ObservedGeneration == pool.Generation {
					taken++
				}
			}
		}
		if taken == len(pools) {
			fmt.Fprintf(out, "The controller took up its %d pool(s) %.2fs after it was ready\n", len(pools), time.Since(start).Seconds())
			return
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "The controller took up %d of its %d pools within %s; the workload starts anyway\n", taken, len(pools), timeout)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
