package runnerpool

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/demand"
)

// maxCreatesPerReconcile bounds one pass's creations so status and other pools keep
// moving during a large burst; the pool requeues at once to create the rest.
const maxCreatesPerReconcile = 250

// state is one reconcile's view of a pool.
type state struct {
	pool    *v1alpha1.RunnerPool
	runners []v1alpha1.Runner

	pending, idle, busy, failed int
	// refused counts pending runners whose pod the API server refuses; refusal is the
	// API server's last word on one of them.
	refused int
	refusal string
	// expected counts runners created but not yet seen in the cache.
	expected int
	// tracked is what the Tracker knew of the pool and its runners when the pass began:
	// asked once, so the pass works from one view of demand.
	tracked  demand.PoolSnapshot
	demand   demand.Demand
	desired  int
	failures controller.PoolFailures
	// floor is the idle floor in force and why (warm.go).
	floor warmFloor
	// held are the runners seen alive since the demand source's answer (holds.go); nil
	// for a webhook pool. holding counts those of them, finished or gone, counted busy;
	// expecting names the runners created and not yet in the cache (counted expected).
	held      map[string]struct{}
	holding   int
	expecting map[string]struct{}

	// platformChanged: status.platform changed in this pass; runners are created once it
	// is stored (platform.go).
	platformChanged bool

	configErr error
	// unavailable: the pool's access could not be checked (Ready is False), but runners
	// are created all the same.
	unavailable error
	created     int
	retired     int
	backoff     time.Time
	// rebuilt: the Tracker's demand was rebuilt from GitHub since the start; until then
	// no runner is retired.
	rebuilt bool
	// recent is status.recentRepositories.
	recent []v1alpha1.RepositoryActivity
	// templateHash is the current template's; outdated counts the runners made from an
	// older one, replaced those retired in this pass to be made again (rollout.go).
	templateHash       string
	outdated, replaced int
	// sourceReason and sourceMessage: why the pool's demand source keeps it from being
	// Ready ("" when it does not: source.Source.Status).
	sourceReason, sourceMessage string

	// source is the pool's demand source; before the pool as read, seenMark the
	// expectations' mark taken before the runners were listed.
	source   source.Source
	before   *v1alpha1.RunnerPool
	seenMark uint64
}

// configBroken reports whether the pool's configuration keeps runners from being created.
func (s *state) configBroken() bool { return s.configErr != nil }

// active is what counts against maxRunners: everything alive but failed runners.
func (s *state) active() int { return s.pending + s.idle + s.busy + s.expected }

// desired = clamp(busy + queued-and-unassigned + floor, 0, maxRunners), floor being the
// idle floor in force (computeWarmFloor: spec.minIdle, raised by warm).
func desired(spec v1alpha1.RunnerPoolSpec, floor, busy, queued int) int {
	return max(0, min(busy+queued+floor, int(spec.MaxRunners)))
}

func isBusy(rn *v1alpha1.Runner, tracked demand.PoolSnapshot) bool {
	return rn.Status.Phase == v1alpha1.RunnerBusy || rn.Status.Job != nil || tracked.Running(rn.Name)
}

// count sorts the pool's runners by phase. Deleted and succeeded runners are on their way
// out and count nowhere, and so do those whose job GitHub said completed before their
// pod exited: their job no longer counts in the demand (a scale set's assigned jobs drop
// at once), so counting them busy would hide as many jobs assigned since. Failed ones do
// not count against capacity. A scale-set pool's demand is a count of the service's last
// answer, which still has the jobs of the runners that finished since: those runners
// count busy until the next answer (holds.go), as do the runners gone whose job the
// service still counts running (tracked.Elsewhere).
func (s *state) count(expected int) {
	s.expected = expected
	for i := range s.runners {
		rn := &s.runners[i]
		switch {
		case rn.Status.Phase == v1alpha1.RunnerFailed:
			s.failed++
			s.release(rn.Name) // a failed runner holds no job: it is replaced at once
		case s.tracked.Done(rn.Name):
			s.hold(rn.Name)
		case isBusy(rn, s.tracked):
			s.busy++ // busy counts even while deleted: it holds capacity until its job ends
			s.alive(rn.Name)
		case !rn.DeletionTimestamp.IsZero() || rn.Status.Phase == v1alpha1.RunnerSucceeded:
			s.hold(rn.Name)
		case rn.Status.Phase == v1alpha1.RunnerIdle:
			s.idle++
			s.alive(rn.Name)
		default:
			s.pending++
			s.alive(rn.Name)
			if c := meta.FindStatusCondition(rn.Status.Conditions, runner.ConditionPodRefused); c != nil && c.Status == metav1.ConditionTrue {
				s.refused++
				s.refusal = c.Message
			}
		}
	}
	s.holdGone()
}

