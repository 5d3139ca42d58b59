package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/testutil"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// shiftedClock is the real clock read offset ahead: a cron window, which opens on a
// minute, opens a few seconds into the test.
type shiftedClock struct {
	clock.RealClock
	offset time.Duration
}

func (c shiftedClock) Now() time.Time                  { return time.Now().Add(c.offset) }
func (c shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// newWorldWithClock is newWorld with the manager on clk.
func newWorldWithClock(t *testing.T, clk clock.Clock) *world {
	t.Helper()
	w := &world{t: t, ns: env.Namespace(t), c: env.Client}
	st := stack.Start(t, env, w.ns, stack.Options{
		Token: testToken, CredentialsSecret: "github-creds", WebhookSecret: webhookSecret,
		RateLimits: simgithub.RateLimits{Disabled: true}, Clock: clk,
	})
	w.sim, w.simURL, w.gantry, w.hookURL = st.Sim, st.SimURL, st.Gantry, st.HookURL
	return w
}

// bringOnline plays kubelet and agent for each runner of pool as it appears: its pod
// runs, and the agent connects (idle) or, with run, takes one job, after which its pod
// exits. It stops when the test ends.
func (w *world) bringOnline(pool string, run bool) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	w.t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		started := map[string]bool{}
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			var list v1alpha1.RunnerList
			if err := w.c.List(ctx, &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
				continue
			}
			for _, rn := range list.Items {
				if started[rn.Name] || !rn.DeletionTimestamp.IsZero() {
					continue
				}
				if err := w.markPodRunning(ctx, rn.Name); err != nil {
					continue
				}
				started[rn.Name] = true
				agent, err := w.agentFor(ctx, rn.Name)
				if err != nil {
					continue
				}
				wg.Add(1)
				go func(name string) {
					defer wg.Done()
					if !run {
						_, _ = agent.Connect(ctx)
						return
					}
					if _, err := agent.Run(ctx, runnerapi.RunOptions{PollWait: time.Second}); err == nil {
						if err := w.exitPod(name, 0); err != nil && !apierrors.IsNotFound(err) {
							w.t.Logf("marking pod %s exited: %v", name, err)
						}
					}
				}(rn.Name)
			}
		}
	}()
}

// markPodRunning is setPodRunning for a goroutine: it returns the error.
func (w *world) markPodRunning(ctx context.Context, name string) error {
	pod := &corev1.Pod{}
	if err := w.c.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: name}, pod); err != nil {
		return err
	}
	testutil.PodStarted(pod)
	return w.c.Status().Update(ctx, pod)
}

// agentFor is agent for a goroutine: it returns the error.
func (w *world) agentFor(ctx context.Context, runnerName string) (*runnerapi.Client, error) {
	secret := &corev1.Secret{}
	if err := w.c.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: runnerName}, secret); err != nil {
		return nil, err
	}
	return runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), nil)
}

// A window opens and closes on time with no event to wake the pool, and the idle
// runners follow: none before, two while it is open, none after.
func TestWarmWindowOpensAndCloses(t *testing.T) {
	now := time.Now().UTC()
	opens := now.Truncate(time.Minute).Add(time.Minute) // the next minute, in real time
	const lead = 4 * time.Second
	// Read ahead so that the window opens lead after now.
	clk := shiftedClock{offset: opens.Sub(now) - lead}
	w := newWorldWithClock(t, clk)
	opensAt := opens // on the shifted clock, opens happens lead from now
	cron := opensAt.Format("4 15") + " * * *"
	w.create(w.pool("office").MinIdle(0).MaxRunners(5).
		Schedule(v1alpha1.WarmSchedule{Name: "office", Cron: cron, Duration: metav1.Duration{Duration: time.Minute}, MinIdle: 2}).Obj())
	w.bringOnline("office", false)

	w.eventually("the floor to be minIdle before the window, with the opening as the next change", func() (bool, error) {
		st := w.getPool("office").Status.Warm
		return st != nil && st.Source == v1alpha1.WarmSourceMinIdle && st.MinIdle == 0 &&
			st.NextChangeAt != nil && st.NextChangeAt.Time.Equal(opensAt), nil
	})
	if n := len(w.runners("office")); n != 0 {
		t.Errorf("%d runners before the window opened, want 0", n)
	}
	w.eventuallyWithin(lead+20*time.Second, "two idle runners once the window opens", func() (bool, error) {
		p := w.getPool("office")
		st := p.Status.Warm
		return st != nil && st.Source == v1alpha1.WarmSourceSchedule && st.Schedule == "office" && st.MinIdle == 2 &&
			st.NextChangeAt != nil && st.NextChangeAt.Time.Equal(opensAt.Add(time.Minute)) && p.Status.IdleRunners == 2, nil
	})
	if got := clk.Now(); got.Before(opensAt) {
		t.Errorf("runners kept before the window opened (%s < %s)", got, opensAt)
	}
	w.eventuallyWithin(time.Minute+20*time.Second, "no runner once the window closes", func() (bool, error) {
		p := w.getPool("office")
		st := p.Status.Warm
		return st != nil && st.Source == v1alpha1.WarmSourceMinIdle && st.MinIdle == 0 && p.Status.DesiredRunners == 0 &&
			len(w.runners("office")) == 0, nil
	})
	if got := clk.Now(); got.Before(opensAt.Add(time.Minute)) {
		t.Errorf("runners retired before the window closed (%s < %s)", got, opensAt.Add(time.Minute))
	}
}

// A predictive pool keeps idle runners while jobs arrive, sized from what it measured,
// and none once they stop.
func TestPredictivePoolGrowsAndCoolsToZero(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("predict").MinIdle(0).MaxRunners(10).
		Predictive(v1alpha1.PredictiveWarmSpec{TargetMissPercent: "20", MaxIdle: 4, Cooldown: &metav1.Duration{Duration: 10 * time.Second}}).Obj())
	w.bringOnline("predict", true)

	// Two jobs a second for 12 s.
	stop := time.Now().Add(12 * time.Second)
	var grew bool
	for time.Now().Before(stop) {
		if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(200 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		if st := w.getPool("predict").Status.Warm; st != nil && st.Source == v1alpha1.WarmSourcePredictive && st.MinIdle > 0 {
			grew = true
		}
	}
	p := w.getPool("predict")
	if !grew {
		t.Errorf("the idle floor never rose above minIdle while jobs arrived: status.warm %+v", p.Status.Warm)
	}
	if pr := p.Status.Warm.Predictive; pr == nil || pr.ArrivalsPerMinute == "" || pr.ArrivalsPerMinute == "0.0" || pr.StartSeconds == "0.00" || pr.ObservedAt == nil {
		t.Errorf("status.warm.predictive = %+v; want the arrival rate, the start time and when they were observed", pr)
	} else {
		t.Logf("while jobs arrived: %+v, floor %d (%s)", *pr, p.Status.Warm.MinIdle, p.Status.Warm.Message)
	}
	w.eventuallyWithin(45*time.Second, "the floor back to zero and no runner left once jobs stop", func() (bool, error) {
		p := w.getPool("predict")
		st := p.Status.Warm
		return st != nil && st.MinIdle == 0 && st.Source == v1alpha1.WarmSourceMinIdle && p.Status.DesiredRunners == 0 &&
			len(w.runners("predict")) == 0, nil
	})
}
