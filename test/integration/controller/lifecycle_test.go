package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// A queued job scales a pool from zero: one Runner, registered just in time, its JIT
// configuration only in a Secret, one pod reading it from there. The runner takes the
// job, exits 0, and the Runner, pod, Secret and GitHub registration all go. The pool
// returns to zero.
func TestQueuedJobGetsAFreshRunnerAndNothingIsLeftOver(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("linux").MaxRunners(5).Obj())
	w.eventually("the pool to be Ready", func() (bool, error) {
		return meta.IsStatusConditionTrue(w.getPool("linux").Status.Conditions, v1alpha1.ConditionReady), nil
	})
	if n := len(w.runners("linux")); n != 0 {
		t.Fatalf("a pool with minIdle 0 and no jobs has %d runners", n)
	}

	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"self-hosted", "linux"}, Duration: simgithub.Duration(time.Second)})
	if err != nil {
		t.Fatal(err)
	}

	var rn v1alpha1.Runner
	w.eventually("a registered runner", func() (bool, error) {
		rs := w.runners("linux")
		if len(rs) != 1 || !w.hasPod(rs[0].Name) {
			return false, nil
		}
		rn = rs[0]
		return true, nil
	})

	// The JIT configuration is in the Runner's Secret and nowhere in the pod spec.
	secret := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, secret); err != nil {
		t.Fatalf("runner secret: %v", err)
	}
	jit := string(secret.Data[runner.JITConfigKey])
	if jit == "" {
		t.Fatal("runner secret has no JIT configuration")
	}
	if !ownedBy(secret.OwnerReferences, rn.Name) {
		t.Errorf("runner secret is not owned by its Runner: %+v", secret.OwnerReferences)
	}
	pod := &corev1.Pod{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, pod); err != nil {
		t.Fatalf("runner pod: %v", err)
	}
	env := pod.Spec.Containers[0].Env
	if len(env) != 1 || env[0].Name != runner.EnvJITConfig || env[0].Value != "" ||
		env[0].ValueFrom == nil || env[0].ValueFrom.SecretKeyRef == nil || env[0].ValueFrom.SecretKeyRef.Name != rn.Name {
		t.Errorf("runner container env = %+v, want %s from Secret %s", env, runner.EnvJITConfig, rn.Name)
	}
	if strings.Contains(podJSON(t, pod), jit) || strings.Contains(runnerJSON(t, &rn), jit) {
		t.Error("the JIT configuration appears in the pod or the Runner")
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod restartPolicy = %s, want Never", pod.Spec.RestartPolicy)
	}

	// The kubelet starts the container; the agent reads the JIT config and runs the job.
	w.setPodRunning(rn.Name)
	agent, err := runnerapi.NewClientFromJITConfig(jit, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan runnerapi.Job, 1)
	agentErr := make(chan error, 1)
	go func() {
		j, err := agent.Run(context.Background(), runnerapi.RunOptions{PollWait: 2 * time.Second})
		agentErr <- err
		ran <- j
	}()

	w.eventually("the runner to be Busy with the job", func() (bool, error) {
		got := &v1alpha1.Runner{}
		if err := w.c.Get(w.ctx(), client.ObjectKeyFromObject(&rn), got); err != nil {
			return false, err
		}
		return got.Status.Phase == v1alpha1.RunnerBusy && got.Status.Job != nil && got.Status.Job.ID == job.ID, nil
	})
	if err := <-agentErr; err != nil {
		t.Fatalf("agent: %v", err)
	}
	if j := <-ran; j.ID != job.ID {
		t.Fatalf("the agent ran job %d, want %d", j.ID, job.ID)
	}

	// The runner process exits 0 after its one job.
	w.setPodExited(rn.Name, 0)
	w.eventually("the Runner, its pod and its Secret to be gone", func() (bool, error) {
		for _, obj := range []client.Object{&v1alpha1.Runner{}, &corev1.Pod{}, &corev1.Secret{}} {
			err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, obj)
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	if rs := w.sim.Runners(); len(rs) != 0 {
		t.Errorf("runners left on GitHub: %+v", rs)
	}
	if j, _ := w.sim.Job(job.ID); j.Status != "completed" {
		t.Errorf("job status on GitHub = %q, want completed", j.Status)
	}
	w.eventually("the pool back at zero", func() (bool, error) {
		st := w.getPool("linux").Status
		return st.DesiredRunners == 0 && st.BusyRunners == 0 && st.QueuedJobs == 0 && st.PendingRunners == 0, nil
	})
	calls := 0
	for _, c := range w.sim.CallCounts() {
		calls += int(c.Total)
	}
	t.Logf("GitHub REST calls for one job: %d (%v)", calls, w.sim.CallCounts())
}

// Scale-down retires idle runners only, and unregisters each from GitHub first.
func TestWarmPoolScalesToZeroAndUnregisters(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("warm").MinIdle(2).MaxRunners(5).Obj())
	var names []string
	w.eventually("two registered runners", func() (bool, error) {
		rs := w.runners("warm")
		names = names[:0]
		for _, r := range rs {
			if !w.hasPod(r.Name) {
				return false, nil
			}
			names = append(names, r.Name)
		}
		return len(rs) == 2, nil
	})
	for _, n := range names {
		w.setPodRunning(n)
		w.connect(n)
	}
	w.eventually("both runners Idle", func() (bool, error) {
		for _, r := range w.runners("warm") {
			if r.Status.Phase != v1alpha1.RunnerIdle {
				return false, nil
			}
		}
		return w.getPool("warm").Status.IdleRunners == 2, nil
	})
	if n := len(w.sim.Runners()); n != 2 {
		t.Fatalf("GitHub has %d runners, want 2", n)
	}

	p := w.getPool("warm")
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.MinIdle = 0
	if err := w.c.Patch(w.ctx(), p, patch); err != nil {
		t.Fatal(err)
	}
	w.eventually("no runners in the cluster or on GitHub", func() (bool, error) {
		return len(w.runners("warm")) == 0 && len(w.sim.Runners()) == 0, nil
	})
}

