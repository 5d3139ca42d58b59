// Package ux tests what a platform engineer sees of Gantry, against a real
// kube-apiserver, the GitHub simulator over HTTP and the real controller manager:
// the columns of `kubectl get runnerpools` and `kubectl get runners`, the events the
// controllers write, the metrics the manager exports (checked against the Grafana
// dashboard and docs/metrics.md) and the troubleshooting entry of every reason.
package ux

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The manager logs at error level only: the tests look at what it writes to the
	// API server and the metrics registry, not at its logs.
	ctrllog.SetLogger(zap.New(zap.UseDevMode(false), zap.Level(zapcore.ErrorLevel)))
	testenv.Main(m, &env)
}

const (
	// testToken is a made-up token the simulator accepts; tests check it never shows.
	testToken     = "ghp_uxtestsimulatedtoken000000000000000"
	webhookSecret = "gantry-ux-test-webhook-secret"
	credsSecret   = "github-creds"
)

// world is one test's GitHub simulator, Gantry manager and namespace.
type world struct {
	t      *testing.T
	ns     string
	sim    *simgithub.Sim
	simURL string
	c      client.Client
}

// newWorld starts a simulator (organization acme, repository acme/api, rate limits
// on so that responses carry X-RateLimit headers), the credentials and webhook
// Secrets, a Gantry manager watching a fresh namespace, and acme's webhook pointing at
// it.
func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, func(*stack.Options) {})
}

// newWorldWith is newWorld with its stack's options changed by opts.
func newWorldWith(t *testing.T, opts func(*stack.Options)) *world {
	t.Helper()
	w := &world{t: t, ns: env.Namespace(t), c: env.Client}
	o := stack.Options{
		Token:             testToken,
		CredentialsSecret: credsSecret,
		WebhookSecret:     webhookSecret,
		RateLimits:        simgithub.RateLimits{Secondary: simgithub.SecondaryLimits{Disabled: true}},
	}
	opts(&o)
	st := stack.Start(t, env, w.ns, o)
	w.sim, w.simURL = st.Sim, st.SimURL
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
	return testutil.RunnerPool(w.ns, name).URL(w.simURL + "/acme").Credentials(credsSecret).Labels("linux")
}

// eventually polls cond every 50ms until it holds or timeout passes.
func (w *world) eventually(what string, timeout time.Duration, cond func() (bool, error)) {
	w.t.Helper()
	testutil.Poll(w.t, what, timeout, 50*time.Millisecond, cond, w.dump)
}

// dump logs what a failed wait needs to be understood.
func (w *world) dump() {
	var pools v1alpha1.RunnerPoolList
	_ = w.c.List(context.Background(), &pools, client.InNamespace(w.ns))
	for _, p := range pools.Items {
		w.t.Logf("pool %s: status %+v", p.Name, p.Status)
	}
	var runners v1alpha1.RunnerList
	_ = w.c.List(context.Background(), &runners, client.InNamespace(w.ns))
	for _, r := range runners.Items {
		w.t.Logf("runner %s: status %+v", r.Name, r.Status)
	}
	if w.sim != nil {
		for _, d := range w.sim.Deliveries() {
			w.t.Logf("delivery %s %s job %d: %d %s", d.Event, d.Action, d.JobID, d.StatusCode, d.Status)
		}
		for _, j := range w.sim.Jobs() {
			w.t.Logf("GitHub job %d: %s", j.ID, j.Status)
		}
	}
}

func (w *world) runners(pool string) []v1alpha1.Runner {
	w.t.Helper()
	var list v1alpha1.RunnerList
	if err := w.c.List(w.ctx(), &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

// runnerWithPod waits for a runner of pool that is registered and has its pod.
func (w *world) runnerWithPod(pool string) v1alpha1.Runner {
	w.t.Helper()
	var rn v1alpha1.Runner
	w.eventually("a registered runner with a pod in pool "+pool, 30*time.Second, func() (bool, error) {
		for _, r := range w.runners(pool) {
			if r.Status.Phase != v1alpha1.RunnerFailed && w.hasPod(r.Name) {
				rn = r
				return true, nil
			}
		}
		return false, nil
	})
	return rn
}

// updatePodStatus writes the pod's status after mutate changed it, as a kubelet would.
func (w *world) updatePodStatus(name string, mutate func(*corev1.Pod)) {
	w.t.Helper()
	pod := &corev1.Pod{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, pod); err != nil {
		w.t.Fatal(err)
	}
	mutate(pod)
	if err := w.c.Status().Update(w.ctx(), pod); err != nil {
		w.t.Fatalf("updating the status of pod %s: %v", name, err)
	}
}

// setPodRunning writes what a kubelet writes once the runner container started.
func (w *world) setPodRunning(name string) {
	w.t.Helper()
	w.updatePodStatus(name, testutil.PodStarted)
}

// setPodWaiting writes a kubelet's waiting state for the runner container.
func (w *world) setPodWaiting(name, reason, message string) {
	w.t.Helper()
	w.updatePodStatus(name, func(pod *corev1.Pod) {
		pod.Status.Phase = corev1.PodPending
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name:  v1alpha1.RunnerContainerName,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
		}}
	})
}

// event waits for an event of type typ and reason about the object named name, and
// returns it.
func (w *world) event(name, typ, reason string, timeout time.Duration) corev1.Event {
	w.t.Helper()
	var ev corev1.Event
	w.eventually("a "+typ+" event "+reason+" about "+name, timeout, func() (bool, error) {
		var list corev1.EventList
		if err := w.c.List(w.ctx(), &list, client.InNamespace(w.ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == typ {
				ev = e
				return true, nil
			}
		}
		return false, nil
	})
	return ev
}

// runJob has runner name's pod run, and the runner agent in it take and finish its job,
// which must be job id: what the official runner does with its JIT configuration.
func (w *world) runJob(name string, id int64) {
	w.t.Helper()
	w.setPodRunning(name)
	agent := w.agent(name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ran, err := agent.Run(ctx, runnerapi.RunOptions{PollWait: 2 * time.Second})
	if err != nil {
		w.t.Fatalf("the runner agent: %v", err)
	}
	if ran.ID != id {
		w.t.Fatalf("the agent ran job %d, want %d", ran.ID, id)
	}
}

// agent is a runner agent with runner name's JIT configuration, as its pod would run.
func (w *world) agent(name string) *runnerapi.Client {
	w.t.Helper()
	secret := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, secret); err != nil {
		w.t.Fatal(err)
	}
	agent, err := runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return agent
}

// hasPod reports whether the runner's pod exists: it is made only for a registered
// runner, and the runner's status records both with its first change.
func (w *world) hasPod(name string) bool {
	return w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, &corev1.Pod{}) == nil
}
