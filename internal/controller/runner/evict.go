package runner

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/github"
)

// The eviction webhook: the API server's admission review of each pod eviction
// (a ValidatingWebhookConfiguration on pods/eviction, failurePolicy Ignore; the chart's
// eviction-webhook.yaml) lets an idle runner go at once.
//
// Why: the pool's PodDisruptionBudget refuses (429) every eviction of a Ready runner
// pod, busy or not, and kubectl drain sleeps a fixed 5 s after a refused eviction
// (k8s.io/kubectl pkg/drain, evictPods), so without the webhook a node holding only
// idle runners took over 5 s to drain even though the controller retires them the
// moment the node is cordoned (drain.go). The eviction's first request comes a few
// milliseconds after the cordon: only an answer inside that request is sooner.
//
// How: validating admission runs before the eviction reads the pod, and the eviction
// lets a pod being deleted go without consulting any budget (k8s.io/kubernetes
// pkg/registry/core/pod/storage/eviction.go, Create and canIgnorePDB). So, for an idle or
// pending runner on a node being emptied (nodeLeaving), the webhook does what retire does — removes the runner from GitHub,
// which refuses a busy one, then deletes the Runner — and deletes its pod before it
// answers. It never refuses an eviction: a busy runner's, one from a node staying (a
// descheduler's), a standby's and any it cannot decide are left to the budget, as without the webhook; so is every eviction when the
// controller is down (failurePolicy Ignore). Nothing here can let a busy runner go that
// the budget would have kept.

// EvictionWebhookPath is where the controller serves the eviction webhook.
const EvictionWebhookPath = "/evict-runner"

var evictionReviews = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "gantry_eviction_webhook_reviews_total",
	Help: "Pod evictions the eviction webhook reviewed, by what it did: retired (an idle runner, removed from GitHub and its pod deleted before the eviction), busy (left to the pool's PodDisruptionBudget), other (not a runner pod, or one already going), not_leaving (an idle runner on a node not cordoned or tainted for removal: left to the budget), standby (not the leader), dry_run, error (left to the budget).",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(evictionReviews) }

// Eviction review results (the metric's result label).
const (
	evictRetired = "retired"
	evictBusy    = "busy"
	evictOther   = "other"
	// evictNotLeaving: an idle runner's pod evicted from a node not being emptied.
	evictNotLeaving = "not_leaving"
	evictStandby    = "standby"
	evictDryRun     = "dry_run"
	evictError      = "error"
)

// EvictionWebhook is the eviction webhook's admission handler. leading says whether this
// replica leads: only the leader's reconcilers act on runners, so a standby acts on none.
func (r *Reconciler) EvictionWebhook(leading func() bool) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		result, why, err := r.reviewEviction(ctx, req, leading)
		evictionReviews.WithLabelValues(result).Inc()
		if err != nil {
			// The budget decides, as without the webhook; the runner's own reconcile
			// retires it when its node is being emptied.
			log.FromContext(ctx).Error(err, "Eviction webhook: left to the PodDisruptionBudget",
				"pod", types.NamespacedName{Namespace: req.Namespace, Name: req.Name})
			return admission.Allowed("left to the PodDisruptionBudget: " + err.Error())
		}
		return admission.Allowed(why)
	})
}

