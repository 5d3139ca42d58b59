package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Recovery: every way a runner can fail ends in phase Failed with a reason a person can
// act on, a message, a Warning event and a count in gantry_runner_failures_total — and
// never before the pool's recovery timeout for it says so. The timeouts are set to
// seconds so the tests wait on real timers; "not yet" checks sleep to a moment the
// controller cannot have failed the runner by, then look.

const jitRoute = "POST /orgs/{org}/actions/runners/generate-jitconfig"

// An image that cannot be pulled fails the runner as ImagePullFailed once
// imagePullGracePeriod has passed since the pod was created — not earlier, though the
// kubelet reported ErrImagePull and then ImagePullBackOff long before.
func TestImagePullFailureFailsTheRunnerAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const grace = 3 * time.Second
	w.create(w.poolWithRecovery("pull", 1, v1alpha1.RecoverySpec{ImagePullGracePeriod: &metav1.Duration{Duration: grace}}))
	rn := w.newRunner("pull")
	pod, err := w.getPod(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	created := pod.CreationTimestamp.Time

	w.setPodWaiting(rn.Name, "ErrImagePull", `failed to pull image "ghcr.io/acme/runner:nope": not found`)
	sleepUntil(created.Add(grace / 3))
	w.setPodWaiting(rn.Name, "ImagePullBackOff", `Back-off pulling image "ghcr.io/acme/runner:nope"`)

	// A second before the grace period ends the runner is still waiting for its image.
	sleepUntil(created.Add(grace - time.Second))
	if got, err := w.getRunner(rn.Name); err != nil || !pending(got.Status.Phase) || got.Status.Reason != "" {
		t.Fatalf("within the grace period: runner %+v, %v; want Pending (or no phase yet) without a reason", got.Status, err)
	}

	failed := w.expectFailed("pull", rn.Name, v1alpha1.ReasonImagePullFailed, 1,
		`Back-off pulling image "ghcr.io/acme/runner:nope"`, grace.String())
	if at := failedAt(t, failed); at.Before(created.Add(grace)) {
		t.Errorf("failed at %s, before the grace period ended at %s", at, created.Add(grace))
	}
	w.expectPodGone(rn.Name)
}

// A pod the scheduler cannot place fails the runner as Unschedulable once it has been
// unschedulable for pendingTimeout, with the scheduler's explanation.
func TestUnschedulablePodFailsTheRunnerAfterPendingTimeout(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const timeout = 2 * time.Second
	w.create(w.poolWithRecovery("sched", 1, v1alpha1.RecoverySpec{PendingTimeout: &metav1.Duration{Duration: timeout}}))
	rn := w.newRunner("sched")

	w.updatePodStatus(rn.Name, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 3 Insufficient cpu.", LastTransitionTime: metav1.Now(),
		}}
	})
	pod, err := w.getPod(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	since := pod.Status.Conditions[0].LastTransitionTime.Time

	sleepUntil(since.Add(timeout - time.Second))
	if got, err := w.getRunner(rn.Name); err != nil || !pending(got.Status.Phase) {
		t.Fatalf("within pendingTimeout: runner %+v, %v; want Pending (or no phase yet)", got.Status, err)
	}

	failed := w.expectFailed("sched", rn.Name, v1alpha1.ReasonUnschedulable, 1, "0/3 nodes are available: 3 Insufficient cpu.", timeout.String(),
		"Gantry pinned the pod to kubernetes.io/arch=amd64")
	if at := failedAt(t, failed); at.Before(since.Add(timeout)) {
		t.Errorf("failed at %s, before pendingTimeout ended at %s", at, since.Add(timeout))
	}
	w.expectPodGone(rn.Name)
}

