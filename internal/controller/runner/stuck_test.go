package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

func TestDiagnose(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := v1alpha1.RecoverySpec{
		PendingTimeout:            &metav1.Duration{Duration: 10 * time.Minute},
		ImagePullGracePeriod:      &metav1.Duration{Duration: 2 * time.Minute},
		ContainerErrorGracePeriod: &metav1.Duration{Duration: time.Minute},
	}
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	pod := func(node string, init []corev1.ContainerStatus, runner corev1.ContainerState) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(created)},
			Spec: corev1.PodSpec{
				NodeName:       node,
				InitContainers: []corev1.Container{{Name: "dind", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}, {Name: "setup"}},
				Containers:     []corev1.Container{{Name: "runner"}},
			},
			Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: init,
				ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", State: runner}}},
		}
		return p
	}
	sidecar := func(st corev1.ContainerState) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: "dind", State: st, RestartCount: 4,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
	}
	unschedulable := pod("", nil, waiting("", ""))
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available", LastTransitionTime: metav1.NewTime(created.Add(time.Minute))}}

	for _, tc := range []struct {
		name         string
		pod          *corev1.Pod
		after        time.Duration
		agentRunning bool
		wantReason   string
		wantIn       []string
		wantWait     time.Duration
	}{
		{name: "invalid image of a sidecar fails at once", pod: pod("n", sidecar(waiting("InvalidImageName", `couldn't parse image "docker:::"`)), waiting("PodInitializing", "")),
			wantReason: v1alpha1.ReasonInvalidImageName, wantIn: []string{`sidecar "dind"`, "template.spec.initContainers[dind].image", "docker:::"}},
		{name: "sidecar pull failure waits for the grace period", pod: pod("n", sidecar(waiting("ImagePullBackOff", "Back-off pulling image")), waiting("PodInitializing", "")),
			after: time.Minute, wantWait: time.Minute},
		{name: "sidecar pull failure after the grace period", pod: pod("n", sidecar(waiting("ImagePullBackOff", "Back-off pulling image")), waiting("PodInitializing", "")),
			after: 2 * time.Minute, wantReason: v1alpha1.ReasonImagePullFailed, wantIn: []string{`sidecar "dind"`, "2m", "Back-off pulling image"}},
		{name: "missing secret waits for the grace period", pod: pod("n", nil, waiting("CreateContainerConfigError", `secret "creds" not found`)),
			after: 30 * time.Second, wantWait: 30 * time.Second},
		{name: "missing secret after the grace period", pod: pod("n", nil, waiting("CreateContainerConfigError", `secret "creds" not found`)),
			after: time.Minute, wantReason: v1alpha1.ReasonContainerConfigError, wantIn: []string{`container "runner"`, `secret "creds" not found`, "1m"}},
		{name: "container create error", pod: pod("n", nil, waiting("CreateContainerError", "no such file")),
			after: 90 * time.Second, wantReason: v1alpha1.ReasonContainerCreateFailed, wantIn: []string{"no such file"}},
		{name: "sidecar crash loop before the runner starts", pod: pod("n", sidecar(waiting("CrashLoopBackOff", "back-off 40s")), waiting("PodInitializing", "")),
			after: time.Minute, wantReason: v1alpha1.ReasonCrashLoop, wantIn: []string{`sidecar "dind"`, "last exit code 1", "4 restarts"}},
		{name: "sidecar crash loop while the agent runs", pod: pod("n", sidecar(waiting("CrashLoopBackOff", "back-off 40s")), corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}),
			after: 5 * time.Minute, agentRunning: true, wantReason: v1alpha1.ReasonCrashLoop},
		{name: "an agent running is not pending", pod: pod("n", nil, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}),
			after: time.Hour, agentRunning: true},
		{name: "container creating waits for pendingTimeout", pod: pod("n", nil, waiting("ContainerCreating", "")),
			after: 9 * time.Minute, wantWait: time.Minute},
		{name: "container creating past pendingTimeout", pod: pod("node-1", nil, waiting("ContainerCreating", "")),
			after: 10 * time.Minute, wantReason: v1alpha1.ReasonPendingTimeout, wantIn: []string{"10m", `container "runner" waiting: ContainerCreating`}},
		{name: "unschedulable counts from the scheduler's word", pod: unschedulable,
			after: 10 * time.Minute, wantWait: time.Minute},
		{name: "unschedulable past pendingTimeout", pod: unschedulable,
			after: 11 * time.Minute, wantReason: v1alpha1.ReasonUnschedulable, wantIn: []string{"0/3 nodes are available"}},
		{name: "pull failure sooner than pendingTimeout sets the wait", pod: pod("n", nil, waiting("ErrImagePull", "not found")),
			after: 0, wantWait: 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := diagnose(tc.pod, rec, created.Add(tc.after), tc.agentRunning)
			if diff := cmp.Diff(tc.wantReason, v.reason); diff != "" {
				t.Errorf("reason (-want +got):\n%s\nmessage: %s", diff, v.message)
			}
			for _, want := range tc.wantIn {
				if !strings.Contains(v.message, want) {
					t.Errorf("message %q does not contain %q", v.message, want)
				}
			}
			if tc.wantReason == "" {
				if diff := cmp.Diff(tc.wantWait, v.wait); diff != "" {
					t.Errorf("wait (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestFailedInitContainer(t *testing.T) {
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "dind", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}, {Name: "setup"}}},
		Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "dind", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}},
			{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}},
		}},
	}
	got := failedInitContainer(pod)
	if got == nil || got.Name != "setup" {
		t.Fatalf("failedInitContainer = %+v, want setup (a sidecar's exit does not fail the pod)", got)
	}
}

