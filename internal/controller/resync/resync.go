// Package resync recovers demand that webhooks missed. GitHub never redelivers a failed
// webhook on its own, so every Interval the leader lists the queued jobs of the
// repositories that matter and makes the Tracker agree with GitHub: a job whose queued
// delivery was lost is queued (and gets a runner), a job whose in_progress or completed
// delivery was lost stops counting as demand.
//
// Which repositories are polled: the repository of every repository-scoped pool, and,
// for organization pools, every repository of that organization the Tracker has seen a
// job of in the last two hours. Each costs two run listings per Interval, plus a job
// listing per queued or in-progress run the Tracker has no job of or heard of more than
// an Interval ago, so the budget follows activity, not the size of the organization.
// Every listing is a conditional request: a page unchanged since the last pass comes
// back 304 Not Modified, which GitHub does not count against the rate limit. A lost
// delivery is found within one Interval when no other job of its run was delivered,
// and within two when one was.
//
// With GitHub App credentials, resync also reads the App's webhook delivery log and asks
// GitHub to redeliver every workflow_job delivery that failed — including those that
// failed while no controller was running (the first pass looks back an hour). That
// covers what polling cannot: a repository whose very first delivery was lost.
package resync

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/github"
)

var (
	recovered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gantry_resync_jobs_recovered_total",
		Help: "Queued jobs found by resync that no webhook had announced.",
	})
	dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gantry_resync_jobs_dropped_total",
		Help: "Jobs held as queued that GitHub no longer lists as queued (a lost in_progress or completed webhook).",
	})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_resync_errors_total",
		Help: "Repositories resync could not list, by kind of error.",
	}, []string{"kind"})
)

func init() { metrics.Registry.MustRegister(recovered, dropped, errorsTotal) }

// Resync is a manager Runnable that runs on the leader only.
type Resync struct {
	Client   client.Reader
	GitHub   *controller.GitHubResolver
	Tracker  *demand.Tracker
	Clock    clock.Clock
	Interval time.Duration

	log deliveryLog
}

// NeedLeaderElection: the Tracker it corrects lives in the leader.
func (r *Resync) NeedLeaderElection() bool { return true }

// Start runs a pass at once — after a start or a leader change the Tracker is empty,
// and the pools keep their runners until it is rebuilt (Tracker.MarkRebuilt) — and
// then every Interval until ctx ends.
func (r *Resync) Start(ctx context.Context) error {
	if r.Once(ctx) {
		r.Tracker.MarkRebuilt()
	}
	for {
		t := r.Clock.NewTimer(r.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
			if r.Once(ctx) && !r.Tracker.Rebuilt() {
				r.Tracker.MarkRebuilt()
			}
		}
	}
}

type target struct {
	credentials types.NamespacedName
	repo        demand.Repo
}

// Once runs one resync pass. It reports whether the pass went over every pool: false
// when the pools could not be listed or GitHub rate-limited the pass.
func (r *Resync) Once(ctx context.Context) bool {
	logger := log.FromContext(ctx).WithName("resync")
	var pools v1alpha1.RunnerPoolList
	if err := r.Client.List(ctx, &pools); err != nil {
		logger.Error(err, "Listing pools for resync")
		return false
	}
	active := r.Tracker.ActiveRepos()
	done := map[target]struct{}{}
	apps := map[types.NamespacedName]struct{}{}
	for i := range pools.Items {
		pool := &pools.Items[i]
		if !pool.DeletionTimestamp.IsZero() || pool.UsesScaleSet() {
			continue // a scale set's messages are acknowledged and redelivered: nothing to repair
		}
		gh, sc, err := r.GitHub.For(ctx, pool)
		if err != nil {
			continue // the pool's conditions already say what is wrong
		}
		creds := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.GitHub.CredentialsSecretRef.Name}
		if _, ok := apps[creds]; !ok {
			apps[creds] = struct{}{}
			if err := r.redeliverFailed(ctx, gh, sc, creds); err != nil {
				errorsTotal.WithLabelValues("delivery_log").Inc()
				logger.V(1).Info("Resync could not read the App's delivery log", "credentials", creds.String(), "error", err.Error())
			}
		}
		for _, repo := range reposOf(sc, active, pool.Status.RecentRepositories) {
			tg := target{credentials: creds, repo: repo}
			if _, ok := done[tg]; ok {
				continue
			}
			done[tg] = struct{}{}
			if err := r.syncRepo(ctx, gh, sc, repo); err != nil {
				kind := "error"
				if github.IsRateLimited(err) {
					kind = "rate_limited"
				}
				errorsTotal.WithLabelValues(kind).Inc()
				logger.V(1).Info("Resync could not list queued jobs", "repository", repo.Owner+"/"+repo.Name, "error", err.Error())
				if github.IsRateLimited(err) {
					return false // the credential is blocked; the next pass will try again
				}
			}
		}
	}
	return true
}