// An evicted pod fails its runner as Evicted, both when the kubelet evicts it for node
// pressure (phase Failed, reason Evicted) and when a drain evicts it through the
// Eviction API (a DisruptionTarget condition, and the pod terminating).
func TestEvictedPodFailsTheRunner(t *testing.T) {
	t.Parallel()
	w := newWorld(t)

	// The kubelet evicts the pod for memory pressure.
	w.create(w.pool("pressure").MinIdle(1).Obj())
	rn := w.newRunner("pressure")
	w.setPodRunning(rn.Name)
	const pressure = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 12Mi."
	w.updatePodStatus(rn.Name, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.Reason = "Evicted"
		p.Status.Message = pressure
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet",
			Message: pressure, LastTransitionTime: metav1.Now(),
		})
	})
	w.expectFailed("pressure", rn.Name, v1alpha1.ReasonEvicted, 1, "evicted before it ran a job", pressure)
	w.expectPodGone(rn.Name)

	// `kubectl drain` evicts a running pod through the Eviction API: the API server adds a
	// DisruptionTarget condition and deletes the pod gracefully, so it terminates. That
	// is an eviction, not a lost node: it is reported at once, though nodeLostTimeout is
	// short. No kubelet ever confirms the deletion here, so the pod is force-deleted
	// once nodeLostTimeout has passed after its grace period.
	w.create(w.poolWithRecovery("drain", 1, v1alpha1.RecoverySpec{NodeLostTimeout: &metav1.Duration{Duration: time.Second}}))
	rn = w.newRunner("drain")
	w.bindPod(rn.Name, "node-drained")
	w.setPodRunning(rn.Name)
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: w.ns, Name: rn.Name},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)},
	}
	if err := w.c.SubResource("eviction").Create(w.ctx(), &corev1.Pod{ObjectMeta: eviction.ObjectMeta}, eviction); err != nil {
		t.Fatalf("evicting pod %s: %v", rn.Name, err)
	}
	pod, err := w.getPod(rn.Name)
	if err != nil || pod.DeletionTimestamp.IsZero() {
		t.Fatalf("the evicted pod is not terminating (%v): the test does not test a drain", err)
	}
	w.expectFailed("drain", rn.Name, v1alpha1.ReasonEvicted, 1, "evicted before it ran a job", "Eviction API")
	w.expectPodGone(rn.Name)
	if got := runnerFailuresMetric(t, w.ns, "drain", v1alpha1.ReasonNodeLost); got != 0 {
		t.Errorf("the drained runner also counted as NodeLost (%v)", got)
	}
}