// A pod read from a cache that is behind can show Pending after the runner was seen
// busy or idle: the runner keeps its phase (no status write telling its history
// backwards) and is looked at again shortly. A runner that never ran is Pending.
func TestStalePendingPodDoesNotTurnARunnerBack(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	stale := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "r", CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: v1alpha1.RunnerContainerName}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: v1alpha1.RunnerContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}},
	}
	r := &Reconciler{Clock: clocktesting.NewFakeClock(created.Add(5 * time.Second))}
	for _, tc := range []struct {
		name      string
		phase     v1alpha1.RunnerPhase
		hasJob    bool
		wantPhase v1alpha1.RunnerPhase
		wantAfter time.Duration
	}{
		{name: "busy", phase: v1alpha1.RunnerBusy, hasJob: true, wantPhase: v1alpha1.RunnerBusy, wantAfter: behindRecheck},
		{name: "idle", phase: v1alpha1.RunnerIdle, wantPhase: v1alpha1.RunnerIdle, wantAfter: behindRecheck},
		{name: "job seen, status not written yet", phase: v1alpha1.RunnerPending, hasJob: true, wantPhase: v1alpha1.RunnerPending, wantAfter: behindRecheck},
		{name: "never ran", phase: "", wantPhase: v1alpha1.RunnerPending, wantAfter: 10*time.Minute - 5*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{
				runner: &v1alpha1.Runner{Status: v1alpha1.RunnerStatus{Phase: tc.phase}},
				pool:   &v1alpha1.RunnerPool{},
				pod:    stale.DeepCopy(),
			}
			handled, res, done, err := r.checkStuck(context.Background(), s, tc.hasJob)
			if err != nil || !handled || done {
				t.Fatalf("checkStuck = handled %v, done %v, err %v; want handled, not done", handled, done, err)
			}
			if s.runner.Status.Phase != tc.wantPhase {
				t.Errorf("phase = %q, want %q", s.runner.Status.Phase, tc.wantPhase)
			}
			if res.RequeueAfter != tc.wantAfter {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.wantAfter)
			}
		})
	}
}
