package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// A pool with no labels of its own registers its runners as a config.sh runner on
// linux/amd64 is: self-hosted, linux, x64. The most common runs-on line,
// [self-hosted, linux, x64], runs there; [self-hosted, windows] and [self-hosted, arm64]
// get no runner, and the pod is pinned where its labels are true.
func TestDefaultLabelsRouteTheCommonRunsOn(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(testutil.RunnerPool(w.ns, "plain").URL(w.simURL + "/acme").Credentials("github-creds").MaxRunners(5).Obj())
	var jobs []simgithub.Job
	for _, labels := range [][]string{{"self-hosted", "windows"}, {"self-hosted", "ARM64"}, {"self-hosted", "linux", "x64"}} {
		j, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: labels, Duration: simgithub.Duration(50 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	windows, arm, linux := jobs[0], jobs[1], jobs[2]

	var rn v1alpha1.Runner
	w.eventually("a registered runner with a pod", func() (bool, error) {
		rs := w.runners("plain")
		if len(rs) != 1 || !w.hasPod(rs[0].Name) {
			return false, nil
		}
		rn = rs[0]
		return true, nil
	})
	pod, err := w.getPod(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	wantSel := map[string]string{v1alpha1.NodeLabelOS: "linux", v1alpha1.NodeLabelArch: "amd64"}
	if diff := cmp.Diff(wantSel, pod.Spec.NodeSelector); diff != "" {
		t.Errorf("runner pod nodeSelector (-want +got):\n%s", diff)
	}
	for _, gr := range w.sim.Runners() {
		if gr.Name == rn.Name && !hasLabels(gr.Labels, "self-hosted", "linux", "x64") {
			t.Errorf("GitHub runner %s registered labels %v, want self-hosted, linux and x64", gr.Name, gr.Labels)
		}
	}

	w.setPodRunning(rn.Name)
	got, err := w.agent(rn.Name).Run(w.ctx(), runnerapi.RunOptions{PollWait: 2 * time.Second})
	if err != nil {
		t.Fatalf("the runner agent: %v", err)
	}
	if got.ID != linux.ID {
		t.Errorf("the runner ran job %d, want the [self-hosted, linux, x64] job %d", got.ID, linux.ID)
	}
	w.setPodExited(rn.Name, 0)
	w.eventually("the linux job completed and its runner gone", func() (bool, error) {
		return jobStatus(w, linux.ID) == "completed" && len(w.runners("plain")) == 0, nil
	})

	// Resync runs every second in these tests: a few passes, and still nothing for the
	// windows and arm64 jobs.
	time.Sleep(3 * time.Second)
	if rs := w.runners("plain"); len(rs) != 0 {
		t.Errorf("%d runners for jobs the pool's runners could not take, want 0", len(rs))
	}
	if q := w.getPool("plain").Status.QueuedJobs; q != 0 {
		t.Errorf("pool queuedJobs = %d, want 0: neither job routes here", q)
	}
	for _, j := range []simgithub.Job{windows, arm} {
		if st := jobStatus(w, j.ID); st != "queued" {
			t.Errorf("job %d %v is %s, want queued", j.ID, j.Labels, st)
		}
	}
}

// A runner made for a queued job is not asked about on GitHub 5 s after its pod runs,
// as an idle runner is, but after half its registration timeout: it takes its job as
// soon as GitHub hands it over, and asking sooner would cost a status write (Idle) that
// the job's (Busy) follows. It is still known in time: asked once, and failed as
// RegistrationTimeout if it never came online.
func TestRunnerMadeForAQueuedJobIsAskedAboutLater(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const timeout = 16 * time.Second
	w.create(w.poolWithRecovery("queued", 0, v1alpha1.RecoverySpec{RegistrationTimeout: &metav1.Duration{Duration: timeout}}))
	if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"linux"}, Duration: simgithub.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	rn := w.newRunner("queued")
	w.setPodRunning(rn.Name)
	pod, err := w.getPod(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	since := pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time

	var asked time.Time
	w.eventuallyWithin(timeout+30*time.Second, "GitHub asked about the runner", func() (bool, error) {
		r, err := w.getRunner(rn.Name)
		if err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(r.Status.Conditions, runner.ConditionOnline); c != nil {
			asked = c.LastTransitionTime.Time
			return true, nil
		}
		return r.Status.Phase == v1alpha1.RunnerFailed, nil
	})
	// Condition times are whole seconds: half the timeout, less one for the rounding.
	if asked.Before(since.Add(timeout/2 - time.Second)) {
		t.Errorf("GitHub asked at %s, %s after the pod ran; want no sooner than half the registration timeout (%s) while a job is queued",
			asked, asked.Sub(since), timeout/2)
	}
	w.expectFailed("queued", rn.Name, v1alpha1.ReasonRegistrationTimeout, 1, "never came online on GitHub")
}

// A Runner whose pod runs stays Pending, its Online condition False, until the scope's
// runner list on GitHub shows it online; then it is Idle.
func TestRunnerIsPendingUntilGitHubListsItOnline(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(w.pool("warm").MinIdle(1).Obj())
	rn := w.newRunner("warm")
	w.sim.ResetCallCounts()
	w.setPodRunning(rn.Name)

	const listRunners = "GET /orgs/{org}/actions/runners"
	w.eventually("GitHub asked, and the runner Pending and not online", func() (bool, error) {
		r, err := w.getRunner(rn.Name)
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(r.Status.Conditions, runner.ConditionOnline)
		return w.sim.CallCounts()[listRunners].Total >= 1 && r.Status.Phase == v1alpha1.RunnerPending &&
			c != nil && c.Status == "False" && c.Reason == "WaitingForGitHub", nil
	})
	if st := w.getPool("warm").Status; st.IdleRunners != 0 || st.PendingRunners != 1 {
		t.Errorf("pool: %d idle, %d pending; want 0 and 1", st.IdleRunners, st.PendingRunners)
	}

	w.connect(rn.Name)
	w.eventually("the runner Idle and Online", func() (bool, error) {
		r, err := w.getRunner(rn.Name)
		if err != nil {
			return false, err
		}
		return r.Status.Phase == v1alpha1.RunnerIdle && meta.IsStatusConditionTrue(r.Status.Conditions, runner.ConditionOnline), nil
	})
	w.eventually("the pool counting it idle", func() (bool, error) {
		st := w.getPool("warm").Status
		return st.IdleRunners == 1 && st.PendingRunners == 0, nil
	})
	if n := w.sim.CallCounts()["GET /orgs/{org}/actions/runners/{runner_id}"].Total; n != 0 {
		t.Errorf("runners looked up one by one %d times, want 0", n)
	}
}

func hasLabels(have []string, want ...string) bool {
	for _, wl := range want {
		found := false
		for _, h := range have {
			found = found || strings.EqualFold(h, wl)
		}
		if !found {
			return false
		}
	}
	return true
}

func jobStatus(w *world, id int64) string {
	for _, j := range w.sim.Jobs() {
		if j.ID == id {
			return j.Status
		}
	}
	return ""
}

// A pool whose template names no architecture, whose pods can go only to arm64 nodes,
// registers its runners ARM64 and pins their pods to arm64: a [self-hosted, linux, ARM64]
// job runs there, and status.platform says the nodes chose it. The node is tainted and
// selected by this test's namespace, so that the pools of other tests do not see it.
func TestPoolOnArm64NodesRegistersARM64(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "arm64-" + w.ns, Labels: map[string]string{
		v1alpha1.NodeLabelOS: "linux", v1alpha1.NodeLabelArch: "arm64", "gantry.dev/test-pool": w.ns,
	}}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "gantry.dev/test-pool", Value: w.ns, Effect: corev1.TaintEffectNoSchedule}}}}
	w.create(node)
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), node) })
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := w.c.Status().Update(w.ctx(), node); err != nil {
		t.Fatal(err)
	}
	// The API server tainted the new node not-ready; the node lifecycle controller, which
	// envtest does not run, lifts that taint from a Ready node.
	node.Spec.Taints = node.Spec.Taints[:1]
	if err := w.c.Update(w.ctx(), node); err != nil {
		t.Fatal(err)
	}
	pool := testutil.RunnerPool(w.ns, "arm").URL(w.simURL + "/acme").Credentials("github-creds").Labels().MaxRunners(5).Obj()
	pool.Spec.Template.Spec.NodeSelector = map[string]string{"gantry.dev/test-pool": w.ns}
	pool.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gantry.dev/test-pool", Operator: corev1.TolerationOpEqual, Value: w.ns, Effect: corev1.TaintEffectNoSchedule}}
	w.create(pool)
	job, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"self-hosted", "linux", "ARM64"}, Duration: simgithub.Duration(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	var rn v1alpha1.Runner
	w.eventually("a registered runner with a pod", func() (bool, error) {
		rs := w.runners("arm")
		if len(rs) != 1 || !w.hasPod(rs[0].Name) {
			return false, nil
		}
		rn = rs[0]
		return true, nil
	})
	st := w.getPool("arm").Status.Platform
	if st == nil || st.Arch != "arm64" || st.OS != "linux" || st.Source != v1alpha1.PlatformFromNodes || !strings.Contains(st.Message, "linux/arm64") {
		t.Errorf("status.platform %+v, want linux/arm64 from the nodes", st)
	}
	pod, err := w.getPod(rn.Name)
	if err != nil {
		t.Fatal(err)
	}
	wantSel := map[string]string{v1alpha1.NodeLabelOS: "linux", v1alpha1.NodeLabelArch: "arm64", "gantry.dev/test-pool": w.ns}
	if diff := cmp.Diff(wantSel, pod.Spec.NodeSelector); diff != "" {
		t.Errorf("runner pod nodeSelector (-want +got):\n%s", diff)
	}
	for _, gr := range w.sim.Runners() {
		if gr.Name == rn.Name && (!hasLabels(gr.Labels, "self-hosted", "linux", "ARM64") || hasLabels(gr.Labels, "x64")) {
			t.Errorf("GitHub runner %s registered labels %v, want self-hosted, linux and ARM64, not x64", gr.Name, gr.Labels)
		}
	}
	w.setPodRunning(rn.Name)
	got, err := w.agent(rn.Name).Run(w.ctx(), runnerapi.RunOptions{PollWait: 2 * time.Second})
	if err != nil {
		t.Fatalf("the runner agent: %v", err)
	}
	if got.ID != job.ID {
		t.Errorf("the runner ran job %d, want the [self-hosted, linux, ARM64] job %d", got.ID, job.ID)
	}
}