// A busy runner is never deleted: asked to retire it, GitHub answers 422 and the runner
// and its pod stay until the job ends.
func TestBusyRunnerSurvivesDeletionUntilItsJobEnds(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("busy").MaxRunners(5).Obj())
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var rn v1alpha1.Runner
	w.eventually("a registered runner", func() (bool, error) {
		rs := w.runners("busy")
		if len(rs) != 1 || !w.hasPod(rs[0].Name) {
			return false, nil
		}
		rn = rs[0]
		return true, nil
	})
	w.setPodRunning(rn.Name)
	secret := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, secret); err != nil {
		t.Fatal(err)
	}
	agent, err := runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := agent.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := agent.NextJob(ctx, 5*time.Second)
	if err != nil || got == nil || got.ID != job.ID {
		t.Fatalf("NextJob = %+v, %v; want job %d", got, err, job.ID)
	}
	if err := agent.StartJob(ctx, got.ID); err != nil {
		t.Fatal(err)
	}

	// Someone deletes the Runner (a scale-down racing the in_progress webhook, a person).
	if err := w.c.Delete(w.ctx(), &rn); err != nil {
		t.Fatal(err)
	}
	w.eventually("the deleted runner to be held as Busy", func() (bool, error) {
		r := &v1alpha1.Runner{}
		if err := w.c.Get(w.ctx(), client.ObjectKeyFromObject(&rn), r); err != nil {
			return false, err
		}
		return r.Status.Phase == v1alpha1.RunnerBusy && !r.DeletionTimestamp.IsZero(), nil
	})
	pod := &corev1.Pod{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, pod); err != nil || !pod.DeletionTimestamp.IsZero() {
		t.Fatalf("the busy runner's pod was deleted or is terminating: %v", err)
	}
	if rs := w.sim.Runners(); len(rs) != 1 {
		t.Fatalf("GitHub has %d runners, want the busy one", len(rs))
	}

	// The job ends; the ephemeral runner leaves GitHub and the Runner can go.
	if err := agent.CompleteJob(ctx, got.ID, "success"); err != nil {
		t.Fatal(err)
	}
	w.eventually("the Runner gone once its job ended", func() (bool, error) {
		err := w.c.Get(w.ctx(), client.ObjectKeyFromObject(&rn), &v1alpha1.Runner{})
		return apierrors.IsNotFound(err), nil
	})
}

