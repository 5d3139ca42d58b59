package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/demand"
)

// unwrittenWorld is a Reconciler on a fake API server holding one pool and one Runner
// with nothing in its status, as the pool creates it.
func unwrittenWorld(t *testing.T, objs ...ctrl.Object) (*Reconciler, ctrl.Client, *v1alpha1.RunnerPool, *v1alpha1.Runner) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux"}}
	pool.Spec.Template.Spec.Containers = []corev1.Container{{Name: v1alpha1.RunnerContainerName, Image: "runner"}}
	rn := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-bcdfg", UID: "u1",
		Finalizers: []string{v1alpha1.Finalizer}}, Spec: v1alpha1.RunnerSpec{PoolName: "linux"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.Runner{}).
		WithObjects(append([]ctrl.Object{pool, rn}, objs...)...).Build()
	stored := &v1alpha1.Runner{}
	if err := c.Get(context.Background(), runnerKey(rn), stored); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(metav1.Now().Time)
	r := &Reconciler{Client: c, APIReader: c, Births: &controller.RunnerBirths{},
		Failures: &controller.FailureBackoff{Clock: clk, Threshold: 3}, Events: events.NewFakeRecorder(10), Clock: clk}
	return r, c, pool, stored
}

func (r *Reconciler) scopeOf(t *testing.T, c ctrl.Client, pool *v1alpha1.RunnerPool, name string) *scope {
	t.Helper()
	rn := &v1alpha1.Runner{}
	if err := c.Get(context.Background(), ctrl.ObjectKey{Namespace: "ci", Name: name}, rn); err != nil {
		t.Fatal(err)
	}
	s := &scope{runner: rn, pool: pool, before: rn.DeepCopy()}
	r.recall(s)
	return s
}

// registeredWithPod is unwrittenWorld's Runner registered (GitHub runner 42) and given
// its pod by this process, in the scope of that reconcile.
func registeredWithPod(t *testing.T) (*Reconciler, ctrl.Client, *v1alpha1.RunnerPool, *v1alpha1.Runner, *scope) {
	t.Helper()
	r, c, pool, rn := unwrittenWorld(t)
	s := &scope{runner: rn, pool: pool, before: rn.DeepCopy()}
	r.setRegistered(s, 42, false)
	if _, _, err := r.ensurePod(context.Background(), s); err != nil {
		t.Fatalf("ensurePod: %v", err)
	}
	return r, c, pool, rn, s
}

// A runner's registration and pod cost no status write of their own: they are written
// with the next write the runner makes anyway (here Busy), and until then a reconcile
// sees them as if written.
func TestRegistrationAndPodAreWrittenWithTheNextStatusWrite(t *testing.T) {
	ctx := context.Background()
	r, c, pool, rn, s := registeredWithPod(t)
	if later, err := r.writeStatus(ctx, s); err != nil || later != firstWriteWait {
		t.Fatalf("writeStatus: wait %s, %v; want the write put off by %s", later, err, firstWriteWait)
	}
	stored := &v1alpha1.Runner{}
	if err := c.Get(ctx, runnerKey(rn), stored); err != nil {
		t.Fatal(err)
	}
	if stored.ResourceVersion != rn.ResourceVersion || stored.Status.PodName != "" || stored.Status.RegisteredAt != nil {
		t.Fatalf("the registration and pod alone were written: stored status %+v", stored.Status)
	}

	next := r.scopeOf(t, c, pool, rn.Name)
	if st := next.runner.Status; st.GitHubRunnerID != 42 || st.PodName != rn.Name || st.Phase != v1alpha1.RunnerPending || st.TemplateHash == "" {
		t.Fatalf("the next reconcile sees %+v; want the registration, the pod and Pending", st)
	}
	if _, done, err := r.register(ctx, next); err != nil || !done {
		t.Fatalf("register on a remembered registration: done %v, %v", done, err)
	}
	// GitHub's word of the job, before the cache shows the pod running: it waits for
	// the write the pod's start brings.
	next.runner.Status.Job = &v1alpha1.RunnerJob{ID: 7, RunID: 3, Repository: "acme/api"}
	if later, err := r.writeStatus(ctx, next); err != nil || later <= 0 {
		t.Fatalf("writeStatus with the job alone: wait %s, %v; want it put off", later, err)
	}
	next.runner.Status.Phase = v1alpha1.RunnerBusy
	if later, err := r.writeStatus(ctx, next); err != nil || later != 0 {
		t.Fatalf("writeStatus with Busy: wait %s, %v; want it written now", later, err)
	}
	if err := c.Get(ctx, runnerKey(rn), stored); err != nil {
		t.Fatal(err)
	}
	if st := stored.Status; st.Phase != v1alpha1.RunnerBusy || st.GitHubRunnerID != 42 || st.PodName != rn.Name || st.RegisteredAt == nil || st.TemplateHash == "" || st.Job == nil || st.Job.ID != 7 {
		t.Fatalf("the Busy write stored %+v; want Busy with the registration, the pod and the job", st)
	}
	r.scopeOf(t, c, pool, rn.Name)
	if r.unwritten.get(rn) != nil {
		t.Error("still remembered after the stored status showed it all")
	}
}

