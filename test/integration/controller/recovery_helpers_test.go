package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// gantryProc is a Gantry manager a test starts and stops itself, as a controller pod
// is started and restarted.
type gantryProc struct {
	cancel context.CancelFunc
	done   chan error
	once   bool
}

// startGantry starts a manager with newWorld's options (stack.ManagerOptions) watching namespace ns. It is
// stopped when the test ends unless the test stops it first.
func startGantry(t *testing.T, ns string) *gantryProc {
	t.Helper()
	return startGantryWith(t, stack.ManagerOptions(ns))
}

// startGantryWith is startGantry with the manager options opts.
func startGantryWith(t *testing.T, opts manager.Options) *gantryProc {
	t.Helper()
	g, err := manager.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &gantryProc{cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- g.Manager.Start(ctx) }()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop stops the manager and waits until it has stopped.
func (p *gantryProc) stop(t *testing.T) {
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

// inNamespace is this world in another, fresh namespace that holds the same
// credentials Secret and that no manager watches yet: for tests that run their own.
func (w *world) inNamespace() *world {
	w.t.Helper()
	w2 := *w
	w2.ns = env.Namespace(w.t)
	w2.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w2.ns, Name: "github-creds"},
		Data:       map[string][]byte{"github_token": []byte(testToken)},
	})
	return &w2
}

// poolWithRecovery is w.pool(name) with minIdle and spec.recovery set.
func (w *world) poolWithRecovery(name string, minIdle int32, rec v1alpha1.RecoverySpec) *v1alpha1.RunnerPool {
	p := w.pool(name).MinIdle(minIdle).Obj()
	p.Spec.Recovery = rec
	return p
}

// newRunner waits for a runner of pool that has its pod (so is registered: its status
// may show neither yet), has not failed and is not one of skip, and returns it.
func (w *world) newRunner(pool string, skip ...string) v1alpha1.Runner {
	w.t.Helper()
	var rn v1alpha1.Runner
	w.eventually("a registered runner with a pod in pool "+pool, func() (bool, error) {
		for _, r := range w.runners(pool) {
			if r.Status.Phase != v1alpha1.RunnerFailed && r.DeletionTimestamp.IsZero() &&
				!slices.Contains(skip, r.Name) && w.hasPod(r.Name) {
				rn = r
				return true, nil
			}
		}
		return false, nil
	})
	return rn
}

func (w *world) getRunner(name string) (*v1alpha1.Runner, error) {
	r := &v1alpha1.Runner{}
	return r, w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, r)
}

// pending reports whether a runner's phase says it is waiting to run: Pending, or none
// yet (a new runner's status is written with its first change, at most 15 s after).
func pending(phase v1alpha1.RunnerPhase) bool { return phase == "" || phase == v1alpha1.RunnerPending }

// hasPod reports whether the runner's pod exists. A pod is made only for a registered
// runner, and a kubelet starts it as soon as it exists, whatever the Runner's status
// shows by then: the controller writes the registration and the pod with the runner's
// first status change.
func (w *world) hasPod(name string) bool {
	_, err := w.getPod(name)
	return err == nil
}

func (w *world) getPod(name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: name}, p)
}

// updatePodStatus writes the pod's status after mutate changed it, as a kubelet would.
func (w *world) updatePodStatus(name string, mutate func(*corev1.Pod)) {
	w.t.Helper()
	pod, err := w.getPod(name)
	if err != nil {
		w.t.Fatal(err)
	}
	mutate(pod)
	if err := w.c.Status().Update(w.ctx(), pod); err != nil {
		w.t.Fatalf("updating the status of pod %s: %v", name, err)
	}
}

// bindPod binds the pod to a node through the binding subresource, as the scheduler
// does. A bound pod is deleted gracefully: it stays terminating until a kubelet (or a
// force-delete) confirms it is gone — and envtest has no kubelet.
func (w *world) bindPod(name, node string) {
	w.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := w.c.SubResource("binding").Create(w.ctx(), pod, binding); err != nil {
		w.t.Fatalf("binding pod %s to node %s: %v", name, node, err)
	}
}

