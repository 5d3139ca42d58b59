// Package rerun re-runs, once, each job killed under its runner by the infrastructure,
// in pools with spec.disruption.rerun InfrastructureFailures, for webhook and scale-set
// pools alike.
//
// The record is the failed Runner itself: the Runner controller writes status.rerun
// Waiting with the failure (no write of its own) and keeps the Runner while it waits;
// this controller, in the leader only, waits for the job's workflow run to complete
// (GitHub answers 403 before), decides (decide.go) and re-runs the job, then writes
// Done or Skipped. The record survives a restart and a change of leader because it is
// in the API server; the call is made at most once because, before any call, the run's
// jobs are read (filter=all) and a newer execution of the job means it already runs
// again — whoever made it, this process before it died included — so it is marked Done
// without a call. Between a call and the next reading of the run, GitHub itself refuses
// a second one (the run is in progress again).
//
//	controller.go  Reconcile: the record, the run read at most every pollInterval, the call
//	decide.go      the rule: wait, done, skip, one job, or the run's failed jobs
//	runs.go        one reading of a run shared by its killed jobs, and their lock
//	metrics.go     gantry_rerun_jobs_total by result; the events on the pool
package rerun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	gantrycontroller "github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
)

// Reconciler re-runs killed jobs.
type Reconciler struct {
	// Client reads Runners and pools from the cache and patches Runners' status.
	Client client.Client
	// GitHub is the pools' credentials, as the other controllers resolve them; the
	// clients it returns implement github.Runs.
	GitHub *gantrycontroller.GitHubResolver
	Events events.EventRecorder
	Clock  clock.Clock
	// Tracker, if set, gives Wake the job of a runner whose status does not record it
	// yet (a new runner's first status write waits: runner/unwritten.go).
	Tracker *demand.Tracker

	runs runs
	// finished are the Runners whose record this process wrote Done or Skipped, by UID:
	// a reconcile on a cache that does not show that write yet leaves them alone.
	finished sync.Map
	// woken is when a job of each run (by runIndexKey) last started or ended on a Gantry
	// runner (Wake).
	woken sync.Map
	// queue is the controller's work queue, for Wake; set when the controller starts.
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// Reading a run. A run is read again when a job of it starts or ends on one of
// Gantry's runners — the killed job's own failure (GitHub's completed event names the
// dead runner) included — so that a run whose last job ran on a Gantry runner is re-run
// within moments of completing (Wake). Otherwise, for jobs Gantry does not see, it is
// polled every third of the time since the kill, from minPoll up to maxPoll: about a
// dozen reads in the ten minutes GitHub takes to fail a killed job (its lease), then one
// every two minutes; an unchanged run is answered 304 Not Modified (GetWorkflowRun),
// which GitHub does not count against the rate limit.
const (
	minPoll = 10 * time.Second
	maxPoll = 2 * time.Minute
	// minWakeRead is the least time between two readings of a run woken by its jobs.
	minWakeRead = 2 * time.Second
	// waitLimit is how long a record waits for its run to complete before Gantry gives
	// up (Skipped, Refused): a self-hosted job may run five days, but a run still going
	// three days after one of its jobs was killed is left to a person.
	waitLimit = 72 * time.Hour
)

func pollInterval(sinceKill time.Duration) time.Duration {
	return min(max(sinceKill/3, minPoll), maxPoll)
}

// indexRun indexes the Runners whose re-run is Waiting by their job's run: the other
// killed jobs of a run are found in the cache, not listed.
const indexRun = "gantry.rerun.run"

func runIndexKey(repository string, runID int64) string {
	return fmt.Sprintf("%s#%d", repository, runID)
}

// SetupWithManager registers the controller: the Runners whose re-run is Waiting. It
// runs in the leader only (controller-runtime's default).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Runner{}, indexRun, func(o client.Object) []string {
		rn, ok := o.(*v1alpha1.Runner)
		if !ok || !rn.Status.Rerun.Pending() || rn.Status.Job == nil {
			return nil
		}
		return []string{runIndexKey(rn.Status.Job.Repository, rn.Status.Job.RunID)}
	}); err != nil {
		return err
	}
	waiting := predicate.NewPredicateFuncs(func(o client.Object) bool {
		rn, ok := o.(*v1alpha1.Runner)
		return ok && rn.Status.Rerun.Pending()
	})
	queue := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		r.queue.Store(&q)
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("rerun").
		For(&v1alpha1.Runner{}, builder.WithPredicates(waiting)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		WatchesRawSource(queue).
		Complete(gantrycontroller.QuietOnShutdown(r))
}

