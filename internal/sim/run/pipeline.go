package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Pipeline is a workload of workflow runs whose jobs need other jobs, as a workflow
// file declares them (jobs.<job_id>.needs): GitHub queues a job once its needs
// succeeded and skips it when one failed.
type Pipeline struct {
	// Runs are queued evenly over Over, the first after Start, in acme/app.
	Runs  int           `json:"runs"`
	Start time.Duration `json:"start,omitempty"`
	Over  time.Duration `json:"over"`
	// Jobs are each run's jobs.
	Jobs []PipelineJob `json:"jobs"`
	// Jitter spreads each job's duration by up to ±Jitter of it (0 ≤ jitter < 1),
	// drawn with the run's seed.
	Jitter float64 `json:"jitter,omitempty"`
	// FailEvery makes, in every FailEvery-th run, the job keyed FailJob fail on its own
	// (its steps fail: the runner reports failure); 0: none.
	FailEvery int    `json:"fail_every,omitempty"`
	FailJob   string `json:"fail_job,omitempty"`
}

// PipelineJob is a job of a pipeline's runs.
type PipelineJob struct {
	Key string `json:"key"`
	// Matrix, when above 0, makes the job a matrix of that many copies, keyed
	// "KEY (1)" …; a job needing KEY needs every copy.
	Matrix   int           `json:"matrix,omitempty"`
	Duration time.Duration `json:"duration"`
	Needs    []string      `json:"needs,omitempty"`
}

// jobsPerRun is how many jobs each run has.
func (p Pipeline) jobsPerRun() int {
	n := 0
	for _, j := range p.Jobs {
		n += max(1, j.Matrix)
	}
	return n
}

func (p Pipeline) validate() error {
	var errs []error
	if p.Runs <= 0 || p.Over < 0 || p.Start < 0 || len(p.Jobs) == 0 {
		errs = append(errs, errors.New("pipeline needs runs above 0, jobs, and over and start not negative"))
	}
	if p.Jitter < 0 || p.Jitter >= 1 {
		errs = append(errs, fmt.Errorf("pipeline jitter %v: want 0 ≤ jitter < 1", p.Jitter))
	}
	keys := map[string]bool{}
	for _, j := range p.Jobs {
		if j.Key == "" || j.Duration <= 0 || j.Matrix < 0 {
			errs = append(errs, fmt.Errorf("pipeline job %q needs a key, a positive duration and a matrix not negative", j.Key))
		}
		for _, n := range j.Needs {
			if !keys[n] {
				errs = append(errs, fmt.Errorf("pipeline job %q needs %q, which is not an earlier job", j.Key, n))
			}
		}
		keys[j.Key] = true
	}
	if p.FailEvery < 0 || (p.FailEvery > 0 && !p.hasJob(p.FailJob)) {
		errs = append(errs, fmt.Errorf("pipeline fail_every needs fail_job to name one of its jobs (a matrix copy: \"KEY (i)\"), got %q", p.FailJob))
	}
	return errors.Join(errs...)
}

func (p Pipeline) hasJob(key string) bool {
	for _, j := range p.Jobs {
		if j.Key == key {
			return true
		}
		for i := range j.Matrix {
			if fmt.Sprintf("%s (%d)", j.Key, i+1) == key {
				return true
			}
		}
	}
	return false
}

// run is the i-th run of the pipeline (from 0).
func (p Pipeline) run(i int, labels []string, rng *rand.Rand) simgithub.RunSpec {
	copies := map[string][]string{}
	for _, j := range p.Jobs {
		if j.Matrix == 0 {
			copies[j.Key] = []string{j.Key}
			continue
		}
		for k := range j.Matrix {
			copies[j.Key] = append(copies[j.Key], fmt.Sprintf("%s (%d)", j.Key, k+1))
		}
	}
	spec := simgithub.RunSpec{Repo: org + "/app", Workflow: "CI"}
	for _, j := range p.Jobs {
		var needs []string
		for _, n := range j.Needs {
			needs = append(needs, copies[n]...)
		}
		for _, key := range copies[j.Key] {
			d := time.Duration(float64(j.Duration) * (1 + p.Jitter*(2*rng.Float64()-1)))
			js := simgithub.JobSpec{Key: key, Name: key, Labels: labels, Duration: simgithub.Duration(d.Round(time.Second)), Needs: needs}
			if p.FailEvery > 0 && i%p.FailEvery == p.FailEvery-1 && key == p.FailJob {
				js.Conclusion = simgithub.ConclusionFailure
			}
			spec.Jobs = append(spec.Jobs, js)
		}
	}
	return spec
}

