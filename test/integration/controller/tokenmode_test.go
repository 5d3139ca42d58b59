package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// In registrationMode RegistrationToken one registration token serves every runner of
// a burst: each runner's Secret holds the shared token, the runner registers itself
// (config.sh --ephemeral) from its environment, runs its job and leaves GitHub; the
// whole burst costs one registration-token call.
func TestRegistrationTokenModeServesABurstWithOneCall(t *testing.T) {
	const jobs = 3
	w := newWorld(t)
	w.create(w.pool("token").Mode(v1alpha1.RegistrationModeRegistrationToken).MaxRunners(jobs).Obj())
	w.sim.ResetCallCounts()
	for range jobs {
		if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(50 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	var rs []v1alpha1.Runner
	w.eventually("a registered runner per job", func() (bool, error) {
		rs = w.runners("token")
		for _, r := range rs {
			if !w.hasPod(r.Name) {
				return false, nil
			}
		}
		return len(rs) == jobs, nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, jobs)
	for _, r := range rs {
		pod := &corev1.Pod{}
		if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: r.Name}, pod); err != nil {
			t.Fatal(err)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range pod.Spec.Containers[0].Env {
			env[e.Name] = e
		}
		if e := env[runner.EnvRunnerToken]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Key != runner.RegistrationTokenKey {
			t.Fatalf("the token does not come from the Runner's Secret: %+v", e)
		}
		if _, jit := env[runner.EnvJITConfig]; jit {
			t.Errorf("a token-mode pod has %s", runner.EnvJITConfig)
		}
		if got := env[runner.EnvRunnerURL].Value; got != w.simURL+"/acme" {
			t.Errorf("%s = %q", runner.EnvRunnerURL, got)
		}
		if got := env[runner.EnvRunnerName].Value; got != r.Name {
			t.Errorf("%s = %q, want %q", runner.EnvRunnerName, got, r.Name)
		}
		if got := env[runner.EnvRunnerLabels].Value; got != "self-hosted,linux,x64" {
			t.Errorf("%s = %q", runner.EnvRunnerLabels, got)
		}
		secret := &corev1.Secret{}
		if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: r.Name}, secret); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(podJSON(t, pod), string(secret.Data[runner.RegistrationTokenKey])) {
			t.Error("the registration token appears in the pod")
		}

		w.setPodRunning(r.Name)
		// What the runner container does: config.sh --ephemeral, then run.sh.
		rc, err := runnerapi.Register(ctx, w.simURL, runnerapi.RegisterRequest{
			Token: string(secret.Data[runner.RegistrationTokenKey]), Name: env[runner.EnvRunnerName].Value,
			Labels: []string{"linux"}, RunnerGroup: env[runner.EnvRunnerGroup].Value, Ephemeral: true,
		}, nil)
		if err != nil {
			t.Fatalf("registering with the token: %v", err)
		}
		go func() {
			_, err := rc.Run(ctx, runnerapi.RunOptions{PollWait: 2 * time.Second})
			done <- err
		}()
	}
	for range jobs {
		if err := <-done; err != nil {
			t.Fatalf("runner: %v", err)
		}
	}
	w.eventually("every Runner Busy with its job", func() (bool, error) {
		n := 0
		for _, r := range w.runners("token") {
			if r.Status.Job != nil {
				n++
			}
		}
		return n == jobs, nil
	})
	for _, r := range rs {
		w.setPodExited(r.Name, 0)
	}
	w.eventually("nothing left in the cluster or on GitHub", func() (bool, error) {
		return len(w.runners("token")) == 0 && len(w.sim.Runners()) == 0, nil
	})
	calls := w.sim.CallCounts()
	if n := calls["POST /orgs/{org}/actions/runners/registration-token"].Total; n != 1 {
		t.Errorf("registration-token calls = %d, want 1 for %d runners", n, jobs)
	}
	if n := calls["POST /orgs/{org}/actions/runners/generate-jitconfig"].Total; n != 0 {
		t.Errorf("generate-jitconfig calls = %d in token mode, want 0", n)
	}
}