// Wake says that the job of runner rn (a Runner's namespace and name) started or ended,
// as GitHub's workflow_job event or a scale set's message told the demand Tracker: the
// killed jobs waiting on that job's run are looked at again at once, the run read again
// (at most every minWakeRead). The Runner controller calls it with each runner the
// Tracker names; it only reads the cache.
func (r *Reconciler) Wake(ctx context.Context, rn types.NamespacedName) {
	q := r.queue.Load()
	if q == nil {
		return // not the leader, or not started
	}
	var repo string
	var run int64
	runner := &v1alpha1.Runner{}
	if err := r.Client.Get(ctx, rn, runner); err == nil && runner.Status.Job != nil {
		repo, run = runner.Status.Job.Repository, runner.Status.Job.RunID
	} else if r.Tracker != nil {
		if job, ok := r.Tracker.RunnerJob(rn.Name); ok {
			repo, run = job.Repository(), job.RunID
		}
	}
	if run == 0 {
		return
	}
	idx := runIndexKey(repo, run)
	var list v1alpha1.RunnerList
	if err := r.Client.List(ctx, &list, client.InNamespace(rn.Namespace), client.MatchingFields{indexRun: idx}); err != nil || len(list.Items) == 0 {
		return
	}
	r.woken.Store(idx, r.Clock.Now())
	for _, o := range list.Items {
		(*q).Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.Namespace, Name: o.Name}})
	}
}

// wokenSince reports whether a job of the run started or ended after t.
func (r *Reconciler) wokenSince(job *v1alpha1.RunnerJob, t time.Time) bool {
	v, ok := r.woken.Load(runIndexKey(job.Repository, job.RunID))
	return ok && v.(time.Time).After(t)
}

// Reconcile moves one killed job's re-run along. Contract: the job is re-run at most
// once, only after its run completed and only if GitHub concluded it failure; a record
// is never left Waiting past waitLimit; every GitHub refusal is said on the pool.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rn := &v1alpha1.Runner{}
	if err := r.Client.Get(ctx, req.NamespacedName, rn); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !rn.Status.Rerun.Pending() || !rn.DeletionTimestamp.IsZero() || rn.Status.Job == nil {
		return reconcile.Result{}, nil
	}
	if _, ok := r.finished.Load(rn.UID); ok {
		return reconcile.Result{}, nil
	}
	now := r.Clock.Now()
	killedAt := failedAt(rn)
	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: rn.Namespace, Name: rn.Spec.PoolName}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.finish(ctx, rn, nil, decision{verb: skip, result: ResultAbandoned,
				message: "the pool is gone: the job is not re-run"})
		}
		return reconcile.Result{}, err
	}
	if !pool.Spec.Disruption.RerunsInfrastructureFailures() {
		return reconcile.Result{}, r.finish(ctx, rn, pool, decision{verb: skip, result: ResultAbandoned,
			message: "the pool no longer re-runs killed jobs (spec.disruption.rerun is Never): the job is not re-run"})
	}
	if now.Sub(killedAt) > waitLimit {
		return reconcile.Result{}, r.finish(ctx, rn, pool, decision{verb: skip, result: ResultRefused, message: fmt.Sprintf(
			"gave up after %s: workflow run %d did not complete, or GitHub did not answer", waitLimit, rn.Status.Job.RunID)})
	}
	gh, sc, err := r.GitHub.For(ctx, pool)
	if err != nil {
		if cfg, ok := errors.AsType[*gantrycontroller.ConfigError](err); ok {
			log.FromContext(ctx).Info("Cannot re-run the killed job yet: the pool's configuration", "problem", cfg.Message)
			return reconcile.Result{RequeueAfter: maxPoll}, nil
		}
		return reconcile.Result{}, err
	}
	key, err := repoRun(sc, rn.Status.Job)
	if err != nil {
		return reconcile.Result{}, r.finish(ctx, rn, pool, decision{verb: skip, result: ResultUnknownRun, message: err.Error()})
	}

	e := r.runs.lock(key, now)
	defer e.mu.Unlock()
	every := pollInterval(now.Sub(killedAt))
	if left := settleAfterCall - now.Sub(e.called); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	maxAge := every
	if r.wokenSince(rn.Status.Job, e.read) {
		// A job of the run started or ended since it was read: read it again now.
		maxAge = minWakeRead
		every = min(every, 3*minPoll) // GitHub may take a moment to complete the run
	}
	if err := e.refresh(ctx, gh, key, now, maxAge); err != nil {
		return r.githubFailed(ctx, rn, pool, err)
	}
	d := decide(self(rn), r.others(ctx, rn), e.run, e.jobs)
	switch d.verb {
	case wait:
		return reconcile.Result{RequeueAfter: max(e.read.Add(every).Sub(now), time.Second)}, nil
	case done, skip:
		return reconcile.Result{}, r.finish(ctx, rn, pool, d)
	}
	return r.rerun(ctx, rn, pool, gh, key, e, d)
}