// agent is the runner agent of a runner, configured from its Secret.
func (w *world) agent(runnerName string) *runnerapi.Client {
	w.t.Helper()
	secret := &corev1.Secret{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: runnerName}, secret); err != nil {
		w.t.Fatal(err)
	}
	a, err := runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

// connect plays the runner agent of runnerName coming online on GitHub, until the test
// ends.
func (w *world) connect(runnerName string) {
	w.t.Helper()
	if _, err := w.agent(runnerName).Connect(w.t.Context()); err != nil {
		w.t.Fatalf("connecting runner %s: %v", runnerName, err)
	}
}

// runnerFailuresMetric reads gantry_runner_failures_total{namespace,pool,reason}.
func runnerFailuresMetric(t *testing.T, ns, pool, reason string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"namespace": ns, "pool": pool, "reason": reason}
	for _, f := range families {
		if f.GetName() != "gantry_runner_failures_total" {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// warningEvent waits for a Warning event about object with reason and returns it.
func (w *world) warningEvent(object, reason string) corev1.Event {
	w.t.Helper()
	var ev corev1.Event
	w.eventually("a Warning event "+reason+" for "+object, func() (bool, error) {
		var list corev1.EventList
		if err := w.c.List(w.ctx(), &list, client.InNamespace(w.ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == object && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				ev = e
				return true, nil
			}
		}
		return false, nil
	})
	return ev
}

// expectFailed waits for the runner to fail with reason and checks what a failure must
// leave behind: phase Failed, status.reason, a status.message containing each of
// wantInMsg, a Failed condition with the same reason and message, a Warning event with
// that reason and message, and wantCount in gantry_runner_failures_total for the pool
// and reason. It returns the failed Runner.
func (w *world) expectFailed(pool, name, reason string, wantCount float64, wantInMsg ...string) *v1alpha1.Runner {
	w.t.Helper()
	var rn *v1alpha1.Runner
	w.eventually("runner "+name+" Failed with "+reason, func() (bool, error) {
		r, err := w.getRunner(name)
		if err != nil {
			return false, err
		}
		rn = r
		return r.Status.Phase == v1alpha1.RunnerFailed, nil
	})
	st := rn.Status
	if st.Reason != reason {
		w.t.Fatalf("runner %s failed with reason %q (%s), want %s", name, st.Reason, st.Message, reason)
	}
	for _, want := range wantInMsg {
		if !strings.Contains(st.Message, want) {
			w.t.Errorf("runner %s: message %q does not contain %q", name, st.Message, want)
		}
	}
	c := meta.FindStatusCondition(st.Conditions, runner.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || c.Message != st.Message {
		w.t.Errorf("runner %s: Failed condition = %+v, want True with reason %s and the status message", name, c, reason)
	}
	if ev := w.warningEvent(name, reason); ev.Message != st.Message {
		w.t.Errorf("runner %s: event message %q, want the status message %q", name, ev.Message, st.Message)
	}
	if got := runnerFailuresMetric(w.t, w.ns, pool, reason); got != wantCount {
		w.t.Errorf("gantry_runner_failures_total{pool=%q,reason=%q} = %v, want %v", pool, reason, got, wantCount)
	}
	return rn
}

// failedAt is when the runner's Failed condition became True.
func failedAt(t *testing.T, rn *v1alpha1.Runner) time.Time {
	t.Helper()
	c := meta.FindStatusCondition(rn.Status.Conditions, runner.ConditionFailed)
	if c == nil {
		t.Fatalf("runner %s has no Failed condition", rn.Name)
	}
	return c.LastTransitionTime.Time
}

// expectPodGone waits until the runner's pod is gone from the API server.
func (w *world) expectPodGone(name string) {
	w.t.Helper()
	w.eventually("pod "+name+" gone", func() (bool, error) {
		_, err := w.getPod(name)
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
}

// sleepUntil sleeps until t; it returns at once when t has passed.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
