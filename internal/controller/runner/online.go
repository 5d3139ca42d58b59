package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/github"
)

const (
	// onlineFirstCheck is how long a runner's pod runs before GitHub is asked whether
	// the runner is online: most runners take a job before then, and a runner with a job
	// is known to be online without asking.
	onlineFirstCheck = 5 * time.Second
	// onlineQueuedCheck replaces onlineFirstCheck while jobs wait in the runner's pool:
	// the runner was made for one and takes it as soon as GitHub hands it over, which in
	// a burst of thousands can take a minute or two. Asking sooner would cost a status
	// write (Idle) that the job's own (Busy) follows, two writes a runner where one
	// records its whole start. Capped at half the pool's registration timeout, so a
	// runner that never comes online is still known in time.
	onlineQueuedCheck = 2 * time.Minute
	// queuedRecheck is how often a runner that waits on its pool's queue (a deferred
	// Online check or first status write) looks again whether jobs still wait: once the
	// queue is empty it no longer expects one, and is checked and written at once.
	queuedRecheck = 10 * time.Second
	// onlineListInterval bounds the cost of asking: a scope's runners are listed at most
	// once per interval for each page the last listing took, so about one request per
	// interval per scope, however many runners wait.
	onlineListInterval = 10 * time.Second
)

// Online condition reasons.
const (
	reasonWaitingForGitHub = "WaitingForGitHub"
	reasonOnline           = "Online"
)

// checkOnline keeps a runner whose pod runs without a job Pending until GitHub lists it
// online, then makes it Idle. Contract: GitHub is asked through one shared listing per
// scope (onlineRunners), never a call per runner; a runner still not online once its
// pod has run for registrationTimeout — in a listing taken after that deadline — is
// failed as RegistrationTimeout.
func (r *Reconciler) checkOnline(ctx context.Context, s *scope, since time.Time) (reconcile.Result, bool, error) {
	if meta.IsStatusConditionTrue(s.runner.Status.Conditions, ConditionOnline) {
		s.runner.Status.Phase = v1alpha1.RunnerIdle
		return reconcile.Result{}, true, nil
	}
	s.runner.Status.Phase = v1alpha1.RunnerPending
	now := r.Clock.Now()
	timeout := s.pool.Spec.Recovery.RegistrationTimeoutOrDefault()
	deadline := since.Add(timeout)
	first, recheck := onlineFirstCheck, time.Duration(0)
	if r.jobsQueued(s) {
		first, recheck = max(first, min(onlineQueuedCheck, timeout/2)), queuedRecheck
	}
	if wait := min(first, timeout) - now.Sub(since); wait > 0 {
		if recheck > 0 {
			wait = min(wait, recheck) // the queue may empty meanwhile: then ask at once
		}
		// Nothing asked yet, so nothing to say: most runners take a job before then, and
		// their one status write says Busy and Online together. A job's start brings the
		// runner back sooner (the Tracker wakes it).
		return reconcile.Result{RequeueAfter: wait}, false, nil
	}
	meta.SetStatusCondition(&s.runner.Status.Conditions, metav1.Condition{
		Type: ConditionOnline, Status: metav1.ConditionFalse, Reason: reasonWaitingForGitHub,
		Message: "the runner's pod is running; GitHub does not list the runner online yet", ObservedGeneration: s.runner.Generation,
	})
	var notBefore time.Time
	if !now.Before(deadline) {
		notBefore = deadline // the verdict needs a listing taken after the deadline
	}
	gh, sc, err := r.GitHub.For(ctx, s.pool)
	if err != nil {
		return r.waitOn(s, err)
	}
	l, err := r.online.lookup(ctx, r.Clock.Now, gh, sc, notBefore)
	if err != nil {
		return r.waitOn(s, err)
	}
	if gr, found := l.byName[s.runner.Name]; found && gr.Status == github.RunnerOnline {
		log.FromContext(ctx).V(1).Info("Runner is online on GitHub")
		if s.runner.Status.GitHubRunnerID == 0 {
			s.runner.Status.GitHubRunnerID = gr.ID
		}
		setOnline(s, "GitHub lists the runner online")
		s.runner.Status.Phase = v1alpha1.RunnerIdle
		return reconcile.Result{}, true, nil
	}
	if l.listedAt.Before(deadline) {
		// Look again at the next listing, or at the deadline if that comes first.
		return reconcile.Result{RequeueAfter: max(time.Second, min(l.next.Sub(now), deadline.Sub(now)))}, false, nil
	}
	return r.fail(ctx, s, v1alpha1.ReasonRegistrationTimeout, fmt.Sprintf(
		"the runner pod ran for %s but the runner never came online on GitHub; check the runner container's logs and its network access to GitHub", humanDuration(timeout)))
}