// queuePipeline queues the pipeline's runs at their times, each run's first jobs
// told to add.
func queuePipeline(ctx context.Context, q jobQueue, p Pipeline, labels []string, seed uint64, add func(queuedJob)) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	start := time.Now().Add(p.Start)
	for i := range p.Runs {
		at := start
		if p.Runs > 1 {
			at = start.Add(time.Duration(float64(p.Over) * float64(i) / float64(p.Runs-1)))
		}
		if !fault.SleepUntil(ctx, at) {
			return ctx.Err()
		}
		spec := p.run(i, labels, rng)
		run, err := q.QueueRun(spec)
		if err != nil {
			return fmt.Errorf("queueing run %d of the pipeline: %w", i+1, err)
		}
		for _, j := range run.Jobs {
			concl := simgithub.ConclusionSuccess
			for _, js := range spec.Jobs {
				if js.Key == j.Key && js.Conclusion != "" {
					concl = js.Conclusion
				}
			}
			add(queuedJob{id: j.ID, conclusion: concl})
		}
	}
	return nil
}

// runLister is where a run reads workflow runs back: the GitHub simulator.
type runLister interface {
	jobLister
	Workflows() *simgithub.Workflows
}

// waitRuns waits until the n runs queued all completed and none changed — no job,
// no new attempt — for settle: a run completed with a job the infrastructure killed
// may yet be re-run. It returns every job, whether they all completed, and when the
// last did.
func waitRuns(ctx context.Context, sim runLister, n int, settle time.Duration, deadline time.Time) ([]simgithub.Job, bool, time.Time) {
	var lastChange time.Time
	last := ""
	for {
		runs := sim.Workflows().Runs()
		done, attempts := 0, 0
		for _, r := range runs {
			attempts += len(r.Attempts)
			if r.Status == simgithub.StatusCompleted {
				done++
			}
		}
		jobs := sim.Jobs()
		completed, lastDone := completedJobs(jobs)
		state := fmt.Sprint(len(runs), done, attempts, len(jobs), completed)
		if state != last {
			last, lastChange = state, time.Now()
		}
		if len(runs) >= n && done == len(runs) && completed == len(jobs) && time.Since(lastChange) >= settle {
			return jobs, true, lastDone
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return jobs, false, time.Time{}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitMinIdle waits until each pool holds its minIdle idle runners (status.idleRunners),
// or timeout: a pipeline's schedule drains a node of idle runners before its first run.
func waitMinIdle(ctx context.Context, c client.Client, pools []string, minIdle int32, timeout time.Duration, out io.Writer) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ready := 0
		for _, name := range pools {
			pool := &v1alpha1.RunnerPool{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pool); err == nil && pool.Status.IdleRunners >= minIdle {
				ready++
			}
		}
		if ready == len(pools) {
			fmt.Fprintf(out, "The pool holds its %d idle runners %.1fs after the controller took it up\n", minIdle, time.Since(start).Seconds())
			return
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "The pool did not hold its %d idle runners within %s; the workload starts anyway\n", minIdle, timeout)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// stopMinIdle sets each pool's minIdle to 0 once the workload is done, so that a
// pool kept warm drains.
func stopMinIdle(ctx context.Context, c client.Client, pools []string, out io.Writer) error {
	for _, name := range pools {
		pool := &v1alpha1.RunnerPool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pool); err != nil {
			return err
		}
		if pool.Spec.MinIdle == 0 {
			continue
		}
		patch := client.MergeFrom(pool.DeepCopy())
		pool.Spec.MinIdle = 0
		if err := c.Patch(ctx, pool, patch); err != nil {
			return fmt.Errorf("setting pool %s's minIdle to 0: %w", name, err)
		}
		fmt.Fprintf(out, "Pool %s: minIdle set to 0 so that it drains\n", name)
	}
	return nil
}
