// Package controller tests Gantry's controllers end to end against a real
// kube-apiserver and the GitHub simulator over HTTP. envtest has no kubelet: the tests
// move pods along by writing pod status, as a kubelet would, and play the runner agent
// with the simulator's runner API.
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.UseDevMode(false), zap.Level(zapLevel())))
	testenv.Main(m, &env)
}

const (
	testToken     = "ghp_simulatedtokenforgantrytests0000000"
	webhookSecret = "gantry-test-webhook-secret"
)

// world is one test's GitHub simulator, Gantry manager and namespace.
type world struct {
	t       *testing.T
	ns      string
	sim     *simgithub.Sim
	simURL  string
	gantry  *manager.Gantry
	c       client.Client
	hookURL string
}

// newWorld starts a simulator with organization acme and repository acme/api, a Gantry
// manager watching a fresh namespace, the credentials and webhook Secrets, and the
// organization's webhook pointing at Gantry.
func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, stack.Options{})
}

// newWorldWith is newWorld with the simulator's Actions service timings of o and its
// runner NetworkPolicy.
func newWorldWith(t *testing.T, o stack.Options) *world {
	t.Helper()
	w := &world{t: t, ns: env.Namespace(t), c: env.Client}
	st := stack.Start(t, env, w.ns, stack.Options{
		Token:                 testToken,
		CredentialsSecret:     "github-creds",
		WebhookSecret:         webhookSecret,
		RateLimits:            simgithub.RateLimits{Disabled: true},
		ActionsSessionTimeout: o.ActionsSessionTimeout,
		ActionsPollHold:       o.ActionsPollHold,
		RunnerNetworkPolicy:   o.RunnerNetworkPolicy,
		RunnerLostTimeout:     o.RunnerLostTimeout,
		EvictionWebhook:       o.EvictionWebhook,
	})
	w.sim, w.simURL, w.gantry, w.hookURL = st.Sim, st.SimURL, st.Gantry, st.HookURL
	return w
}

func (w *world) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	w.t.Cleanup(cancel)
	return ctx
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := w.c.Create(w.ctx(), obj); err != nil {
		w.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// pool is a valid pool of this world: organization acme on the simulator, labels linux.
func (w *world) pool(name string) *testutil.RunnerPoolBuilder {
	return testutil.RunnerPool(w.ns, name).URL(w.simURL + "/acme").Credentials("github-creds").Labels("linux")
}

// eventually polls cond every 50ms until it holds or 30s pass.
func (w *world) eventually(what string, cond func() (bool, error)) {
	w.t.Helper()
	testutil.Poll(w.t, what, 30*time.Second, 50*time.Millisecond, cond, w.dump)
}

// eventuallyWithin is eventually with a deadline of its own.
func (w *world) eventuallyWithin(d time.Duration, what string, cond func() (bool, error)) {
	w.t.Helper()
	testutil.Poll(w.t, what, d, 100*time.Millisecond, cond, w.dump)
}

// dump logs what a failed wait needs to be understood: pools, runners, deliveries.
func (w *world) dump() {
	var pools v1alpha1.RunnerPoolList
	_ = w.c.List(context.Background(), &pools, client.InNamespace(w.ns))
	for _, p := range pools.Items {
		w.t.Logf("pool %s: status %+v", p.Name, p.Status)
	}
	var runners v1alpha1.RunnerList
	_ = w.c.List(context.Background(), &runners, client.InNamespace(w.ns))
	for _, r := range runners.Items {
		w.t.Logf("runner %s (pool %q, created %s): deleting=%v status %+v", r.Name, r.Labels[v1alpha1.LabelPool],
			r.CreationTimestamp.Format(time.StampMilli), !r.DeletionTimestamp.IsZero(), r.Status)
	}
	for _, d := range w.sim.Deliveries() {
		w.t.Logf("delivery %d to hook %d, %s %s (redelivery=%v, made %s, done=%v at %s): %d %s", d.ID, d.HookID, d.Event, d.Action, d.Redelivery,
			d.CreatedAt.Format(time.StampMilli), d.Done, d.DeliveredAt.Format(time.StampMilli), d.StatusCode, d.Status)
	}
	w.t.Logf("GitHub runners: %+v", w.sim.Runners())
}

// runners lists a pool's runners; pool "" lists every runner of the namespace.
func (w *world) runners(pool string) []v1alpha1.Runner {
	w.t.Helper()
	var list v1alpha1.RunnerList
	opts := []client.ListOption{client.InNamespace(w.ns)}
	if pool != "" {
		opts = append(opts, client.MatchingLabels{v1alpha1.LabelPool: pool})
	}
	if err := w.c.List(w.ctx(), &list, opts...); err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

func (w *world) getPool(name string) *v1alpha1.RunnerPool {
	w.t.Helper()
	p := &v1alpha1.RunnerPool{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, p); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// setPodRunning writes what a kubelet writes once the runner container started.
func (w *world) setPodRunning(name string) {
	w.t.Helper()
	if err := w.markPodRunning(w.ctx(), name); err != nil {
		w.t.Fatalf("marking pod %s running: %v", name, err)
	}
}

// setPodExited writes what a kubelet writes when the runner container exits.
func (w *world) setPodExited(name string, code int32) {
	w.t.Helper()
	if err := w.exitPod(name, code); err != nil {
		w.t.Fatalf("marking pod %s exited: %v", name, err)
	}
}

// setPodExitedUnlessGone is setPodExited for a pod the controller may already have
// deleted (a finished ephemeral runner leaves GitHub, and its pod goes with it).
func (w *world) setPodExitedUnlessGone(name string, code int32) {
	w.t.Helper()
	if err := w.exitPod(name, code); err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("marking pod %s exited: %v", name, err)
	}
}

func (w *world) exitPod(name string, code int32) error {
	// The controller may write the pod meanwhile: read it again and retry, as a kubelet
	// would.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, pod); err != nil {
			return err
		}
		testutil.PodExited(pod, code)
		return w.c.Status().Update(w.ctx(), pod)
	})
}