// While its pool is in a burst (burstQueued jobs or more waiting), a new runner's Busy
// waits with its registration and pod: one write once fewer jobs wait (or
// firstWriteQueuedWait after they were made), and meanwhile every reconcile sees the job
// (recallJob). With a few jobs waiting, as steady arrivals keep, it is written at once.
func TestBusyWaitsWhileItsPoolIsInABurst(t *testing.T) {
	ctx := context.Background()
	r, c, pool, rn, s := registeredWithPod(t)
	r.Tracker = demand.NewTracker(demand.NewRouter(), r.Clock)
	r.Tracker.Router().SetPool(demand.Pool{Key: ctrl.ObjectKeyFromObject(pool), Kind: demand.ScopeOrganization,
		Host: "github.com", Owner: "acme", Labels: []string{"self-hosted", "linux"}})
	job := func(id int64) demand.Job {
		return demand.Job{ID: id, RunID: 3, Host: "github.com", Owner: "acme", Repo: "api", Labels: []string{"self-hosted", "linux"}}
	}
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionQueued, Job: job(7)})
	for id := range int64(burstQueued) {
		r.Tracker.Observe(demand.JobEvent{Action: demand.ActionQueued, Job: job(100 + id)}) // still wait for runners
	}
	if later, err := r.writeStatus(ctx, s); err != nil || later != queuedRecheck {
		t.Fatalf("writeStatus: wait %s, %v; want the write put off, looked at again in %s", later, err, queuedRecheck)
	}
	taken := job(7)
	taken.RunnerName = rn.Name
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: taken})

	busy := func() *scope {
		t.Helper()
		next := r.scopeOf(t, c, pool, rn.Name)
		r.recallJob(next)
		if j := next.runner.Status.Job; j == nil || j.ID != 7 {
			t.Fatalf("the reconcile's status has job %+v; want the Tracker's job 7", j)
		}
		next.runner.Status.Phase = v1alpha1.RunnerBusy
		setOnline(next, "the runner took a job")
		return next
	}
	stored := &v1alpha1.Runner{}
	if later, err := r.writeStatus(ctx, busy()); err != nil || later != queuedRecheck {
		t.Fatalf("writeStatus with Busy while %d jobs wait: wait %s, %v; want it put off", burstQueued, later, err)
	}
	if err := c.Get(ctx, runnerKey(rn), stored); err != nil {
		t.Fatal(err)
	}
	if stored.ResourceVersion != rn.ResourceVersion {
		t.Fatalf("written while jobs wait: stored status %+v", stored.Status)
	}

	other := job(100)
	other.RunnerName = "linux-other"
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: other}) // the burst is over: 63 wait
	if later, err := r.writeStatus(ctx, busy()); err != nil || later != 0 {
		t.Fatalf("writeStatus with Busy, %d jobs waiting: wait %s, %v; want it written now", burstQueued-1, later, err)
	}
	if err := c.Get(ctx, runnerKey(rn), stored); err != nil {
		t.Fatal(err)
	}
	st := stored.Status
	if st.Phase != v1alpha1.RunnerBusy || st.Job == nil || st.Job.ID != 7 || st.GitHubRunnerID != 42 || st.PodName != rn.Name ||
		!meta.IsStatusConditionTrue(st.Conditions, ConditionOnline) {
		t.Errorf("stored status %+v; want one write of Busy, job 7, online, with the registration and the pod", st)
	}
}

