// Package hostile tests that one bad RunnerPool never stops the others, against a real
// kube-apiserver, the GitHub simulator over HTTP and the real controller manager: each
// plausible mistake is refused by the API server with a message naming the field, or
// accepted and reported on that pool alone; a pool stored before a validation rule
// existed, which this version cannot decode, is reported on itself; and a healthy pool
// beside them runs its jobs throughout, and after a controller restart.
//
// The package has its own API server: one test replaces the RunnerPool CRD for a while.
package hostile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/manager"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.UseDevMode(false), zap.Level(zapcore.ErrorLevel)))
	testenv.Main(m, &env)
}

const (
	testToken   = "ghp_hostiletestsimulatedtoken00000000000"
	credsSecret = "github-creds"
	// healthyLabel routes the test's jobs to the healthy pool only.
	healthyLabel = "healthy"
)

// world is one test's simulator and a namespace that only the test's own managers
// watch, so that it can stop and start them.
type world struct {
	t      *testing.T
	ns     string
	sim    *simgithub.Sim
	simURL string
	c      client.Client
}

func newWorld(t *testing.T) *world {
	t.Helper()
	st := stack.Start(t, env, env.Namespace(t), stack.Options{
		Token: testToken, CredentialsSecret: credsSecret, WebhookSecret: "unused-here",
		RateLimits: simgithub.RateLimits{Disabled: true},
	})
	w := &world{t: t, ns: env.Namespace(t), sim: st.Sim, simURL: st.SimURL, c: env.Client}
	w.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: credsSecret},
		Data:       map[string][]byte{"github_token": []byte(testToken)},
	})
	return w
}

// gantry is a manager the test starts and stops, as a controller pod is restarted.
type gantry struct {
	cancel context.CancelFunc
	done   chan error
	once   bool
}

// start runs a manager watching the world's namespace; the test's end stops it. Its
// jobs come from resync (every second), which lists the queued jobs of repository pools.
func (w *world) start() *gantry {
	w.t.Helper()
	g, err := manager.New(env.Config, stack.ManagerOptions(w.ns))
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &gantry{cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- g.Manager.Start(ctx) }()
	w.t.Cleanup(func() { p.stop(w.t) })
	return p
}

// stop stops the manager and fails the test if it ended with an error — a cache that
// never synced is one.
func (p *gantry) stop(t *testing.T) {
	t.Helper()
	if p.once {
		return
	}
	p.once = true
	p.cancel()
	if err := <-p.done; err != nil {
		t.Errorf("manager stopped with an error: %v", err)
	}
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

// healthyPool is a valid repository pool on the simulator taking jobs labeled healthy.
func (w *world) healthyPool(name string) *v1alpha1.RunnerPool {
	return testutil.RunnerPool(w.ns, name).URL(w.simURL + "/acme/api").Credentials(credsSecret).
		Labels(healthyLabel).MaxRunners(3).Obj()
}

// eventually polls cond until it holds or two minutes pass (the machine may be loaded).
func (w *world) eventually(what string, cond func() (bool, error)) {
	w.t.Helper()
	testutil.Poll(w.t, what, 2*time.Minute, 100*time.Millisecond, cond, w.dump)
}

func (w *world) dump() {
	var pools v1alpha1.RunnerPoolList
	_ = w.c.List(context.Background(), &pools, client.InNamespace(w.ns))
	for _, p := range pools.Items {
		w.t.Logf("pool %s: decode %q status %+v", p.Name, p.DecodeError, p.Status)
	}
	var runners v1alpha1.RunnerList
	_ = w.c.List(context.Background(), &runners, client.InNamespace(w.ns))
	for _, r := range runners.Items {
		w.t.Logf("runner %s: deleting=%v status %+v", r.Name, !r.DeletionTimestamp.IsZero(), r.Status)
	}
}

func (w *world) getPool(name string) (*v1alpha1.RunnerPool, error) {
	p := &v1alpha1.RunnerPool{}
	return p, w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, p)
}

func (w *world) runners(pool string) []v1alpha1.Runner {
	w.t.Helper()
	var list v1alpha1.RunnerList
	if err := w.c.List(w.ctx(), &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		w.t.Fatal(err)
	}
	return list.Items
}