// rerun makes the call decide chose and records it.
func (r *Reconciler) rerun(ctx context.Context, rn *v1alpha1.Runner, pool *v1alpha1.RunnerPool, gh github.Runs, key runKey, e *runEntry, d decision) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	var err error
	if d.verb == rerunFailed {
		logger.Info("Re-running the failed jobs of the workflow run: each is a job killed by the infrastructure", "run", key.id, "jobs", len(d.covered)+1)
		githubCalls.WithLabelValues("rerun_failed_jobs").Inc()
		err = gh.RerunFailedJobs(ctx, key.repo, key.id)
	} else {
		logger.Info("Re-running the job killed by the infrastructure", "run", key.id, "job", d.job.ID)
		githubCalls.WithLabelValues("rerun_job").Inc()
		err = gh.RerunJob(ctx, key.repo, d.job.ID)
	}
	e.invalidate()
	if err != nil {
		if github.IsRunInProgress(err) {
			// Someone re-ran the run meanwhile: its jobs, read again, say whether ours is in it.
			return reconcile.Result{RequeueAfter: minPoll}, nil
		}
		if github.IsNotRerunnable(err) {
			return reconcile.Result{}, r.finish(ctx, rn, pool, decision{verb: skip, job: d.job, result: ResultRefused,
				message: "GitHub will not re-run it: " + err.Error()})
		}
		return r.githubFailed(ctx, rn, pool, err)
	}
	e.called = r.Clock.Now()
	attempt := e.run.RunAttempt + 1
	d = decision{verb: done, job: d.job, attempt: attempt, result: ResultRerun, covered: d.covered,
		message: fmt.Sprintf("re-ran job %q (%d) in attempt %d of workflow run %d", d.job.Name, d.job.ID, attempt, key.id)}
	if len(d.covered) > 0 {
		d.message += fmt.Sprintf(", with the %d other killed jobs of the run (rerun-failed-jobs: every failed job of the run was killed)", len(d.covered))
	}
	if err := r.finish(ctx, rn, pool, d); err != nil {
		return reconcile.Result{}, err
	}
	var errs []error
	for _, name := range d.covered {
		other := &v1alpha1.Runner{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: rn.Namespace, Name: name}, other); err != nil {
			errs = append(errs, client.IgnoreNotFound(err))
			continue
		}
		errs = append(errs, r.finish(ctx, other, pool, decision{verb: done, attempt: attempt, result: ResultRerun, message: fmt.Sprintf(
			"re-ran in attempt %d of workflow run %d with the run's other killed jobs (rerun-failed-jobs, asked for by runner %s)", attempt, key.id, rn.Name)}))
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// githubFailed waits on a failed GitHub call: as long as GitHub asks (rate limits),
// maxPoll when the credentials may not (said on the pool once per reading), minPoll for
// an outage; a run that is gone ends the record.
func (r *Reconciler) githubFailed(ctx context.Context, rn *v1alpha1.Runner, pool *v1alpha1.RunnerPool, err error) (reconcile.Result, error) {
	switch {
	case github.IsRateLimited(err):
		return reconcile.Result{RequeueAfter: max(github.RetryAfter(err), time.Second)}, nil
	case github.IsNotFound(err):
		return reconcile.Result{}, r.finish(ctx, rn, pool, decision{verb: skip, result: ResultAbandoned,
			message: "GitHub no longer has the job's workflow run: " + err.Error()})
	case github.IsUnauthorized(err):
		r.Events.Eventf(pool, rn, corev1.EventTypeWarning, EventRerunNotPermitted, "Rerun",
			"GitHub refused to read or re-run workflow run %d of %s for runner %s's killed job: the credentials need the Actions write permission (actions: write for a GitHub App, the repo scope for a classic token); retried every %s: %s",
			rn.Status.Job.RunID, rn.Status.Job.Repository, rn.Name, maxPoll, err.Error())
		return reconcile.Result{RequeueAfter: maxPoll}, nil
	}
	log.FromContext(ctx).Info("GitHub failed; the killed job's re-run tries again", "reason", err.Error())
	return reconcile.Result{RequeueAfter: minPoll}, nil
}