// Retiring an idle runner that registered itself finds it by name and unregisters it.
func TestRegistrationTokenModeUnregistersIdleRunnersByName(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("token-warm").Mode(v1alpha1.RegistrationModeRegistrationToken).MinIdle(1).Obj())
	var r v1alpha1.Runner
	w.eventually("a registered runner", func() (bool, error) {
		rs := w.runners("token-warm")
		if len(rs) != 1 || !w.hasPod(rs[0].Name) {
			return false, nil
		}
		r = rs[0]
		return true, nil
	})
	w.setPodRunning(r.Name)
	secret := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: r.Name}, secret); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := runnerapi.Register(ctx, w.simURL, runnerapi.RegisterRequest{
		Token: string(secret.Data[runner.RegistrationTokenKey]), Name: r.Name, Labels: []string{"linux"}, Ephemeral: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(w.sim.Runners()); n != 1 {
		t.Fatalf("GitHub has %d runners, want 1", n)
	}
	p := w.getPool("token-warm")
	patch := p.DeepCopy()
	p.Spec.MinIdle = 0
	if err := w.c.Patch(w.ctx(), p, clientMergeFrom(patch)); err != nil {
		t.Fatal(err)
	}
	w.eventually("the idle runner unregistered and removed", func() (bool, error) {
		return len(w.runners("token-warm")) == 0 && len(w.sim.Runners()) == 0, nil
	})
}

// A warm runner in RegistrationToken mode has no GitHub id until it takes a job: past
// registrationTimeout it is looked up on GitHub by name, so one that registered itself
// and is online stays Idle (and learns its id), and one that never registered fails
// as RegistrationTimeout.
func TestRegistrationTokenModeChecksIdleRunnersByName(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const timeout = 2 * time.Second
	pool := w.poolWithRecovery("token-idle", 2, v1alpha1.RecoverySpec{RegistrationTimeout: &metav1.Duration{Duration: timeout}})
	pool.Spec.RegistrationMode = v1alpha1.RegistrationModeRegistrationToken
	w.create(pool)
	var online, silent v1alpha1.Runner
	w.eventually("two registered runners with pods", func() (bool, error) {
		rs := w.runners("token-idle")
		if len(rs) != 2 {
			return false, nil
		}
		for _, r := range rs {
			if !w.hasPod(r.Name) {
				return false, nil
			}
		}
		online, silent = rs[0], rs[1]
		return true, nil
	})

	secret := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: online.Name}, secret); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := runnerapi.Register(ctx, w.simURL, runnerapi.RegisterRequest{
		Token: string(secret.Data[runner.RegistrationTokenKey]), Name: online.Name, Labels: []string{"linux"}, Ephemeral: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	w.setPodRunning(online.Name)
	w.setPodRunning(silent.Name)

	w.expectFailed("token-idle", silent.Name, v1alpha1.ReasonRegistrationTimeout, 1, "never came online on GitHub")
	w.eventually("the self-registered runner seen Online with its GitHub id", func() (bool, error) {
		r, err := w.getRunner(online.Name)
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(r.Status.Conditions, runner.ConditionOnline) && r.Status.GitHubRunnerID != 0, nil
	})
	time.Sleep(timeout) // a further registrationTimeout: nothing may fail it now
	r, err := w.getRunner(online.Name)
	if err != nil || r.Status.Phase != v1alpha1.RunnerIdle {
		t.Fatalf("the self-registered runner: %+v, %v; want Idle", r.Status, err)
	}
	if gh := w.sim.Runners(); len(gh) != 1 || gh[0].ID != r.Status.GitHubRunnerID {
		t.Errorf("GitHub runners %+v, want only %d", gh, r.Status.GitHubRunnerID)
	}
}