// scale creates or retires runners toward the desired count. Contract: never more than
// maxRunners alive (failed runners excluded), nothing created while the configuration
// is broken or the pool is backing off after repeated failures, nothing retired before
// the demand was rebuilt after a start, and only idle or never-registered runners
// retired — never a busy one.
func (r *Reconciler) scale(ctx context.Context, s *state) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: s.pool.Namespace, Name: s.pool.Name}
	if err := r.replaceOutdated(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	switch diff := s.desired - s.active(); {
	case diff > 0:
		if s.configBroken() {
			// Reported in the pool's conditions; the pool's owner must act.
			return reconcile.Result{RequeueAfter: time.Minute}, nil
		}
		if s.platformChanged {
			return reconcile.Result{}, nil // writeStatus requeues the pool once the platform is stored
		}
		if !s.failures.Until.IsZero() {
			s.backoff = s.failures.Until
			return reconcile.Result{RequeueAfter: s.failures.Until.Sub(r.Clock.Now())}, nil
		}
		n := min(diff, maxCreatesPerReconcile)
		names, err := r.createRunners(ctx, s.pool, key, n)
		s.created += len(names)
		for _, name := range names {
			s.alive(name) // alive from its creation: it may run its job before a pass sees it
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		if n < diff {
			return reconcile.Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
	case diff < 0:
		if !s.rebuilt {
			// Just started or just elected: demand the previous controller held is not
			// known yet, and these runners may be there for it. Resync's first pass,
			// run at once, rebuilds it.
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		for _, victim := range victims(s.runners, -diff, s.tracked) {
			log.FromContext(ctx).V(1).Info("Retiring runner", "runner", victim.Name, "phase", victim.Status.Phase)
			s.release(victim.Name) // retired unused: it holds no job
			if err := r.Client.Delete(ctx, victim); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("retiring runner %s: %w", victim.Name, err)
			}
			s.retired++
		}
	}
	return reconcile.Result{}, nil
}

// createParallelism bounds the creates in flight for one pool: a burst of a few hundred
// jobs gets its Runners in a few round trips instead of one create after another. It
// matches the runners reconciled at once (manager's RunnerConcurrency default), so the
// Runners of a burst are made as fast as their Secrets and pods can follow.
const createParallelism = 64

// createRunners creates n Runners, createParallelism at a time, and returns the names
// of those it created; the first error stops further creates.
func (r *Reconciler) createRunners(ctx context.Context, pool *v1alpha1.RunnerPool, key types.NamespacedName, n int) ([]string, error) {
	var (
		mu      sync.Mutex
		created []string
		wg      sync.WaitGroup
		sem     = make(chan struct{}, createParallelism)
		errs    []error
	)
	for range n {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			name, err := r.createRunner(ctx, pool, key)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			created = append(created, name)
		}()
	}
	wg.Wait()
	return created, errors.Join(errs...)
}

func (r *Reconciler) createRunner(ctx context.Context, pool *v1alpha1.RunnerPool, key types.NamespacedName) (string, error) {
	rn := &v1alpha1.Runner{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pool.Namespace,
			Name:      runnerName(pool.Name),
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
				v1alpha1.LabelPool:      pool.Name,
			},
			Finalizers: []string{v1alpha1.Finalizer},
		},
		Spec: v1alpha1.RunnerSpec{PoolName: pool.Name},
	}
	if err := controllerutil.SetControllerReference(pool, rn, r.Client.Scheme()); err != nil {
		return "", err
	}
	r.expectations.expect(key, rn.Name, r.Clock.Now())
	name := types.NamespacedName{Namespace: rn.Namespace, Name: rn.Name}
	r.Births.Born(name)
	if err := r.Client.Create(ctx, rn); err != nil {
		r.expectations.forgetCreate(key, rn.Name)
		r.Births.Forget(name)
		return "", fmt.Errorf("creating runner: %w", err)
	}
	return rn.Name, nil
}