// reposOf is the repositories to poll for a pool's scope: for an organization pool,
// those the Tracker saw jobs of and those the pool's status remembers (the previous
// controller's, after a restart or a leader change).
func reposOf(sc github.Scope, active []demand.Repo, recent []v1alpha1.RepositoryActivity) []demand.Repo {
	host := strings.ToLower(sc.Host)
	switch sc.Kind {
	case github.ScopeRepository:
		return []demand.Repo{{Host: host, Owner: strings.ToLower(sc.Owner), Name: strings.ToLower(sc.Repo)}}
	case github.ScopeOrganization:
		var out []demand.Repo
		seen := map[demand.Repo]bool{}
		for _, r := range active {
			if r.Host == host && strings.EqualFold(r.Owner, sc.Owner) && !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
		for _, ra := range recent {
			owner, name, ok := strings.Cut(strings.ToLower(ra.Name), "/")
			r := demand.Repo{Host: host, Owner: owner, Name: name}
			if ok && strings.EqualFold(owner, sc.Owner) && !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
		return out
	}
	// Enterprise scope: runner endpoints only; its repositories are reached through
	// the organization or repository pools that share them, or the delivery log.
	return nil
}

func (r *Resync) syncRepo(ctx context.Context, gh github.Client, sc github.Scope, repo demand.Repo) error {
	repoScope, err := sc.Repository(repo.Name)
	if err != nil {
		return err
	}
	listedAt := r.Clock.Now()
	// Demand hides where no webhook told of it. A run the Tracker holds no job of has its
	// jobs listed at once. A run it heard of within the last Interval is left for the
	// next pass: what its other jobs' lost deliveries hide is found one Interval later,
	// and a run that ends sooner (most do) costs no listing at all.
	known := r.Tracker.KnownRuns(repo)
	young := func(run int64) bool {
		at, ok := known[run]
		return ok && listedAt.Sub(at) < r.Interval
	}
	res, err := gh.ListQueuedJobs(ctx, repoScope, young)
	if err != nil {
		return err
	}
	unlisted := make(map[int64]bool, len(res.Skipped))
	for _, id := range res.Skipped {
		unlisted[id] = true
	}
	queued := make([]demand.Job, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		queued = append(queued, demand.Job{
			ID: j.ID, RunID: j.RunID, Host: repo.Host, Owner: j.Owner, Repo: j.Repo,
			Labels: j.Labels, Workflow: j.WorkflowName, CreatedAt: j.CreatedAt,
		})
	}
	a, d := r.Tracker.SyncRepo(repo, queued, unlisted, listedAt)
	recovered.Add(float64(a))
	dropped.Add(float64(d))
	if a > 0 || d > 0 {
		log.FromContext(ctx).Info("Resync corrected demand", "repository", repo.Owner+"/"+repo.Name, "recovered", a, "dropped", d)
	}
	return nil
}