// An invalid image name fails the runner at once, with a reason, a message and an event,
// and its pod is deleted.
func TestInvalidImageFailsTheRunnerAtOnce(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("badimage").MinIdle(1).Obj())
	var rn v1alpha1.Runner
	w.eventually("a runner with a pod", func() (bool, error) {
		rs := w.runners("badimage")
		if len(rs) != 1 || !w.hasPod(rs[0].Name) {
			return false, nil
		}
		rn = rs[0]
		return true, nil
	})
	w.setPodWaiting(rn.Name, "InvalidImageName", `couldn't parse image name "UPPER:case"`)
	w.eventually("the runner Failed with InvalidImageName", func() (bool, error) {
		r := &v1alpha1.Runner{}
		if err := w.c.Get(w.ctx(), client.ObjectKeyFromObject(&rn), r); err != nil {
			return false, err
		}
		return r.Status.Phase == v1alpha1.RunnerFailed && r.Status.Reason == v1alpha1.ReasonInvalidImageName &&
			strings.Contains(r.Status.Message, "fix template.spec.containers[runner].image"), nil
	})
	w.eventually("the failed runner's pod deleted", func() (bool, error) {
		err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	})
	w.eventually("a Warning event for the runner", func() (bool, error) {
		return hasEvent(w, rn.Name, v1alpha1.ReasonInvalidImageName), nil
	})
	w.eventually("a replacement runner, the failed one not counted against capacity", func() (bool, error) {
		st := w.getPool("badimage").Status
		return st.FailedRunners == 1 && st.PendingRunners == 1 && len(w.runners("badimage")) == 2, nil
	})
}

// A pool whose credentials Secret is missing says so in its Ready and Degraded
// conditions, and creates nothing.
func TestMissingCredentialsSecretDegradesThePool(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("nocreds").Credentials("does-not-exist").MinIdle(1).Obj())
	w.eventually("Degraded with CredentialsSecretNotFound", func() (bool, error) {
		c := meta.FindStatusCondition(w.getPool("nocreds").Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == "True" && c.Reason == "CredentialsSecretNotFound" &&
			strings.Contains(c.Message, "does-not-exist") && strings.Contains(c.Message, "github_token"), nil
	})
	if c := meta.FindStatusCondition(w.getPool("nocreds").Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != "False" {
		t.Errorf("Ready = %+v, want False", c)
	}
	if n := len(w.runners("nocreds")); n != 0 {
		t.Errorf("a pool without credentials created %d runners", n)
	}
}

// Every webhook delivery is lost: resync finds the queued job within its interval, the
// job gets a runner, and the runner is still cleaned up after it ran the job.
func TestLostWebhooksAreRecoveredByResync(t *testing.T) {
	w := newWorld(t)
	w.sim.SetFaults(simgithub.Faults{Seed: 1, Webhooks: simgithub.WebhookFaults{DropRate: 1}})
	w.create(w.pool("repo-pool").URL(w.simURL + "/acme/api").Obj())
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(100 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	var rn v1alpha1.Runner
	w.eventually("a runner for the job no webhook announced", func() (bool, error) {
		rs := w.runners("repo-pool")
		if len(rs) != 1 || !w.hasPod(rs[0].Name) {
			return false, nil
		}
		rn = rs[0]
		return true, nil
	})
	w.setPodRunning(rn.Name)
	secret := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: rn.Name}, secret); err != nil {
		t.Fatal(err)
	}
	agent, err := runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := agent.Run(w.ctx(), runnerapi.RunOptions{PollWait: 2 * time.Second})
	if err != nil || got.ID != job.ID {
		t.Fatalf("agent ran %+v, %v; want job %d", got, err, job.ID)
	}
	w.setPodExited(rn.Name, 0)
	w.eventually("nothing left in the cluster or on GitHub", func() (bool, error) {
		return len(w.runners("repo-pool")) == 0 && len(w.sim.Runners()) == 0, nil
	})
	delivered := 0
	for _, d := range w.sim.Deliveries() {
		if d.StatusCode/100 == 2 {
			delivered++
		}
	}
	if delivered != 0 {
		t.Errorf("%d deliveries got through despite the fault: the test did not test resync", delivered)
	}
}