// victims picks up to n runners to retire: never-registered first (no GitHub
// registration to undo), then pending, then idle, newest first within each; never a
// busy, deleted or failed one.
func victims(runners []v1alpha1.Runner, n int, tracked demand.PoolSnapshot) []*v1alpha1.Runner {
	var cands []*v1alpha1.Runner
	for i := range runners {
		rn := &runners[i]
		if !rn.DeletionTimestamp.IsZero() || isBusy(rn, tracked) {
			continue
		}
		switch rn.Status.Phase {
		case "", v1alpha1.RunnerPending, v1alpha1.RunnerIdle:
			cands = append(cands, rn)
		}
	}
	rank := func(rn *v1alpha1.Runner) int {
		switch {
		case rn.Status.GitHubRunnerID == 0:
			return 0
		case rn.Status.Phase != v1alpha1.RunnerIdle:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(cands, func(a, b *v1alpha1.Runner) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	return cands[:min(n, len(cands))]
}

// runnerName is POOL-xxxxx: the Runner's, its pod's, its Secret's and its GitHub
// runner's name. Random, not generateName, so the name is known before the create and
// can be recorded as an expectation.
func runnerName(pool string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	if len(pool) > 57 {
		pool = pool[:57]
	}
	return pool + "-" + string(b)
}

// expectations remember runners created but not yet seen in the informer cache, so a
// stale read right after a create never makes the pool create them again.
//
// The informer puts a Runner in the cache before it tells runnerSeen, so a Runner seen
// before a reconcile listed its pool's Runners is in that list (or already gone from
// it), and one seen after may not be: its expectation must still count. Each is marked
// with the order it was seen in (seq), and a reconcile takes the order before it lists
// (mark), so pending counts what its own list cannot show. Dropped at once when seen,
// a Runner the cache showed between the list and the count was counted nowhere and
// made again (`gantry sim run --scenario burst`: nine extra Runners in one run of 15,
// retired later).
type expectations struct {
	mu   sync.Mutex
	seq  uint64
	byPl map[types.NamespacedName]map[string]expectation
}

// expectation is one created Runner: when it was created, and the order the informer
// saw it in (0: not yet).
type expectation struct {
	created time.Time
	seen    uint64
}

// expectationTTL: a created runner the cache has not shown after this long is assumed
// lost (its create failed on the way back) and no longer counted.
const expectationTTL = time.Minute

func (e *expectations) expect(pool types.NamespacedName, name string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byPl == nil {
		e.byPl = map[types.NamespacedName]map[string]expectation{}
	}
	if e.byPl[pool] == nil {
		e.byPl[pool] = map[string]expectation{}
	}
	e.byPl[pool][name] = expectation{created: now}
}

// observed records that the informer saw the Runner, made or gone.
func (e *expectations) observed(pool types.NamespacedName, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.byPl[pool][name]; ok && x.seen == 0 {
		e.seq++
		x.seen = e.seq
		e.byPl[pool][name] = x
	}
}

// forgetCreate drops the expectation of a Runner whose create failed.
func (e *expectations) forgetCreate(pool types.NamespacedName, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byPl[pool], name)
}

// mark returns the order of what the informer has seen so far: take it before listing.
func (e *expectations) mark() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seq
}

// pending drops the expectations a list taken after mark satisfies — the Runners it
// shows, and those the informer saw before mark — and those past expectationTTL, and
// returns how many remain.
func (e *expectations) pending(pool types.NamespacedName, mark uint64, listed []v1alpha1.Runner, now time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.byPl[pool]
	for i := range listed {
		delete(m, listed[i].Name)
	}
	cutoff := now.Add(-expectationTTL)
	for name, x := range m {
		if (x.seen != 0 && x.seen <= mark) || x.created.Before(cutoff) {
			delete(m, name)
		}
	}
	return len(m)
}

// names returns the names of the Runners still expected (pending's).
func (e *expectations) names(pool types.NamespacedName) map[string]struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.byPl[pool]) == 0 {
		return nil
	}
	out := make(map[string]struct{}, len(e.byPl[pool]))
	for name := range e.byPl[pool] {
		out[name] = struct{}{}
	}
	return out
}

func (e *expectations) forget(pool types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byPl, pool)
}