// A scale-set pool's jobs are not held in the Tracker: the pool's status.queuedJobs says
// it is in a burst, and a new runner's Busy waits, looked at again every queuedRecheck.
func TestBusyWaitsWhileAScaleSetPoolIsInABurst(t *testing.T) {
	ctx := context.Background()
	r, c, pool, rn, s := registeredWithPod(t)
	r.Tracker = demand.NewTracker(demand.NewRouter(), r.Clock)
	pool.Status.QueuedJobs = burstQueued
	taken := demand.Job{ID: 7, RunID: 3, Owner: "acme", Repo: "api", RunnerName: rn.Name}
	r.Tracker.Observe(demand.JobEvent{Action: demand.ActionInProgress, Job: taken})
	r.recallJob(s)
	s.runner.Status.Phase = v1alpha1.RunnerBusy
	setOnline(s, "the runner took a job")
	if later, err := r.writeStatus(ctx, s); err != nil || later != queuedRecheck {
		t.Fatalf("writeStatus with Busy, status.queuedJobs %d: wait %s, %v; want it put off, looked at again in %s", burstQueued, later, err, queuedRecheck)
	}
	pool.Status.QueuedJobs = burstQueued - 1
	if later, err := r.writeStatus(ctx, s); err != nil || later != 0 {
		t.Fatalf("writeStatus with Busy, status.queuedJobs %d: wait %s, %v; want it written now", burstQueued-1, later, err)
	}
	stored := &v1alpha1.Runner{}
	if err := c.Get(ctx, runnerKey(rn), stored); err != nil {
		t.Fatal(err)
	}
	if st := stored.Status; st.Phase != v1alpha1.RunnerBusy || st.Job == nil || st.Job.ID != 7 {
		t.Errorf("stored status %+v; want Busy with job 7", st)
	}
}

// A runner that takes no job has its registration and pod written firstWriteWait after
// they were made: its status shows it registered within seconds.
func TestRegistrationIsWrittenAfterFirstWriteWait(t *testing.T) {
	ctx := context.Background()
	r, c, pool, rn, s := registeredWithPod(t)
	if later, err := r.writeStatus(ctx, s); err != nil || later <= 0 {
		t.Fatalf("writeStatus: wait %s, %v; want the write put off", later, err)
	}
	r.Clock.(*clocktesting.FakeClock).Step(firstWriteWait)
	again := r.scopeOf(t, c, pool, rn.Name)
	if later, err := r.writeStatus(ctx, again); err != nil || later != 0 {
		t.Fatalf("writeStatus after %s: wait %s, %v; want it written", firstWriteWait, later, err)
	}
	stored := &v1alpha1.Runner{}
	if err := c.Get(ctx, runnerKey(rn), stored); err != nil {
		t.Fatal(err)
	}
	if st := stored.Status; st.Phase != v1alpha1.RunnerPending || st.GitHubRunnerID != 42 || st.PodName != rn.Name {
		t.Errorf("stored status %+v; want Pending with the registration and the pod", st)
	}
}

// After a restart (nothing remembered) a registration is read back from the runner's
// Secret. Its pod, if there, is taken up with the template hash it was made from; if
// not there, the runner fails: the earlier process may have made and lost that pod, and
// a second one is never made.
func TestRestartedControllerNeverMakesASecondPod(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-bcdfg",
		Annotations: map[string]string{annotationRunnerID: "7"}}, Data: map[string][]byte{JITConfigKey: []byte("x")}}

	t.Run("pod there", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-bcdfg",
			Annotations: map[string]string{annotationTemplateHash: "0123456789abcdef"}}}
		r, c, pool, rn := unwrittenWorld(t, secret.DeepCopy(), pod)
		s := r.scopeOf(t, c, pool, rn.Name)
		if _, done, err := r.register(ctx, s); err != nil || !done || s.runner.Status.GitHubRunnerID != 7 {
			t.Fatalf("register: done %v, id %d, %v; want the Secret's 7", done, s.runner.Status.GitHubRunnerID, err)
		}
		if _, done, err := r.ensurePod(ctx, s); err != nil || !done {
			t.Fatalf("ensurePod: done %v, %v", done, err)
		}
		if st := s.runner.Status; st.PodName != pod.Name || st.TemplateHash != "0123456789abcdef" || st.Phase == v1alpha1.RunnerFailed {
			t.Errorf("status %+v; want the pod and its template hash", st)
		}
	})
	t.Run("pod gone", func(t *testing.T) {
		r, c, pool, rn := unwrittenWorld(t, secret.DeepCopy())
		s := r.scopeOf(t, c, pool, rn.Name)
		if _, done, err := r.register(ctx, s); err != nil || !done {
			t.Fatalf("register: done %v, %v", done, err)
		}
		if _, _, err := r.ensurePod(ctx, s); err != nil {
			t.Fatalf("ensurePod: %v", err)
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods); err != nil || len(pods.Items) != 0 {
			t.Fatalf("pods %d (%v); want none made", len(pods.Items), err)
		}
		if st := s.runner.Status; st.Phase != v1alpha1.RunnerFailed || st.Reason != v1alpha1.ReasonPodDeleted || !strings.Contains(st.Message, "restarted") || st.GitHubRunnerID != 7 {
			t.Errorf("status %+v; want Failed, PodDeleted, saying why, with the registration to remove", st)
		}
	})
	t.Run("made by this process", func(t *testing.T) {
		r, c, pool, rn := unwrittenWorld(t, secret.DeepCopy())
		r.Births.Born(runnerKey(rn))
		s := r.scopeOf(t, c, pool, rn.Name)
		if found, err := r.recoverRegistration(ctx, s); err != nil || !found {
			t.Fatalf("recoverRegistration: %v, %v", found, err)
		}
		if _, _, err := r.ensurePod(ctx, s); err != nil {
			t.Fatalf("ensurePod: %v", err)
		}
		if st := s.runner.Status; st.PodName != rn.Name || st.Phase == v1alpha1.RunnerFailed {
			t.Errorf("status %+v; want its pod made: no other process can have made one", st)
		}
	})
}