// reviewEviction is one review: its result label, what the answer says, and an error
// when it could not decide.
func (r *Reconciler) reviewEviction(ctx context.Context, req admission.Request, leading func() bool) (string, string, error) {
	switch {
	case req.Operation != "CREATE" || req.SubResource != "eviction" || req.Resource.Resource != "pods":
		return evictOther, "not a pod eviction", nil
	case req.DryRun != nil && *req.DryRun:
		return evictDryRun, "dry run: nothing done", nil
	case !leading():
		return evictStandby, "not the leading replica: left to the PodDisruptionBudget", nil
	}
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return evictOther, "not a Gantry runner pod", nil // the cache holds Gantry's pods only
		}
		return evictError, "", fmt.Errorf("reading the pod: %w", err)
	}
	if !ownedByRunner(pod) || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return evictOther, "not a runner pod that runs", nil
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: metav1.GetControllerOf(pod).Name}
	rn := &v1alpha1.Runner{}
	if err := r.Client.Get(ctx, key, rn); err != nil {
		if apierrors.IsNotFound(err) {
			return evictOther, "its Runner is gone", nil
		}
		return evictError, "", fmt.Errorf("reading the runner: %w", err)
	}
	if rn.Status.Phase == v1alpha1.RunnerFailed || rn.Status.Phase == v1alpha1.RunnerSucceeded {
		return evictOther, "its runner has ended", nil
	}
	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: rn.Namespace, Name: rn.Spec.PoolName}, pool); err != nil {
		return evictError, "", fmt.Errorf("reading the runner's pool: %w", err)
	}
	// What this process knows of the runner beyond its stored status (a job it heard of,
	// a phase not written yet), as Reconcile sees it.
	s := &scope{runner: rn, pool: pool, pod: pod, before: rn.DeepCopy()}
	r.recall(s)
	r.recallJob(s)
	if ranJob(s.runner) {
		return evictBusy, "the runner is running a job: its pool's PodDisruptionBudget keeps it until the job ends", nil
	}
	why, err := r.nodeLeaving(ctx, pod.Spec.NodeName)
	if err != nil {
		return evictError, "", err
	}
	if why == "" {
		return evictNotLeaving, "its node is not being emptied: left to the PodDisruptionBudget", nil
	}
	return r.retireForEviction(ctx, s, why)
}

// nodeLeaving says why the node is being emptied on purpose (leaving, drain.go), ""
// when it is not. The webhook acts only on such a node: kubectl drain, cluster-autoscaler
// and Karpenter cordon or taint a node before they evict from it, and the reconciler
// retires the node's idle runners then anyway — so a review forged by something that
// can reach the webhook's port can hasten only what was already under way. The node's
// cordon reaches the cache a moment after kubectl's first eviction may: a node the cache
// shows staying is read again from the API server.
func (r *Reconciler) nodeLeaving(ctx context.Context, name string) (string, error) {
	if name == "" || !r.Nodes.Enabled() {
		return "", nil // not bound (the eviction needs no budget), or nodes not read
	}
	cached, err := r.Nodes.Get(ctx, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading the pod's node: %w", err)
	}
	if err == nil {
		if why := leaving(cached); why != "" {
			return why, nil
		}
	}
	node := &corev1.Node{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		return "", ctrl.IgnoreNotFound(err)
	}
	return leaving(node), nil
}

// retireForEviction is retire (drain.go) within the eviction's request: GitHub first,
// whose "busy" keeps the runner, then the Runner and its pod. The event is written only
// by the review that deleted the Runner.
func (r *Reconciler) retireForEviction(ctx context.Context, s *scope, why string) (string, string, error) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("runner", runnerKey(s.runner)))
	if !r.unregistered.has(s.runner) {
		err := r.Sources.For(s.pool).Unregister(ctx, s.pool, s.runner.Name, s.runner.Status.GitHubRunnerID)
		switch {
		case err == nil:
			r.unregistered.add(s.runner)
		case github.IsBusy(err):
			return evictBusy, "the runner just took a job: its pool's PodDisruptionBudget keeps it until the job ends", nil
		default:
			return evictError, "", fmt.Errorf("removing the runner from GitHub: %w", err)
		}
	}
	log.FromContext(ctx).Info("Retiring the runner: its pod is being evicted", "why", why)
	// A Runner already being deleted (its node's drain retired it a moment ago, or its
	// pool scaled down) has its pod deleted all the same: finalize may not have got to it.
	if s.runner.DeletionTimestamp == nil {
		if err := r.deleteRunner(ctx, s.runner); err != nil {
			return evictError, "", fmt.Errorf("deleting the runner: %w", err)
		}
	}
	// The pod now, not when finalize gets to it: the eviction must find it being deleted.
	err := r.Client.Delete(ctx, s.pod, ctrl.Preconditions{UID: &s.pod.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return evictError, "", fmt.Errorf("deleting the runner's pod: %w", err)
	}
	if s.runner.DeletionTimestamp == nil {
		r.Events.Eventf(s.runner, s.pool, corev1.EventTypeNormal, "Retired", "Drain",
			"%s and the runner's pod was being evicted: the runner had no job, so it was removed at once; its pool replaces it on another node", why)
	}
	return evictRetired, "the runner had no job: removed from GitHub and deleted", nil
}

// ServeEvictions is an http.Handler for the eviction webhook (AdmissionReview v1).
func ServeEvictions(h admission.Handler) http.Handler {
	return &admission.Webhook{Handler: h}
}