// A pod stuck terminating — its node is gone, so no kubelet confirms the deletion — is
// force-deleted nodeLostTimeout after its grace period ended, and the runner fails as
// NodeLost naming the node.
func TestPodStuckTerminatingIsForceDeletedAsNodeLost(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const timeout = 2 * time.Second
	w.create(w.poolWithRecovery("lost", 1, v1alpha1.RecoverySpec{NodeLostTimeout: &metav1.Duration{Duration: timeout}}))
	rn := w.newRunner("lost")
	w.bindPod(rn.Name, "node-lost")
	w.setPodRunning(rn.Name)

	// Bound and running, so the API server keeps it terminating until the kubelet — which
	// will never answer — says it is gone.
	pod, err := w.getPod(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.c.Delete(w.ctx(), pod, client.GracePeriodSeconds(1)); err != nil {
		t.Fatal(err)
	}
	if pod, err = w.getPod(rn.Name); err != nil || pod.DeletionTimestamp.IsZero() {
		t.Fatalf("the deleted pod is not terminating (%v): the test does not test a lost node", err)
	}
	deadline := pod.DeletionTimestamp.Add(timeout) // the grace period's end, plus nodeLostTimeout

	sleepUntil(deadline.Add(-time.Second))
	if got, err := w.getRunner(rn.Name); err != nil || got.Status.Phase == v1alpha1.RunnerFailed {
		t.Fatalf("within nodeLostTimeout: runner %+v, %v; want not Failed", got.Status, err)
	}
	if _, err := w.getPod(rn.Name); err != nil {
		t.Fatalf("within nodeLostTimeout the pod is gone: %v", err)
	}

	failed := w.expectFailed("lost", rn.Name, v1alpha1.ReasonNodeLost, 1, "node node-lost was lost", "force-deleted")
	if at := failedAt(t, failed); at.Before(deadline) {
		t.Errorf("failed at %s, before nodeLostTimeout ended at %s", at, deadline)
	}
	w.expectPodGone(rn.Name)
}

// A runner container that exits non-zero before taking a job fails the runner as
// ExitedWithoutJob, with the exit code.
func TestNonZeroExitWithoutAJobFailsTheRunner(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(w.pool("crash").MinIdle(1).Obj())
	rn := w.newRunner("crash")
	w.setPodRunning(rn.Name)
	w.setPodExited(rn.Name, 3)
	w.expectFailed("crash", rn.Name, v1alpha1.ReasonExitedWithoutJob, 1, "exited with code 3 before running a job")
	w.expectPodGone(rn.Name)
}

// A runner whose pod runs but whose agent never reaches GitHub fails as
// RegistrationTimeout after registrationTimeout; one whose agent came online does not.
// Each is asked about on GitHub once, not polled.
func TestRunnerThatNeverComesOnlineFailsAfterRegistrationTimeout(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const timeout = 2 * time.Second
	w.create(w.poolWithRecovery("offline", 2, v1alpha1.RecoverySpec{RegistrationTimeout: &metav1.Duration{Duration: timeout}}))
	online := w.newRunner("offline")
	silent := w.newRunner("offline", online.Name)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := w.agent(online.Name).Connect(ctx); err != nil {
		t.Fatal(err)
	}
	w.setPodRunning(online.Name)
	w.setPodRunning(silent.Name)
	pod, err := w.getPod(silent.Name)
	if err != nil {
		t.Fatal(err)
	}
	since := pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time

	sleepUntil(since.Add(timeout - time.Second))
	if got, err := w.getRunner(silent.Name); err != nil || !pending(got.Status.Phase) {
		t.Fatalf("within registrationTimeout: runner %+v, %v; want Pending (or no phase yet)", got.Status, err)
	}

	failed := w.expectFailed("offline", silent.Name, v1alpha1.ReasonRegistrationTimeout, 1, "never came online on GitHub", timeout.String())
	if at := failedAt(t, failed); at.Before(since.Add(timeout)) {
		t.Errorf("failed at %s, before registrationTimeout ended at %s", at, since.Add(timeout))
	}
	w.expectPodGone(silent.Name)
	w.eventually("the connected runner seen Online", func() (bool, error) {
		r, err := w.getRunner(online.Name)
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(r.Status.Conditions, runner.ConditionOnline), nil
	})

	const getRunner, listRunners = "GET /orgs/{org}/actions/runners/{runner_id}", "GET /orgs/{org}/actions/runners"
	time.Sleep(time.Second) // room for a poll that should not happen
	counts := w.sim.CallCounts()
	if got := counts[getRunner].Total; got != 0 {
		t.Errorf("%s called %d times, want 0: the scope's runner list serves every runner", getRunner, got)
	}
	if got := counts[listRunners].Total; got < 1 || got > 3 {
		t.Errorf("%s called %d times, want 1 to 3: shared by both runners, and once more at most for each one's deadline", listRunners, got)
	}
	if r, err := w.getRunner(online.Name); err != nil || r.Status.Phase != v1alpha1.RunnerIdle {
		t.Errorf("the connected runner: %+v, %v; want Idle", r.Status, err)
	}
}

// Runners that keep failing put their pool in backoff instead of churning pods: after
// three failures in a row the pool is Degraded with reason RunnerFailures, says why and
// for how long, and creates no runner during the backoff.
func TestRepeatedFailuresBackOffAndDegradeThePool(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(w.pool("churn").MinIdle(1).MaxRunners(5).Obj())
	var seen []string
	for i := range 3 {
		rn := w.newRunner("churn", seen...)
		seen = append(seen, rn.Name)
		w.setPodExited(rn.Name, 1)
		w.expectFailed("churn", rn.Name, v1alpha1.ReasonExitedWithoutJob, float64(i+1), "exited with code 1")
	}

	w.eventually("the pool Degraded with RunnerFailures", func() (bool, error) {
		c := meta.FindStatusCondition(w.getPool("churn").Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonRunnerFailures, nil
	})
	c := meta.FindStatusCondition(w.getPool("churn").Status.Conditions, v1alpha1.ConditionDegraded)
	for _, want := range []string{
		"3 runners failed in a row",
		"the last: ExitedWithoutJob: the runner container exited with code 1",
		"creating runners again in",
	} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Degraded message %q does not say %q", c.Message, want)
		}
	}

	// The backoff is 30s; for a few seconds of it, nothing new is created.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		rs := w.runners("churn")
		if len(rs) != 3 {
			w.dump()
			t.Fatalf("the pool has %d runners during its backoff, want the 3 failed ones", len(rs))
		}
		for _, r := range rs {
			if r.Status.Phase != v1alpha1.RunnerFailed {
				t.Fatalf("runner %s is %s during the backoff: the pool created it", r.Name, r.Status.Phase)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := w.getPool("churn").Status; st.FailedRunners != 3 || st.DesiredRunners != 1 {
		t.Errorf("pool status: failed %d desired %d, want 3 and 1", st.FailedRunners, st.DesiredRunners)
	}
}

// Failed runners do not count against maxRunners: a pool of at most one runner whose
// runner failed still gets a replacement.
func TestFailedRunnerDoesNotCountAgainstMaxRunners(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(w.pool("one").MinIdle(1).MaxRunners(1).Obj())
	rn := w.newRunner("one")
	w.setPodExited(rn.Name, 1)
	w.expectFailed("one", rn.Name, v1alpha1.ReasonExitedWithoutJob, 1)
	replacement := w.newRunner("one", rn.Name)
	w.eventually("the pool to count one failed and one live runner", func() (bool, error) {
		st := w.getPool("one").Status
		return st.FailedRunners == 1 && st.PendingRunners+st.IdleRunners == 1, nil
	})
	if rs := w.runners("one"); len(rs) != 2 {
		t.Errorf("the pool has %d runners, want the failed one and %s", len(rs), replacement.Name)
	}
}

// A restarted controller that lost its last status write (the Runner says nothing of
// its registration or its pod) creates no second pod or Secret and registers nothing
// again: it recovers the registration from the Runner's Secret and adopts the pod.
func TestRestartedControllerDoesNotDuplicateARunner(t *testing.T) {
	t.Parallel()
	w := newWorld(t).inNamespace() // a namespace only this test's managers watch
	first := startGantry(t, w.ns)
	w.create(w.pool("restart").MinIdle(1).Obj())
	rn := w.newRunner("restart")
	pod, err := w.getPod(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	jitCalls := w.sim.CallCounts()[jitRoute].Total
	if n := len(w.sim.Runners()); jitCalls != 1 || n != 1 {
		t.Fatalf("before the restart: %d JIT configurations, %d GitHub runners; want 1 and 1", jitCalls, n)
	}
	id := w.sim.Runners()[0].ID
	first.stop(t)

	// The status write is lost.
	stored, err := w.getRunner(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(stored.DeepCopy())
	stored.Status = v1alpha1.RunnerStatus{}
	if err := w.c.Status().Patch(w.ctx(), stored, patch); err != nil {
		t.Fatal(err)
	}

	startGantry(t, w.ns)
	w.connect(rn.Name)
	w.setPodRunning(rn.Name) // something for the new manager to act on
	w.eventually("the new manager to recover the runner and find it Idle", func() (bool, error) {
		r, err := w.getRunner(rn.Name)
		if err != nil {
			return false, err
		}
		return r.Status.Phase == v1alpha1.RunnerIdle, nil
	})
	time.Sleep(2 * time.Second) // a few pool and resync passes of the new manager

	got, err := w.getRunner(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.GitHubRunnerID != id || got.Status.PodName != rn.Name {
		t.Errorf("after the restart: GitHub runner %d, pod %q; want %d and %q", got.Status.GitHubRunnerID, got.Status.PodName, id, rn.Name)
	}
	if rs := w.runners("restart"); len(rs) != 1 {
		t.Errorf("%d Runners after the restart, want 1", len(rs))
	}
	sel := client.MatchingLabels{v1alpha1.LabelPool: "restart"}
	var pods corev1.PodList
	if err := w.c.List(w.ctx(), &pods, client.InNamespace(w.ns), sel); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].UID != pod.UID {
		t.Errorf("pods after the restart: %d (want the original %s)", len(pods.Items), pod.UID)
	}
	var secrets corev1.SecretList
	if err := w.c.List(w.ctx(), &secrets, client.InNamespace(w.ns), sel); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 {
		t.Errorf("%d runner Secrets after the restart, want 1", len(secrets.Items))
	}
	if rs := w.sim.Runners(); len(rs) != 1 || rs[0].ID != id {
		t.Errorf("GitHub runners after the restart: %+v, want only %d", rs, id)
	}
	if n := w.sim.CallCounts()[jitRoute].Total; n != jitCalls {
		t.Errorf("JIT configurations generated: %d after the restart, %d before", n, jitCalls)
	}
}

// Deleting a pool drains it: its idle runner is unregistered from GitHub and removed at
// once; its busy runner keeps its pod until its job completes; then the pool goes, and
// nothing of it is left in the cluster or on GitHub.
func TestDeletingAPoolDrainsIt(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(w.pool("drain").MinIdle(1).MaxRunners(5).Obj())
	idle := w.newRunner("drain")
	w.setPodRunning(idle.Name)
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	busy := w.newRunner("drain", idle.Name)
	w.setPodRunning(busy.Name)
	agent := w.agent(busy.Name)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := agent.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := agent.NextJob(ctx, 5*time.Second)
	if err != nil || got == nil || got.ID != job.ID {
		t.Fatalf("NextJob = %+v, %v; want job %d", got, err, job.ID)
	}
	if err := agent.StartJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	w.connect(idle.Name) // online once the job is taken, so it stays idle
	w.eventually("one runner Busy and one Idle", func() (bool, error) {
		b, err := w.getRunner(busy.Name)
		if err != nil {
			return false, err
		}
		i, err := w.getRunner(idle.Name)
		if err != nil {
			return false, err
		}
		return b.Status.Phase == v1alpha1.RunnerBusy && i.Status.Phase == v1alpha1.RunnerIdle, nil
	})

	if err := w.c.Delete(w.ctx(), w.getPool("drain")); err != nil {
		t.Fatal(err)
	}
	w.eventually("the idle runner removed from the cluster and GitHub", func() (bool, error) {
		for _, obj := range []client.Object{&v1alpha1.Runner{}, &corev1.Pod{}, &corev1.Secret{}} {
			if err := w.c.Get(w.ctx(), keyOf(w.ns, idle.Name), obj); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		rs := w.sim.Runners()
		return len(rs) == 1 && rs[0].Name == busy.Name, nil
	})
	if p := w.getPool("drain"); p.DeletionTimestamp.IsZero() {
		t.Fatal("the pool is not being deleted")
	}
	if r, err := w.getRunner(busy.Name); err != nil || !r.DeletionTimestamp.IsZero() || r.Status.Phase != v1alpha1.RunnerBusy {
		t.Fatalf("the busy runner during the drain: %v; want Busy and not deleted", err)
	}
	if p, err := w.getPod(busy.Name); err != nil || !p.DeletionTimestamp.IsZero() {
		t.Fatalf("the busy runner's pod was deleted during the drain: %v", err)
	}
	if rs := w.runners("drain"); len(rs) != 1 {
		t.Fatalf("%d runners during the drain, want only the busy one", len(rs))
	}

	// The job ends; the ephemeral runner leaves GitHub and its container exits 0.
	if err := agent.CompleteJob(ctx, job.ID, "success"); err != nil {
		t.Fatal(err)
	}
	w.setPodExited(busy.Name, 0)
	w.eventually("the pool gone", func() (bool, error) {
		err := w.c.Get(w.ctx(), keyOf(w.ns, "drain"), &v1alpha1.RunnerPool{})
		return apierrors.IsNotFound(err), nil
	})
	sel := client.MatchingLabels{v1alpha1.LabelPool: "drain"}
	for _, list := range []client.ObjectList{&v1alpha1.RunnerList{}, &corev1.PodList{}, &corev1.SecretList{}} {
		if err := w.c.List(w.ctx(), list, client.InNamespace(w.ns), sel); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(list); n != 0 {
			t.Errorf("%d %T left after the drain", n, list)
		}
	}
	if rs := w.sim.Runners(); len(rs) != 0 {
		t.Errorf("runners left on GitHub: %+v", rs)
	}
	if j, _ := w.sim.Job(job.ID); j.Status != "completed" {
		t.Errorf("job status on GitHub = %q, want completed", j.Status)
	}
}
