package agent

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testenv"
)

var env *testenv.Env

// A real kube-apiserver, no kubelet: the tests set pods Running themselves.
func TestMain(m *testing.M) { testenv.Main(m, &env) }

type world struct {
	t   *testing.T
	ns  string
	sim *simgithub.Sim
	srv *httptest.Server
}

func newWorld(t *testing.T, lost time.Duration) *world {
	t.Helper()
	sim := simgithub.New(simgithub.Options{RateLimits: simgithub.RateLimits{Disabled: true}, RunnerLostTimeout: lost})
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	if _, err := sim.CreateOrg(simgithub.OrgSpec{Login: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "app"}); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, ns: env.Namespace(t), sim: sim, srv: srv}
}

// runnerPod registers runner name on the simulator, stores its JIT config in a Secret
// and creates its pod, changed by mutate, Running on node.
func (w *world) runnerPod(name, node string, mutate ...func(*corev1.Pod)) {
	w.t.Helper()
	ctx := w.t.Context()
	cfg, err := w.sim.GenerateJITConfig(simgithub.JITSpec{Scope: "acme", Name: name, Labels: []string{"self-hosted", "linux"}, GroupID: 1})
	if err != nil {
		w.t.Fatal(err)
	}
	cfg.URL = w.srv.URL
	labels := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: labels},
		Data: map[string][]byte{runner.JITConfigKey: []byte(cfg.Encode())}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: v1alpha1.RunnerContainerName, Image: "runner"}}}}
	for _, m := range mutate {
		m(pod)
	}
	for _, o := range []client.Object{secret, pod} {
		if err := env.Client.Create(ctx, o); err != nil {
			w.t.Fatal(err)
		}
	}
	pod.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) start(opts Options) *Agents {
	w.t.Helper()
	a, err := New(env.Config, w.ns, opts)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	w.t.Cleanup(func() { cancel(); <-done })
	return a
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *world) jobStatus(id int64) string {
	j, _ := w.sim.Job(id)
	return j.Status
}

func killed(a *Agents, pod string) *Event {
	for _, e := range a.Events() {
		if e.Kind == EventKilled && e.Pod == pod {
			return &e
		}
	}
	return nil
}

// A runner whose pod is deleted while it runs a job is recorded as killed mid-job.
func TestPodDeletedUnderABusyRunner(t *testing.T) {
	w := newWorld(t, 0)
	a := w.start(Options{})
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux"}, Duration: simgithub.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	w.runnerPod("busy", "node-a")
	eventually(t, "the job to start", func() bool { return w.jobStatus(job.ID) == simgithub.StatusInProgress })
	if err := env.Client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "busy"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the runner to be killed", func() bool { return killed(a, "busy") != nil })
	e := killed(a, "busy")
	if e.Job != job.ID || e.Cause != CausePodDeleted || e.Node != "node-a" {
		t.Errorf("kill event %+v: want job %d, cause %s, node node-a", e, job.ID, CausePodDeleted)
	}
}

// A runner whose job ends normally is never recorded as killed; a retired idle one
// is killed without a job.
func TestFinishedAndIdleRunnersAreNotBusyKills(t *testing.T) {
	w := newWorld(t, 0)
	a := w.start(Options{})
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux"}, Duration: simgithub.Duration(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	w.runnerPod("quick", "node-a")
	eventually(t, "the job to complete", func() bool { return w.jobStatus(job.ID) == simgithub.StatusCompleted })
	eventually(t, "the runner to exit", func() bool {
		for _, e := range a.Events() {
			if e.Kind == EventExited && e.Pod == "quick" {
				return true
			}
		}
		return false
	})
	w.runnerPod("idle", "node-a")
	eventually(t, "the idle runner to come online", func() bool {
		for _, r := range w.sim.Runners() {
			if r.Name == "idle" && r.Online {
				return true
			}
		}
		return false
	})
	if err := env.Client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "idle"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the idle runner to be killed", func() bool { return killed(a, "idle") != nil })
	if e := killed(a, "idle"); e.Job != 0 {
		t.Errorf("idle runner killed with job %d", e.Job)
	}
	if e := killed(a, "quick"); e != nil {
		t.Errorf("a runner that finished its job was recorded killed: %+v", e)
	}
	if errs := a.Errors(); len(errs) != 0 {
		t.Errorf("agent errors: %v", errs)
	}
}