// onlineRunners knows which runners GitHub has, from one paged listing per scope
// (GET …/actions/runners?per_page=100, conditional on the last answer's ETags) shared
// by every pool and runner of that scope. It lists only when a runner asks and the last
// listing is older than onlineListInterval per page it took; concurrent askers share
// one listing. The zero value is ready to use.
type onlineRunners struct {
	mu     sync.Mutex
	scopes map[github.Scope]*scopeListing
	flight singleflight.Group
}

type scopeListing struct {
	byName   map[string]github.Runner
	listedAt time.Time
	// next is when the scope may be listed again.
	next time.Time
}

// lookup returns the scope's listing. It lists the scope again when the last listing
// is due for renewal, or was taken before notBefore (zero: any).
func (o *onlineRunners) lookup(ctx context.Context, now func() time.Time, gh github.Client, sc github.Scope, notBefore time.Time) (*scopeListing, error) {
	l := o.listing(sc)
	if l == nil || !now().Before(l.next) || l.listedAt.Before(notBefore) {
		v, err, _ := o.flight.Do(sc.String(), func() (any, error) {
			// Another asker may have listed while this one waited for the flight.
			if l := o.listing(sc); l != nil && now().Before(l.next) && !l.listedAt.Before(notBefore) {
				return l, nil
			}
			listedAt := now()
			runners, pages, err := gh.ListAllRunners(ctx, sc)
			if err != nil {
				return nil, err
			}
			l := &scopeListing{byName: make(map[string]github.Runner, len(runners)), listedAt: listedAt,
				next: listedAt.Add(time.Duration(max(1, pages)) * onlineListInterval)}
			for _, gr := range runners {
				l.byName[gr.Name] = gr
			}
			o.mu.Lock()
			if o.scopes == nil {
				o.scopes = map[github.Scope]*scopeListing{}
			}
			o.scopes[sc] = l
			o.mu.Unlock()
			return l, nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing runners to see which are online: %w", err)
		}
		l = v.(*scopeListing)
	}
	return l, nil
}

func (o *onlineRunners) listing(sc github.Scope) *scopeListing {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.scopes[sc]
}

// setOnline records that the runner is online on GitHub: listed online, or given a job.
func setOnline(s *scope, message string) {
	meta.SetStatusCondition(&s.runner.Status.Conditions, metav1.Condition{
		Type: ConditionOnline, Status: metav1.ConditionTrue, Reason: reasonOnline,
		Message: message, ObservedGeneration: s.runner.Generation,
	})
}

// jobsQueued reports whether jobs routed to the runner's pool wait for a runner: the
// runner was most likely made for one and takes it soon.
func (r *Reconciler) jobsQueued(s *scope) bool { return r.queuedJobs(s) > 0 }

// queuedJobs returns how many jobs wait for a runner in the runner's pool: the
// Tracker's count, and for a scale-set pool, whose jobs the Tracker does not hold, the
// count the pool last wrote (status.queuedJobs, the service's assigned jobs less those
// its runners run). That count may be seconds old — tens of seconds when many pools
// scale at once and take turns writing (runnerpool's countWritesPerSecond) — which only
// moves a runner's first status write or Online check by up to queuedRecheck. Without
// it a scale-set pool's runners waited the short waits (onlineFirstCheck,
// firstWriteWait) whenever fewer than burstQueued jobs waited, and a runner whose pod
// took longer than those to take its job wrote its status twice: in a 500-job burst
// over 50 pools, 263 of 380 scale-set runners did (`gantry sim run --scenario fleet`).
func (r *Reconciler) queuedJobs(s *scope) int {
	n := r.trackedQueued(s)
	if s.pool.UsesScaleSet() {
		n = max(n, int(s.pool.Status.QueuedJobs))
	}
	return n
}

// trackedQueued returns how many jobs routed to the runner's pool wait for a runner, by
// the Tracker.
func (r *Reconciler) trackedQueued(s *scope) int {
	if r.Tracker == nil {
		return 0
	}
	return r.Tracker.QueuedCount(s.poolKey())
}