// setPodWaiting writes a kubelet's waiting state for the runner container.
func (w *world) setPodWaiting(name, reason, message string) {
	w.t.Helper()
	pod := &corev1.Pod{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, pod); err != nil {
		w.t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:  v1alpha1.RunnerContainerName,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
	}}
	if err := w.c.Status().Update(w.ctx(), pod); err != nil {
		w.t.Fatalf("marking pod %s waiting: %v", name, err)
	}
}

// runJobs plays kubelet and agent for every runner of the pool ("" for every pool of
// the namespace) as it appears, until n jobs have completed on GitHub, then lets the
// pods exit. It returns the runners it started.
func (w *world) runJobs(pool string, n int) map[string]bool {
	w.t.Helper()
	return w.playRunners(pool, fmt.Sprintf("%d jobs to complete", n), func(completed map[int64]bool) bool {
		return len(completed) == n
	}, nil)
}

// playRunners plays kubelet and agent for every runner of the pool ("" for every pool)
// as it appears — each pod exits when its agent has run its job — until done holds of
// the completed jobs (check runs at each poll), then lets the remaining pods exit. It
// returns the runners it started.
func (w *world) playRunners(pool, what string, done func(completed map[int64]bool) bool, check func()) map[string]bool {
	w.t.Helper()
	started := map[string]bool{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	w.eventuallyWithin(90*time.Second, what, func() (bool, error) {
		if check != nil {
			check()
		}
		for _, rn := range w.runners(pool) {
			if started[rn.Name] || !rn.DeletionTimestamp.IsZero() {
				continue
			}
			// A kubelet starts the pod as soon as it exists: the runner is registered
			// then, whether or not its status says so yet. No pod yet, or none any more
			// (the pool retired the idle runner between the list and here), is nothing
			// to play for now.
			err := w.markPodRunning(w.ctx(), rn.Name)
			var agent *runnerapi.Client
			if err == nil {
				agent, err = w.agentFor(w.ctx(), rn.Name)
			}
			if apierrors.IsNotFound(err) {
				continue
			} else if err != nil {
				return false, fmt.Errorf("starting runner %s: %w", rn.Name, err)
			}
			started[rn.Name] = true
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				job, err := agent.Run(ctx, runnerapi.RunOptions{PollWait: 2 * time.Second})
				if errors.Is(err, runnerapi.ErrRunnerRemoved) && job.ID == 0 {
					// Retired while idle, before any job: the pool may do that, and the
					// runner is deleted with its pod. Removed mid-job stays an error.
					return
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("runner %s (job %d): %w", name, job.ID, err))
					mu.Unlock()
					return
				}
				// The runner exits after its job, as the real one does; the controller
				// may have removed the pod already.
				if err := w.exitPod(name, 0); err != nil && !apierrors.IsNotFound(err) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("marking pod %s exited: %w", name, err))
					mu.Unlock()
				}
			}(rn.Name)
		}
		completed := map[int64]bool{}
		for _, j := range w.sim.Jobs() {
			if j.Status == "completed" {
				completed[j.ID] = true
			}
		}
		return done(completed), nil
	})
	wg.Wait()
	for _, err := range errs {
		w.t.Errorf("agent: %v", err)
	}
	for name := range started {
		w.setPodExitedUnlessGone(name, 0)
	}
	return started
}