// LoseNode kills the runners on the node without a word to GitHub, which fails the
// running job once the runner is silent for RunnerLostTimeout, while a runner that
// keeps renewing its job elsewhere is left alone.
func TestLoseNode(t *testing.T) {
	// Renewals 20 times per timeout: a loaded machine may delay a few.
	const lost = 4 * time.Second
	w := newWorld(t, lost)
	a := w.start(Options{RenewEvery: lost / 20})
	spec := simgithub.JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux"}, Duration: simgithub.Duration(time.Hour)}
	doomed, err := w.sim.QueueJob(spec)
	if err != nil {
		t.Fatal(err)
	}
	w.runnerPod("on-lost-node", "node-lost")
	eventually(t, "the first job to start", func() bool { return w.jobStatus(doomed.ID) == simgithub.StatusInProgress })
	safe, err := w.sim.QueueJob(spec)
	if err != nil {
		t.Fatal(err)
	}
	w.runnerPod("elsewhere", "node-ok")
	eventually(t, "the second job to start", func() bool { return w.jobStatus(safe.ID) == simgithub.StatusInProgress })

	if k, busy := a.LoseNode("node-lost"); k != 1 || busy != 1 {
		t.Errorf("LoseNode killed %d runners, %d busy; want 1 and 1", k, busy)
	}
	eventually(t, "GitHub to fail the lost runner's job", func() bool { return w.jobStatus(doomed.ID) == simgithub.StatusCompleted })
	if j, _ := w.sim.Job(doomed.ID); j.Conclusion != simgithub.ConclusionFailure {
		t.Errorf("the lost runner's job concluded %q, want failure", j.Conclusion)
	}
	if e := killed(a, "on-lost-node"); e == nil || e.Cause != CauseNodeLost || e.Job != doomed.ID {
		t.Errorf("kill event %+v: want cause %s, job %d", e, CauseNodeLost, doomed.ID)
	}
	time.Sleep(lost) // the renewing runner outlives the timeout
	if got := w.jobStatus(safe.ID); got != simgithub.StatusInProgress {
		t.Errorf("the renewed job is %s, want in_progress", got)
	}
	// No runner starts on a lost node.
	if _, err := w.sim.QueueJob(spec); err != nil {
		t.Fatal(err)
	}
	w.runnerPod("late", "node-lost")
	time.Sleep(500 * time.Millisecond)
	for _, e := range a.Events() {
		if e.Pod == "late" && e.Kind == EventRunning {
			t.Error("an agent started on a lost node")
		}
	}
}

// Kill ends one runner process at once, as a kubelet's hard eviction or the OOM killer
// does, without a word to GitHub; Busy lists the runners running a job until then.
func TestKillABusyRunner(t *testing.T) {
	w := newWorld(t, 0)
	a := w.start(Options{})
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux"}, Duration: simgithub.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	w.runnerPod("evicted", "node-a")
	eventually(t, "the job to start", func() bool { return w.jobStatus(job.ID) == simgithub.StatusInProgress })
	if got := a.Busy(); got["evicted"] != job.ID || len(got) != 1 {
		t.Errorf("Busy = %v, want evicted running job %d", got, job.ID)
	}
	if got, ok := a.Kill("evicted", CauseEvicted); !ok || got != job.ID {
		t.Fatalf("Kill = %d, %v; want job %d, true", got, ok, job.ID)
	}
	eventually(t, "the runner to be killed", func() bool { return killed(a, "evicted") != nil })
	if e := killed(a, "evicted"); e.Cause != CauseEvicted || e.Job != job.ID {
		t.Errorf("kill event %+v: want cause %s, job %d", e, CauseEvicted, job.ID)
	}
	if got := a.Busy(); len(got) != 0 {
		t.Errorf("Busy after the kill = %v, want none", got)
	}
	if got := w.jobStatus(job.ID); got != simgithub.StatusInProgress {
		t.Errorf("the killed runner's job is %s: the runner told GitHub, want it silent (in_progress)", got)
	}
	if _, ok := a.Kill("evicted", CauseOOMKilled); ok {
		t.Error("a second Kill of a dead runner reported a running process")
	}
}