// finish writes the record's end (Done or Skipped), counts it and says it on the pool.
func (r *Reconciler) finish(ctx context.Context, rn *v1alpha1.Runner, pool *v1alpha1.RunnerPool, d decision) error {
	if !rn.Status.Rerun.Pending() {
		return nil
	}
	before := rn.Status.DeepCopy()
	state := v1alpha1.RerunSkipped
	if d.verb == done {
		state = v1alpha1.RerunDone
	}
	msg := d.message
	if len(msg) > 1024 {
		msg = msg[:1020] + "…"
	}
	rn.Status.Rerun = &v1alpha1.RunnerRerun{State: state, Attempt: d.attempt, Message: msg}
	patch, err := gantrycontroller.StatusPatch(before, &rn.Status)
	if err != nil {
		return err
	}
	if err := r.Client.Status().Patch(ctx, rn, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.finished.Store(rn.UID, struct{}{})
	Count(rn.Namespace, rn.Spec.PoolName, rn.Status.Reason, d.result)
	log.FromContext(ctx).Info("Killed job's re-run decided", "runner", rn.Name, "state", state, "result", d.result, "message", msg)
	if pool == nil {
		return nil
	}
	if state == v1alpha1.RerunDone && d.result == ResultRerun {
		r.Events.Eventf(pool, rn, corev1.EventTypeNormal, EventJobRerun, "Rerun", "runner %s's killed job: %s", rn.Name, msg)
	} else if state == v1alpha1.RerunSkipped {
		r.Events.Eventf(pool, rn, corev1.EventTypeWarning, EventJobNotRerun, "Rerun", "runner %s's killed job is not re-run: %s", rn.Name, msg)
	}
	return nil
}

// others are the other Runners waiting to re-run a job of the same run, from the cache.
func (r *Reconciler) others(ctx context.Context, rn *v1alpha1.Runner) []killed {
	var list v1alpha1.RunnerList
	if err := r.Client.List(ctx, &list, client.InNamespace(rn.Namespace),
		client.MatchingFields{indexRun: runIndexKey(rn.Status.Job.Repository, rn.Status.Job.RunID)}); err != nil {
		return nil
	}
	var out []killed
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == rn.UID || !o.Status.Rerun.Pending() || !o.DeletionTimestamp.IsZero() {
			continue
		}
		if _, ok := r.finished.Load(o.UID); ok {
			continue
		}
		out = append(out, self(o))
	}
	return out
}

// self is a Runner's killed job as decide sees it.
func self(rn *v1alpha1.Runner) killed {
	k := killed{runner: rn.Name, githubName: rn.Status.GitHubRunnerName}
	if k.githubName == "" {
		k.githubName = rn.Name // Gantry registers each runner under its Runner's name
	}
	if rn.Status.Job != nil {
		k.jobID = rn.Status.Job.ID
	}
	return k
}

// repoRun is the run of the job, on the pool's GitHub host.
func repoRun(pool github.Scope, job *v1alpha1.RunnerJob) (runKey, error) {
	owner, repo, ok := strings.Cut(job.Repository, "/")
	if !ok || owner == "" || repo == "" || job.RunID == 0 {
		return runKey{}, fmt.Errorf("the job's workflow run is not known (repository %q, run %d): nothing can be re-run", job.Repository, job.RunID)
	}
	sc := github.Scope{Kind: github.ScopeRepository, Scheme: pool.Scheme, Host: pool.Host, Owner: owner, Repo: repo}
	return runKey{repo: sc, id: job.RunID}, nil
}

// failedAt is when the runner failed (its Failed condition), else when it was created.
func failedAt(rn *v1alpha1.Runner) time.Time {
	if c := meta.FindStatusCondition(rn.Status.Conditions, conditionFailed); c != nil {
		return c.LastTransitionTime.Time
	}
	return rn.CreationTimestamp.Time
}

// conditionFailed is the Runner's Failed condition (runner.ConditionFailed; this
// package is imported by the runner controller, not the other way).
const conditionFailed = "Failed"
