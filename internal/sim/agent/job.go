// The job an agent runs: how it plays it, with or without the container hook, and how it
// keeps its lock on it while it runs.

package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// played is how a job ended: the conclusion the runner reports, the message of a
// failure (the hook's or the runner's), whether the container hook ran it, and how many
// writes the hook made.
type played struct {
	conclusion, failure string
	hooked              bool
	writes              int64
}

// ErrJobContainerRequired is the runner's message for a job without `container:` on a
// runner with ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true.
const ErrJobContainerRequired = "Jobs without a job container are forbidden on this runner, please add a 'container:' to your job or contact your self-hosted runner administrator."

// playJob runs job j. A runner configured for the container hooks (EnvContainerHooks)
// runs a job with a container or services through the Kubernetes hook — prepare_job,
// a script step, a run_container_step per container step, cleanup_job (which the runner
// runs whatever happened before) — and fails the job when a hook command fails, as the
// runner does; any other job is waited out.
// It returns an error only when the runner itself stops.
func (a *Agents) playJob(ctx context.Context, p *corev1.Pod, rc *runnerapi.Client, j *runnerapi.Job, setup time.Duration) (played, error) {
	env, hooked, err := hookEnvOf(p)
	if err != nil {
		return played{}, err
	}
	if hooked && env.requireJobContainer && j.Container == "" {
		return played{conclusion: simConclusionFailure, failure: ErrJobContainerRequired}, nil
	}
	if !hooked || (j.Container == "" && len(j.Services) == 0) {
		return played{conclusion: j.Conclusion}, a.runJob(ctx, rc, j, setup)
	}
	out := played{conclusion: j.Conclusion, hooked: true}
	h, err := a.newHook(ctx, p, env)
	if err != nil {
		if ctx.Err() != nil {
			return played{}, ctx.Err()
		}
		return played{conclusion: simConclusionFailure, failure: err.Error(), hooked: true}, nil
	}
	wp, err := h.prepareJob(ctx, prepareArgs(j))
	if err == nil {
		err = h.runScriptStep(ctx, wp)
	}
	if opts := j.ContainerOptions; opts != nil {
		for _, st := range opts.Steps {
			if err != nil {
				break
			}
			if serr := h.runContainerStep(ctx, wp, stepArgs(st)); serr != nil {
				// The runner's log names the step whose hook command failed.
				err = fmt.Errorf("step %q: %w", st.Name, serr)
			}
		}
	}
	if err == nil {
		if err := a.runJob(ctx, rc, j, setup); err != nil {
			return played{}, err // the runner's own failure
		}
	}
	if ctx.Err() != nil {
		// The runner process is gone: nothing cleans up after it but its controller.
		return played{}, ctx.Err()
	}
	if cerr := h.cleanupJob(ctx); err == nil && cerr != nil {
		err = fmt.Errorf("cleanup_job: %w", cerr)
	}
	if err != nil {
		out.conclusion, out.failure = simConclusionFailure, err.Error()
	}
	out.writes = h.writes.Load()
	return out, ctx.Err()
}

// simConclusionFailure is GitHub's conclusion of a failed job.
const simConclusionFailure = "failure"

// runJob waits for setup and then the job's duration.
func (a *Agents) runJob(ctx context.Context, _ *runnerapi.Client, j *runnerapi.Job, setup time.Duration) error {
	done := time.NewTimer(setup + j.Duration())
	defer done.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-done.C:
		return nil
	}
}

// errRenew is the cause of a job's context ended by a failed renewal.
type errRenew struct{ err error }

func (e *errRenew) Error() string { return e.err.Error() }

// renewing returns a context of ctx within which the runner renews job j every
// RenewEvery, as the actions runner renews its job lock for as long as it has the job
// — through the container hook's commands too — and a stop function that ends it and
// returns the renewal's error, if one failed.
func (a *Agents) renewing(ctx context.Context, rc *runnerapi.Client, j *runnerapi.Job) (context.Context, func() error) {
	if a.opts.RenewEvery <= 0 {
		return ctx, func() error { return nil }
	}
	jctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.opts.RenewEvery)
		defer t.Stop()
		for {
			select {
			case <-jctx.Done():
				return
			case <-t.C:
				if err := rc.RenewJob(jctx, j.ID); err != nil && jctx.Err() == nil {
					cancel(&errRenew{fmt.Errorf("renewing job %d: %w", j.ID, err)})
					return
				}
			}
		}
	}()
	return jctx, func() error {
		var re *errRenew
		failed := errors.As(context.Cause(jctx), &re)
		cancel(nil)
		<-done
		if failed {
			return re.err
		}
		return nil
	}
}