// A scale-set pool's jobs are not held in the Tracker: its status.queuedJobs says that
// jobs wait, for which its runners were made. While it does, a new runner neither asks
// GitHub whether it is online after onlineFirstCheck nor writes its registration and pod
// after firstWriteWait: both wait for the job the runner is about to take, looked at
// again every queuedRecheck, so that one status write records the runner's whole start.
// A webhook pool's count comes from the Tracker, fresher than its status.
func TestQueuedJobsOfAScaleSetPoolPutOffTheFirstWrite(t *testing.T) {
	for _, tt := range []struct {
		name         string
		source       v1alpha1.DemandSource
		statusQueued int32
		// wantWrite: the registration and pod are written once firstWriteWait passed;
		// wantOnlineWait: checkOnline's wait once onlineFirstCheck passed (0: it asks).
		wantWrite      bool
		wantOnlineWait time.Duration
	}{
		{"scale set, jobs waiting", v1alpha1.DemandSourceScaleSet, 10, false, queuedRecheck},
		{"scale set, none waiting", v1alpha1.DemandSourceScaleSet, 0, true, 0},
		{"webhook, the Tracker empty", v1alpha1.DemandSourceWebhook, 10, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			r, c, pool, rn, s := registeredWithPod(t)
			r.Tracker = demand.NewTracker(demand.NewRouter(), r.Clock)
			pool.Spec.Demand.Source = tt.source
			pool.Status.QueuedJobs = tt.statusQueued
			if later, err := r.writeStatus(ctx, s); err != nil || later <= 0 {
				t.Fatalf("writeStatus: wait %s, %v; want the write put off", later, err)
			}
			clk := r.Clock.(*clocktesting.FakeClock)
			podRunning := clk.Now()
			clk.Step(firstWriteWait)
			if tt.wantOnlineWait > 0 {
				res, done, err := r.checkOnline(ctx, r.scopeOf(t, c, pool, rn.Name), podRunning.Add(firstWriteWait-onlineFirstCheck))
				if err != nil || done || res.RequeueAfter != tt.wantOnlineWait {
					t.Errorf("checkOnline %s after the pod ran: requeue %s, done %v, %v; want a wait of %s", onlineFirstCheck, res.RequeueAfter, done, err, tt.wantOnlineWait)
				}
			}
			if later, err := r.writeStatus(ctx, r.scopeOf(t, c, pool, rn.Name)); err != nil || (later == 0) != tt.wantWrite {
				t.Fatalf("writeStatus after %s: wait %s, %v; want written %v", firstWriteWait, later, err, tt.wantWrite)
			}
			stored := &v1alpha1.Runner{}
			if err := c.Get(ctx, runnerKey(rn), stored); err != nil {
				t.Fatal(err)
			}
			if written := stored.Status.PodName != ""; written != tt.wantWrite {
				t.Errorf("stored status %+v; want the registration and pod written: %v", stored.Status, tt.wantWrite)
			}
		})
	}
}
