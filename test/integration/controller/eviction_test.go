package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// evictionReviews reads the eviction webhook's counter for result.
func evictionReviews(t *testing.T, result string) float64 {
	return counterValue(t, "gantry_eviction_webhook_reviews_total", map[string]string{"result": result})
}

// With the eviction webhook, the first eviction of an idle runner's pod from a cordoned
// node passes: the runner is removed from GitHub and its pod deleted within the
// eviction's request, so the API server lets the pod go without the pool's
// PodDisruptionBudget — where without the webhook the budget refuses it (429) and kubectl
// drain waits 5 s before asking again. A dry run retires nothing, an eviction from a node
// staying is left to the budget, and a busy runner's pod is refused until its job ends.
func TestEvictionWebhookLetsAnIdleRunnerGoAtOnce(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, stack.Options{EvictionWebhook: true})
	busy, agent, job, idle := w.busyAndIdle("evict", "node-evict")
	retired, busyReviews, dryRuns := evictionReviews(t, "retired"), evictionReviews(t, "busy"), evictionReviews(t, "dry_run")

	// A dry run: the budget's answer, and nothing retired.
	dry := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: idle.Name},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
	err := w.c.SubResource("eviction").Create(w.ctx(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: idle.Name}}, dry,
		&client.SubResourceCreateOptions{CreateOptions: client.CreateOptions{DryRun: []string{metav1.DryRunAll}}})
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("a dry-run eviction of the idle runner's pod: %v, want the budget's 429", err)
	}
	if got := evictionReviews(t, "dry_run") - dryRuns; got != 1 {
		t.Errorf("dry-run reviews: %v, want 1", got)
	}
	if _, err := w.getRunner(idle.Name); err != nil {
		t.Fatalf("the idle runner after a dry-run eviction: %v, want it kept", err)
	}

	// The idle runner's pod, evicted from a node nobody is emptying (a descheduler, or a
	// review forged by something that reaches the webhook's port): left to the budget.
	notLeaving := evictionReviews(t, "not_leaving")
	if err := w.evictPod(idle.Name); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting the idle runner's pod from a node staying: %v, want the budget's 429", err)
	}
	if got := evictionReviews(t, "not_leaving") - notLeaving; got != 1 {
		t.Errorf("not_leaving reviews: %v, want 1", got)
	}

	// kubectl drain: the cordon, then at once the eviction, which passes the first time
	// (retired by the webhook; or, had the runner's own reconcile been quicker, its pod
	// already being deleted).
	w.cordon("node-evict")
	asked := time.Now()
	if err := w.evictPod(idle.Name); err != nil {
		t.Fatalf("evicting the idle runner's pod from a cordoned node: %v, want it to pass at once", err)
	}
	t.Logf("the idle runner's eviction passed in %s (reviews: %v retired)", time.Since(asked), evictionReviews(t, "retired")-retired)
	pod, err := w.getPod(idle.Name)
	if err == nil && pod.DeletionTimestamp.IsZero() {
		t.Errorf("the idle runner's pod is not being deleted after its eviction passed")
	}
	w.eventually("the idle runner gone from GitHub", func() (bool, error) {
		for _, r := range w.sim.Runners() {
			if r.Name == idle.Name {
				return false, nil
			}
		}
		return true, nil
	})
	if !slices.ContainsFunc(w.events(idle.Name), func(e eventView) bool { return e.Reason == "Retired" }) {
		t.Errorf("no Retired event on the idle runner: %+v", w.events(idle.Name))
	}

	// The busy runner's pod: the webhook leaves it to the budget, which refuses it.
	if err := w.evictPod(busy); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting the busy runner's pod: %v, want the budget's 429", err)
	}
	if got := evictionReviews(t, "busy") - busyReviews; got != 1 {
		t.Errorf("busy reviews: %v, want 1", got)
	}
	if got := w.simJob(job.ID); got.Status != "in_progress" {
		t.Errorf("the busy runner's job is %q after its refused eviction, want in_progress", got.Status)
	}
	if err := agent.CompleteJob(context.Background(), job.ID, "success"); err != nil {
		t.Fatalf("completing the job: %v", err)
	}
	_ = w.exitPod(busy, 0)
	w.eventually("the busy runner's pod gone after its job", func() (bool, error) {
		return !w.hasPod(busy), nil
	})
	if got := w.simJob(job.ID); got.Conclusion != "success" {
		t.Errorf("the busy runner's job concluded %q, want success", got.Conclusion)
	}
}
