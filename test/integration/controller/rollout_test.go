package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// A changed template reaches warm runners: idle and pending runners made from the old
// template are replaced, never above maxRunners; a busy one finishes its job on the old
// template, shown as outdated on the Runner and counted in the pool's status until it
// goes.
func TestTemplateChangeReplacesIdleAndPendingRunnersNotBusyOnes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const max = 3
	w.create(w.pool("roll").MinIdle(2).MaxRunners(max).Obj())

	// Two warm runners; one takes a job and is Busy; the pool adds a third, Pending.
	busy := w.newRunner("roll")
	idle := w.newRunner("roll", busy.Name)
	w.setPodRunning(busy.Name)
	w.setPodRunning(idle.Name)
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(8 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ran := make(chan error, 1)
	go func() {
		_, err := w.agent(busy.Name).Run(ctx, runnerapi.RunOptions{PollWait: 2 * time.Second})
		ran <- err
	}()
	w.eventually("runner "+busy.Name+" Busy with job", func() (bool, error) {
		r, err := w.getRunner(busy.Name)
		return err == nil && r.Status.Phase == v1alpha1.RunnerBusy && r.Status.Job != nil && r.Status.Job.ID == job.ID, err
	})
	pending := w.newRunner("roll", busy.Name, idle.Name)
	oldHash := w.getPool("roll").Status.TemplateHash
	// The pending runner's status records its pod, and the template hash, with its first
	// change: within 15 s.
	w.eventually("every runner showing the template it was made from", func() (bool, error) {
		for _, name := range []string{busy.Name, idle.Name, pending.Name} {
			r, err := w.getRunner(name)
			if err != nil {
				return false, err
			}
			if r.Status.Outdated {
				return false, fmt.Errorf("runner %s before the change: %+v; want not outdated", name, r.Status)
			}
			if r.Status.TemplateHash != oldHash {
				return false, nil
			}
		}
		return true, nil
	})

	// Change the template.
	p := w.getPool("roll")
	before := p.DeepCopy()
	p.Spec.Template.Spec.Containers[0].Env = append(p.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "TEMPLATE", Value: "v2"})
	if err := w.c.Patch(w.ctx(), p, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}

	var newHash string
	w.eventually("idle and pending runners replaced, the busy one kept and outdated", func() (bool, error) {
		pool := w.getPool("roll")
		newHash = pool.Status.TemplateHash
		if newHash == oldHash || newHash == "" {
			return false, nil
		}
		counted, fresh := 0, 0
		var busyNow *v1alpha1.Runner
		for _, r := range w.runners("roll") {
			if r.Name == busy.Name {
				busyNow = &r
			}
			if (r.Name == idle.Name || r.Name == pending.Name) && r.DeletionTimestamp.IsZero() {
				return false, nil // not replaced yet
			}
			if r.DeletionTimestamp.IsZero() && r.Status.Phase != v1alpha1.RunnerFailed {
				counted++
			}
			if r.Status.TemplateHash == newHash {
				fresh++
			}
		}
		if counted > max {
			t.Errorf("%d runners count against maxRunners %d during the rollout", counted, max)
		}
		return busyNow != nil && busyNow.Status.Outdated && busyNow.Status.Phase == v1alpha1.RunnerBusy &&
			pool.Status.OutdatedRunners == 1 && fresh == 2, nil
	})
	c := meta.FindStatusCondition(w.getPool("roll").Status.Conditions, v1alpha1.ConditionScalingDown)
	if c == nil {
		t.Fatal("no ScalingDown condition")
	}

	// The replacements' pods follow the new template.
	for _, r := range w.runners("roll") {
		if r.Status.TemplateHash != newHash {
			continue
		}
		pod, err := w.getPod(r.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "TEMPLATE", Value: "v2"}) {
			t.Errorf("replacement %s has runner env %v, want TEMPLATE=v2", r.Name, pod.Spec.Containers[0].Env)
		}
	}

	// The busy runner finishes its job on the old template, then goes; nothing is outdated.
	if err := <-ran; err != nil {
		t.Fatalf("the busy runner's agent: %v", err)
	}
	if j, _ := w.sim.Job(job.ID); j.Status != "completed" || !strings.EqualFold(j.RunnerName, busy.Name) {
		t.Errorf("job %+v: want completed by %s", j, busy.Name)
	}
	w.setPodExited(busy.Name, 0)
	w.eventually("no outdated runner left", func() (bool, error) {
		if r, err := w.getRunner(busy.Name); err == nil && r.DeletionTimestamp.IsZero() {
			return false, nil
		}
		return w.getPool("roll").Status.OutdatedRunners == 0, nil
	})
}

// Credentials GitHub refuses, a runner group or an organization that does not exist each
// keep the pool from being Ready with their own reason and a message that says what to
// fix; no runner is created. Once fixed, the pool recovers by itself.
func TestRefusedThenRepairedCredentials(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "revoked"},
		Data:       map[string][]byte{"github_token": []byte("ghp_revokedtokenthatgithubrefuses00000")},
	})
	w.create(w.pool("refused").Credentials("revoked").MinIdle(1).Obj())
	w.create(w.pool("nogroup").RunnerGroup("gpu-runners").MinIdle(1).Obj())
	w.create(testutilPool(w, "noorg", w.simURL+"/no-such-org"))

	for _, c := range []struct{ pool, reason, msg string }{
		{"refused", v1alpha1.ReasonCredentialsRefused, "GitHub refused the credentials in Secret " + w.ns + "/revoked"},
		{"nogroup", v1alpha1.ReasonRunnerGroupNotFound, `has no runner group "gpu-runners": create it on GitHub`},
		{"noorg", v1alpha1.ReasonScopeNotFound, "check github.url"},
	} {
		w.eventually("pool "+c.pool+" not Ready with "+c.reason, func() (bool, error) {
			st := w.getPool(c.pool).Status
			ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
			degraded := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
			return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == c.reason &&
				degraded != nil && degraded.Status == metav1.ConditionTrue && degraded.Reason == c.reason, nil
		})
		ready := meta.FindStatusCondition(w.getPool(c.pool).Status.Conditions, v1alpha1.ConditionReady)
		if !strings.Contains(ready.Message, c.msg) {
			t.Errorf("pool %s: Ready message %q does not contain %q", c.pool, ready.Message, c.msg)
		}
		if strings.Contains(ready.Message, "ghp_") {
			t.Errorf("pool %s: Ready message shows a token: %q", c.pool, ready.Message)
		}
		if n := len(w.runners(c.pool)); n != 0 {
			t.Errorf("pool %s: %d runners created with a broken configuration", c.pool, n)
		}
	}

	// Repair the Secret: the pool becomes Ready by itself (the Secret is re-read within
	// 30 s, a refusal asked again after 30 s) and creates its runner.
	secret := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), keyOf(w.ns, "revoked"), secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["github_token"] = []byte(testToken)
	if err := w.c.Update(w.ctx(), secret); err != nil {
		t.Fatal(err)
	}
	w.eventuallyWithin(100*time.Second, "pool refused Ready after the repair", func() (bool, error) {
		return meta.IsStatusConditionTrue(w.getPool("refused").Status.Conditions, v1alpha1.ConditionReady), nil
	})
	w.newRunner("refused")
	if meta.IsStatusConditionTrue(w.getPool("refused").Status.Conditions, v1alpha1.ConditionDegraded) {
		t.Error("pool refused is still Degraded after the repair")
	}
}

func testutilPool(w *world, name, url string) *v1alpha1.RunnerPool {
	return w.pool(name).URL(url).MinIdle(1).Obj()
}
