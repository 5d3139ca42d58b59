package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Never stuck: whatever holds a runner pod back — a container of any kind that cannot
// pull, be configured or keep running, a volume that never attaches — the runner fails
// with its own reason once its deadline has passed and not before, its slot is freed and
// a replacement made; three in a row mark the pool Degraded, quoting the pod's own
// message, and creation backs off. Pod statuses are written as a kubelet would.

// stuckCase is one way a runner pod gets stuck.
type stuckCase struct {
	name string
	// sidecar adds a native sidecar "dind" (an init container with restartPolicy Always)
	// and an init container "setup" to the template.
	sidecar bool
	// kubelet writes what a kubelet writes for the stuck pod.
	kubelet func(w *world, pod string)
	// grace is how long after the pod's creation the runner may fail (0: at once).
	grace  time.Duration
	reason string
	wantIn []string
	// bound: the pod was bound to a node, so its deletion waits for a kubelet to confirm it.
	bound bool
}

const (
	stuckGrace   = 2 * time.Second
	stuckPending = 3 * time.Second
)

func TestStuckPodsFailAfterTheirDeadlineAndAreReplaced(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tc := range []stuckCase{
		{
			name: "missing-secret",
			kubelet: func(w *world, pod string) {
				w.setPodWaiting(pod, "CreateContainerConfigError", `secret "registry-creds" not found`)
			},
			grace: stuckGrace, reason: v1alpha1.ReasonContainerConfigError,
			wantIn: []string{`container "runner" could not be configured`, `secret "registry-creds" not found`},
		},
		{
			name: "sidecar-pull", sidecar: true,
			kubelet: func(w *world, pod string) {
				w.setInitWaiting(pod, corev1.ContainerStatus{Name: "dind", State: waitingState("ImagePullBackOff", `Back-off pulling image "docker:nope"`)})
			},
			grace: stuckGrace, reason: v1alpha1.ReasonImagePullFailed,
			wantIn: []string{`sidecar "dind"`, `Back-off pulling image "docker:nope"`},
		},
		{
			name: "sidecar-crash", sidecar: true,
			kubelet: func(w *world, pod string) {
				w.setInitWaiting(pod, corev1.ContainerStatus{Name: "dind", State: waitingState("CrashLoopBackOff", "back-off 20s restarting failed container"),
					RestartCount: 3, LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}})
			},
			grace: stuckGrace, reason: v1alpha1.ReasonCrashLoop,
			wantIn: []string{`sidecar "dind" kept crashing`, "last exit code 1"},
		},
		{
			name: "init-exit", sidecar: true,
			kubelet: func(w *world, pod string) {
				w.updatePodStatus(pod, func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodFailed
					p.Status.InitContainerStatuses = []corev1.ContainerStatus{
						{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "curl: (6) Could not resolve host"}}},
						{Name: "dind", State: waitingState("PodInitializing", "")},
					}
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName, State: waitingState("PodInitializing", "")}}
				})
			},
			reason: v1alpha1.ReasonInitContainerFailed,
			wantIn: []string{`init container "setup" exited with code 2`, "Could not resolve host"},
		},
		{
			name: "volume",
			kubelet: func(w *world, pod string) {
				w.bindPod(pod, "node-csi")
				w.setPodWaiting(pod, "ContainerCreating", "")
				w.podWarning(pod, "FailedAttachVolume", `AttachVolume.Attach failed for volume "cache" : rpc error: code = DeadlineExceeded`)
			},
			grace: stuckPending, reason: v1alpha1.ReasonPendingTimeout, bound: true,
			wantIn: []string{`container "runner" waiting: ContainerCreating`, `FailedAttachVolume: AttachVolume.Attach failed for volume "cache"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := w.forTest(t)
			w.stuckPool(tc)
		})
	}
}

// forTest is w for a subtest: failures are reported on t.
func (w *world) forTest(t *testing.T) *world {
	w2 := *w
	w2.t = t
	return &w2
}

// stuckPool runs one case: three runners in a row get stuck and fail, each replaced;
// then the pool is Degraded and backs off.
func (w *world) stuckPool(tc stuckCase) {
	t := w.t
	pool := w.poolWithRecovery(tc.name, 1, v1alpha1.RecoverySpec{
		PendingTimeout:            &metav1.Duration{Duration: stuckPending},
		ImagePullGracePeriod:      &metav1.Duration{Duration: stuckGrace},
		ContainerErrorGracePeriod: &metav1.Duration{Duration: stuckGrace},
	})
	if tc.sidecar {
		spec := &pool.Spec.Template.Spec
		spec.InitContainers = append(spec.InitContainers,
			corev1.Container{Name: "setup", Image: "curlimages/curl:8.10.1"},
			corev1.Container{Name: "dind", Image: "docker:27-dind", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	}
	w.create(pool)

	var seen []string
	for i := range 3 {
		// A replacement follows each failure: the failed runner frees its slot.
		rn := w.newRunner(tc.name, seen...)
		seen = append(seen, rn.Name)
		pod, err := w.getPod(rn.Name)
		if err != nil {
			t.Fatal(err)
		}
		deadline := pod.CreationTimestamp.Add(tc.grace)
		tc.kubelet(w, rn.Name)
		if tc.grace > 0 {
			sleepUntil(deadline.Add(-time.Second))
			if got, err := w.getRunner(rn.Name); err != nil || got.Status.Phase == v1alpha1.RunnerFailed {
				t.Fatalf("runner %d failed before its deadline %s: %+v, %v", i, deadline, got.Status, err)
			}
		}
		failed := w.expectFailed(tc.name, rn.Name, tc.reason, float64(i+1), tc.wantIn...)
		if tc.bound {
			w.confirmDeletion(rn.Name)
		}
		// CreationTimestamp has whole seconds: the deadline can be up to 1s early.
		if at := failedAt(t, failed); at.Before(deadline.Add(-time.Second)) {
			t.Errorf("runner %d failed at %s, before its deadline %s", i, at, deadline)
		}
		w.expectPodGone(rn.Name)
	}

	// Three in a row: Degraded with the reason and the pod's own message, and a backoff.
	var cond *metav1.Condition
	w.eventually("pool "+tc.name+" Degraded with RunnerFailures", func() (bool, error) {
		cond = meta.FindStatusCondition(w.getPool(tc.name).Status.Conditions, v1alpha1.ConditionDegraded)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == v1alpha1.ReasonRunnerFailures, nil
	})
	for _, want := range append([]string{"3 runners failed in a row", tc.reason, "creating runners again in"}, tc.wantIn[len(tc.wantIn)-1]) {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("Degraded message %q does not contain %q", cond.Message, want)
		}
	}
	time.Sleep(2 * time.Second) // within the 30 s backoff nothing new may be created
	for _, rn := range w.runners(tc.name) {
		if !slices.Contains(seen, rn.Name) {
			t.Errorf("runner %s was created during the backoff", rn.Name)
		}
	}
	if st := w.getPool(tc.name).Status; st.PendingRunners+st.IdleRunners+st.BusyRunners != 0 || st.DesiredRunners != 1 {
		t.Errorf("pool status %+v: want desired 1 and no runner holding a slot", st)
	}
}

func waitingState(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

// setInitWaiting writes what a kubelet writes while an init container or sidecar holds
// the pod in its initialisation: that container's state, the runner waiting.
func (w *world) setInitWaiting(pod string, init corev1.ContainerStatus) {
	w.t.Helper()
	w.updatePodStatus(pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{
			{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
			init,
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName, State: waitingState("PodInitializing", "")}}
	})
}

// podWarning records a Warning event about a pod, as the kubelet or the attach-detach
// controller does.
func (w *world) podWarning(name, reason, message string) {
	w.t.Helper()
	pod, err := w.getPod(name)
	if err != nil {
		w.t.Fatal(err)
	}
	now := metav1.Now()
	w.create(&corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: w.ns, GenerateName: name + "."},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: w.ns, Name: name, UID: pod.UID, APIVersion: "v1"},
		Type:           corev1.EventTypeWarning, Reason: reason, Message: message,
		Source:         corev1.EventSource{Component: "attachdetach-controller"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	})
}

// confirmDeletion does what the kubelet of a bound pod does once the controller deleted
// it: it confirms the pod is gone (a pod that never started has nothing to stop).
func (w *world) confirmDeletion(name string) {
	w.t.Helper()
	w.eventually("pod "+name+" deleted by the controller", func() (bool, error) {
		pod, err := w.getPod(name)
		if err != nil {
			return client.IgnoreNotFound(err) == nil, client.IgnoreNotFound(err)
		}
		if pod.DeletionTimestamp.IsZero() {
			return false, nil
		}
		return true, client.IgnoreNotFound(w.c.Delete(w.ctx(), pod, client.GracePeriodSeconds(0)))
	})
}