// runJob queues a job for the healthy pool and plays kubelet and runner agent until the
// job completed on GitHub and its runner is gone.
//
// The runner played may be one the pool made for the previous job: resync, every
// second, is what tells the pool that job completed, and until it does the pool replaces
// the runner that ran it. Resync then retires that runner, maybe after it was chosen
// here; its job goes to another runner, as a real retired runner exits and leaves the
// job to the next. So a runner retired before it took the job is passed over for another.
func (w *world) runJob(pool, when string) {
	w.t.Helper()
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"self-hosted", healthyLabel}, Duration: simgithub.Duration(100 * time.Millisecond)})
	if err != nil {
		w.t.Fatal(err)
	}
	retired := map[string]bool{}
	var played string
	w.eventually(when+": a runner of pool "+pool+" to take the job", func() (bool, error) {
		for _, r := range w.runners(pool) {
			if retired[r.Name] || !r.DeletionTimestamp.IsZero() || r.Status.Phase == v1alpha1.RunnerFailed || !w.hasPod(r.Name) {
				continue
			}
			ran, err := w.play(r.Name)
			if apierrors.IsNotFound(err) || errors.Is(err, runnerapi.ErrRunnerRemoved) {
				retired[r.Name] = true
				continue
			}
			if err != nil {
				w.t.Fatalf("%s: the agent of %s: %v", when, r.Name, err)
			}
			if ran.ID != job.ID {
				w.t.Fatalf("%s: the agent ran job %d, want %d", when, ran.ID, job.ID)
			}
			played = r.Name
			return true, nil
		}
		return false, nil
	})
	w.setPodExited(played)
	w.eventually(when+": job completed and runner "+played+" gone", func() (bool, error) {
		j, _ := w.sim.Job(job.ID)
		err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: played}, &v1alpha1.Runner{})
		return j.Status == "completed" && apierrors.IsNotFound(err), nil
	})
	// A runner created for the job while another took it is retired now: wait, so that
	// the next job finds the pool at zero.
	w.eventually(when+": pool "+pool+" back at zero runners", func() (bool, error) { return len(w.runners(pool)) == 0, nil })
}

// play starts runner name's pod and plays its agent until it ran a job; a NotFound
// error or runnerapi.ErrRunnerRemoved means the pool retired the runner first.
func (w *world) play(name string) (runnerapi.Job, error) {
	err := w.writePod(name, testutil.PodStarted)
	secret := &corev1.Secret{}
	if err == nil {
		err = w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, secret)
	}
	if err != nil {
		return runnerapi.Job{}, err
	}
	agent, err := runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), nil)
	if err != nil {
		return runnerapi.Job{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return agent.Run(ctx, runnerapi.RunOptions{PollWait: 2 * time.Second})
}

// setPodExited writes what a kubelet writes once the runner container exited 0. A pod
// already gone is no error: the controller may remove a runner whose job completed
// before its container exits.
func (w *world) setPodExited(name string) {
	w.t.Helper()
	err := w.writePod(name, func(pod *corev1.Pod) { testutil.PodExited(pod, 0) })
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("updating the status of pod %s: %v", name, err)
	}
}

// writePod writes the status mutate makes of pod name's.
func (w *world) writePod(name string, mutate func(*corev1.Pod)) error {
	pod := &corev1.Pod{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, pod); err != nil {
		return err
	}
	mutate(pod)
	return w.c.Status().Update(w.ctx(), pod)
}

// reported waits until the pool is not Ready, with reason, and has a Warning event
// with that reason; it returns the Ready condition's message.
func (w *world) reported(pool, reason string) string {
	w.t.Helper()
	var msg string
	w.eventually(pool+" reported as "+reason, func() (bool, error) {
		p, err := w.getPool(pool)
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status == metav1.ConditionTrue || c.Reason != reason {
			return false, nil
		}
		msg = c.Message
		return w.warning(pool, reason), nil
	})
	return msg
}

// warning reports whether the object has a Warning event with the reason.
func (w *world) warning(object, reason string) bool {
	var list corev1.EventList
	if err := w.c.List(w.ctx(), &list, client.InNamespace(w.ns)); err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name == object && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			return true
		}
	}
	return false
}

// readyTrue reports whether the pool is Ready=True.
func (w *world) readyTrue(pool string) bool {
	p, err := w.getPool(pool)
	return err == nil && meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)
}

func metaOf(key types.NamespacedName) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
}

func containsAll(s string, want []string) []string {
	var missing []string
	for _, x := range want {
		if !strings.Contains(s, x) {
			missing = append(missing, x)
		}
	}
	return missing
}

// hasPod reports whether the runner's pod exists: it is made only for a registered
// runner, and the runner's status records both with its first change.
func (w *world) hasPod(name string) bool {
	return w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, &corev1.Pod{}) == nil
}
