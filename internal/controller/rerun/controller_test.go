package rerun

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	gantrycontroller "github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/github"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// fakeRuns is GitHub's side of one run: its attempts and jobs, with GitHub's rules for
// a re-run (403 while in progress, a new attempt with new job ids). It records every
// call; nextErr fails the next call of a kind.
type fakeRuns struct {
	github.Client
	mu      sync.Mutex
	run     github.WorkflowRun
	jobs    []github.WorkflowJob
	calls   []string
	nextErr map[string]error
	nextID  int64
}

func (f *fakeRuns) call(kind string) error {
	f.calls = append(f.calls, kind)
	if err := f.nextErr[kind]; err != nil {
		delete(f.nextErr, kind)
		return err
	}
	return nil
}

func (f *fakeRuns) GetWorkflowRun(context.Context, github.Scope, int64) (github.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.run, f.call("get_run")
}

func (f *fakeRuns) ListWorkflowRunJobs(context.Context, github.Scope, int64) ([]github.WorkflowJob, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]github.WorkflowJob(nil), f.jobs...), f.call("list_jobs")
}

// rerun plays a re-run: names' latest executions run again in attempt n+1.
func (f *fakeRuns) rerun(kind string, names ...string) error {
	if err := f.call(kind); err != nil {
		return err
	}
	if !f.run.Completed() {
		return github.NewRunInProgressError("already running", nil)
	}
	f.run.RunAttempt++
	f.run.Status = "queued"
	for _, n := range names {
		f.nextID++
		f.jobs = append(f.jobs, github.WorkflowJob{ID: f.nextID, RunID: f.run.ID, RunAttempt: f.run.RunAttempt, Name: n, Status: "queued"})
	}
	return nil
}

func (f *fakeRuns) RerunJob(_ context.Context, _ github.Scope, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.ID == id {
			return f.rerun("rerun_job", j.Name)
		}
	}
	return f.rerun("rerun_job")
}

func (f *fakeRuns) RerunFailedJobs(context.Context, github.Scope, int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, j := range latest(f.jobs) {
		if j.Conclusion == "failure" || j.Conclusion == conclusionCancelled || j.Conclusion == "timed_out" {
			names = append(names, j.Name)
		}
	}
	return f.rerun("rerun_failed_jobs", names...)
}

// complete ends the run's latest attempt, each job of it with the conclusion given
// (success when not named).
func (f *fakeRuns) complete(conclusions map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.run.Status = "completed"
	for i := range f.jobs {
		if f.jobs[i].RunAttempt == f.run.RunAttempt {
			f.jobs[i].Status, f.jobs[i].Conclusion = "completed", "success"
			if c, ok := conclusions[f.jobs[i].Name]; ok {
				f.jobs[i].Conclusion = c
			}
		}
	}
}

func (f *fakeRuns) gotCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// rig is a Reconciler on a fake API server and a fake GitHub, its clock at the kill.
type rig struct {
	t      *testing.T
	c      client.Client
	gh     *fakeRuns
	clk    *clocktesting.FakeClock
	events *events.FakeRecorder
	r      *Reconciler
}

var killTime = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newRig(t *testing.T, pool *v1alpha1.RunnerPool, runners ...*v1alpha1.Runner) *rig {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "creds"}, Data: map[string][]byte{"github_token": []byte("ghp_x")}}
	objs := []client.Object{secret}
	if pool != nil {
		objs = append(objs, pool)
	}
	for _, rn := range runners {
		objs = append(objs, rn)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.Runner{}).
		WithIndex(&v1alpha1.Runner{}, indexRun, func(o client.Object) []string {
			rn := o.(*v1alpha1.Runner)
			if !rn.Status.Rerun.Pending() || rn.Status.Job == nil {
				return nil
			}
			return []string{runIndexKey(rn.Status.Job.Repository, rn.Status.Job.RunID)}
		}).Build()
	gh := &fakeRuns{run: github.WorkflowRun{ID: 7, RunAttempt: 1, Status: "in_progress"}, nextErr: map[string]error{}, nextID: 100}
	clk := clocktesting.NewFakeClock(killTime)
	rg := &rig{t: t, c: c, gh: gh, clk: clk, events: events.NewFakeRecorder(100)}
	rg.r = rg.newReconciler()
	return rg
}

// newReconciler is a fresh process's reconciler: nothing remembered.
func (rg *rig) newReconciler() *Reconciler {
	return &Reconciler{
		Client: rg.c,
		GitHub: &gantrycontroller.GitHubResolver{
			Reader:    rg.c,
			Provider:  github.NewProvider(github.ProviderOptions{NewClient: func(github.Credentials, github.Options) (github.Client, error) { return rg.gh, nil }}),
			Clock:     rg.clk,
			SecretTTL: time.Minute,
		},
		Events: rg.events,
		Clock:  rg.clk,
	}
}

func (rg *rig) reconcile(name string) reconcile.Result {
	rg.t.Helper()
	res, err := rg.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ci", Name: name}})
	if err != nil {
		rg.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

func (rg *rig) record(name string) v1alpha1.RunnerRerun {
	rg.t.Helper()
	rn := &v1alpha1.Runner{}
	if err := rg.c.Get(context.Background(), types.NamespacedName{Namespace: "ci", Name: name}, rn); err != nil {
		rg.t.Fatal(err)
	}
	if rn.Status.Rerun == nil {
		rg.t.Fatalf("runner %s has no rerun record", name)
	}
	return *rn.Status.Rerun
}

func killedRunner(name string, jobID int64) *v1alpha1.Runner {
	return &v1alpha1.Runner{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{v1alpha1.LabelPool: "linux"}},
		Spec:       v1alpha1.RunnerSpec{PoolName: "linux"},
		Status: v1alpha1.RunnerStatus{
			Phase: v1alpha1.RunnerFailed, Reason: v1alpha1.ReasonNodeDeleted, GitHubRunnerName: name,
			Job:   &v1alpha1.RunnerJob{ID: jobID, RunID: 7, Repository: "acme/api"},
			Rerun: &v1alpha1.RunnerRerun{State: v1alpha1.RerunWaiting},
			Conditions: []metav1.Condition{{Type: conditionFailed, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonNodeDeleted,
				LastTransitionTime: metav1.NewTime(killTime)}},
		},
	}
}

func rerunPool() *v1alpha1.RunnerPool {
	return testutil.RunnerPool("ci", "linux").URL("https://github.com/acme").Credentials("creds").
		Rerun(v1alpha1.RerunInfrastructureFailures).Obj()
}

// A killed job waits for its run, read less often as the wait grows, then is re-run
// once; a restarted controller finds it running again and makes no second call.
func TestKilledJobIsRerunOnceAfterItsRunCompletes(t *testing.T) {
	rg := newRig(t, rerunPool(), killedRunner("linux-aaaaa", 11))
	rg.gh.jobs = []github.WorkflowJob{
		{ID: 11, RunID: 7, RunAttempt: 1, Name: "build", Status: "in_progress", RunnerName: "linux-aaaaa"},
		{ID: 12, RunID: 7, RunAttempt: 1, Name: "lint", Status: "in_progress", RunnerName: "linux-bbbbb"},
	}
	if res := rg.reconcile("linux-aaaaa"); res.RequeueAfter != minPoll {
		t.Errorf("first look: requeue after %s, want %s", res.RequeueAfter, minPoll)
	}
	// Five seconds later nothing is asked: the run was read less than 10 s ago.
	rg.clk.Step(5 * time.Second)
	rg.reconcile("linux-aaaaa")
	// Ten minutes after the kill the run is read every 2 minutes.
	rg.clk.Step(10 * time.Minute)
	if res := rg.reconcile("linux-aaaaa"); res.RequeueAfter != maxPoll {
		t.Errorf("ten minutes in: requeue after %s, want %s", res.RequeueAfter, maxPoll)
	}
	// GitHub fails the killed job (its lease ran out); the run completes.
	rg.gh.complete(map[string]string{"build": "failure"})
	rg.clk.Step(maxPoll)
	rg.reconcile("linux-aaaaa")
	if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunDone || got.Attempt != 2 {
		t.Errorf("record = %+v, want Done in attempt 2", got)
	}
	want := []string{"get_run", "get_run", "get_run", "list_jobs", "rerun_job"}
	if diff := cmp.Diff(want, rg.gh.gotCalls()); diff != "" {
		t.Errorf("GitHub calls (-want +got):\n%s", diff)
	}
	if ev := <-rg.events.Events; ev != "Normal JobRerun runner linux-aaaaa's killed job: re-ran job \"build\" (11) in attempt 2 of workflow run 7" {
		t.Errorf("event %q", ev)
	}

	// A new leader whose cache shows the record Waiting (the Done write lost with the
	// old leader): it reads the run, finds the job running again, and makes no call.
	rn := killedRunner("linux-aaaaa", 11)
	stale := &v1alpha1.Runner{}
	if err := rg.c.Get(context.Background(), client.ObjectKeyFromObject(rn), stale); err != nil {
		t.Fatal(err)
	}
	stale.Status.Rerun = &v1alpha1.RunnerRerun{State: v1alpha1.RerunWaiting}
	if err := rg.c.Status().Update(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	rg.r = rg.newReconciler()
	rg.gh.complete(nil) // the re-run attempt completed too
	rg.reconcile("linux-aaaaa")
	if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunDone || got.Attempt != 2 {
		t.Errorf("after the takeover: record = %+v, want Done (attempt 2)", got)
	}
	if got := rg.gh.gotCalls(); got[len(got)-1] != "list_jobs" || len(got) != 7 {
		t.Errorf("after the takeover the calls were %v: want one read of the run and its jobs, no re-run", got)
	}
}

// Several killed jobs of one run, and no job failed on its own: one rerun-failed-jobs
// for all, each record Done.
func TestKilledJobsOfOneRunAreRerunTogether(t *testing.T) {
	rg := newRig(t, rerunPool(), killedRunner("linux-aaaaa", 11), killedRunner("linux-bbbbb", 0))
	rg.gh.run = github.WorkflowRun{ID: 7, RunAttempt: 1, Status: "completed", Conclusion: "failure"}
	rg.gh.jobs = []github.WorkflowJob{
		{ID: 11, RunID: 7, RunAttempt: 1, Name: "build", Status: "completed", Conclusion: "failure", RunnerName: "linux-aaaaa"},
		{ID: 12, RunID: 7, RunAttempt: 1, Name: "test", Status: "completed", Conclusion: "failure", RunnerName: "linux-bbbbb"},
		{ID: 13, RunID: 7, RunAttempt: 1, Name: "lint", Status: "completed", Conclusion: "success", RunnerName: "linux-ccccc"},
	}
	rg.reconcile("linux-aaaaa")
	rg.reconcile("linux-bbbbb")
	for _, name := range []string{"linux-aaaaa", "linux-bbbbb"} {
		if got := rg.record(name); got.State != v1alpha1.RerunDone || got.Attempt != 2 {
			t.Errorf("%s: record = %+v, want Done in attempt 2", name, got)
		}
	}
	if diff := cmp.Diff([]string{"get_run", "list_jobs", "rerun_failed_jobs"}, rg.gh.gotCalls()); diff != "" {
		t.Errorf("GitHub calls (-want +got):\n%s", diff)
	}
}

// GitHub's refusals: no Actions write is said on the pool and tried again; a job that
// did not fail, a pool that is gone, a run that never completes end the record.
func TestRerunRefusalsAndEnds(t *testing.T) {
	completedFailed := func(rg *rig) {
		rg.gh.run = github.WorkflowRun{ID: 7, RunAttempt: 1, Status: "completed"}
		rg.gh.jobs = []github.WorkflowJob{{ID: 11, RunID: 7, RunAttempt: 1, Name: "build", Status: "completed", Conclusion: "failure", RunnerName: "linux-aaaaa"}}
	}
	t.Run("no Actions write", func(t *testing.T) {
		rg := newRig(t, rerunPool(), killedRunner("linux-aaaaa", 11))
		completedFailed(rg)
		rg.gh.nextErr["rerun_job"] = github.NewUnauthorizedError("Resource not accessible by integration", nil)
		if res := rg.reconcile("linux-aaaaa"); res.RequeueAfter != maxPoll {
			t.Errorf("requeue after %s, want %s", res.RequeueAfter, maxPoll)
		}
		if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunWaiting {
			t.Errorf("record = %+v, want still Waiting", got)
		}
		if ev := <-rg.events.Events; !strings.Contains(ev, "Warning RerunNotPermitted") || !strings.Contains(ev, "actions: write") {
			t.Errorf("event %q", ev)
		}
		rg.clk.Step(maxPoll)
		rg.reconcile("linux-aaaaa")
		if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunDone {
			t.Errorf("once permitted: record = %+v, want Done", got)
		}
	})
	t.Run("the job finished after all", func(t *testing.T) {
		rg := newRig(t, rerunPool(), killedRunner("linux-aaaaa", 11))
		completedFailed(rg)
		rg.gh.jobs[0].Conclusion = "success"
		rg.reconcile("linux-aaaaa")
		if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunSkipped {
			t.Errorf("record = %+v, want Skipped", got)
		}
		for _, c := range rg.gh.gotCalls() {
			if c == "rerun_job" || c == "rerun_failed_jobs" {
				t.Errorf("re-ran a job that did not fail: %v", rg.gh.gotCalls())
			}
		}
	})
	t.Run("the pool is gone", func(t *testing.T) {
		rg := newRig(t, nil, killedRunner("linux-aaaaa", 11))
		rg.reconcile("linux-aaaaa")
		if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunSkipped || len(rg.gh.gotCalls()) != 0 {
			t.Errorf("record = %+v, calls %v: want Skipped with no call", got, rg.gh.gotCalls())
		}
	})
	t.Run("the pool no longer re-runs", func(t *testing.T) {
		pool := rerunPool()
		pool.Spec.Disruption.Rerun = v1alpha1.RerunNever
		rg := newRig(t, pool, killedRunner("linux-aaaaa", 11))
		completedFailed(rg)
		rg.reconcile("linux-aaaaa")
		if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunSkipped || len(rg.gh.gotCalls()) != 0 {
			t.Errorf("record = %+v, calls %v: want Skipped with no call", got, rg.gh.gotCalls())
		}
	})
	t.Run("the run never completes", func(t *testing.T) {
		rg := newRig(t, rerunPool(), killedRunner("linux-aaaaa", 11))
		rg.clk.Step(waitLimit + time.Minute)
		rg.reconcile("linux-aaaaa")
		if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunSkipped {
			t.Errorf("record = %+v, want Skipped", got)
		}
	})
	t.Run("someone re-ran the run meanwhile", func(t *testing.T) {
		rg := newRig(t, rerunPool(), killedRunner("linux-aaaaa", 11))
		completedFailed(rg)
		rg.gh.nextErr["rerun_job"] = github.NewRunInProgressError("already running", nil)
		if res := rg.reconcile("linux-aaaaa"); res.RequeueAfter != minPoll {
			t.Errorf("requeue after %s, want %s", res.RequeueAfter, minPoll)
		}
		if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunWaiting {
			t.Errorf("record = %+v, want Waiting", got)
		}
	})
}

// A job of the run ending on a Gantry runner wakes the killed job's record: the run is
// read again at once rather than at the next poll, and the job re-run as soon as the
// run has completed.
func TestAJobEndingWakesTheKilledJobsRecord(t *testing.T) {
	keeper := &v1alpha1.Runner{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-kkkkk", Labels: map[string]string{v1alpha1.LabelPool: "linux"}},
		Spec:       v1alpha1.RunnerSpec{PoolName: "linux"},
		Status:     v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerBusy, Job: &v1alpha1.RunnerJob{ID: 12, RunID: 7, Repository: "acme/api"}},
	}
	rg := newRig(t, rerunPool(), killedRunner("linux-aaaaa", 11), keeper)
	rg.gh.jobs = []github.WorkflowJob{
		{ID: 11, RunID: 7, RunAttempt: 1, Name: "build", Status: "completed", Conclusion: "failure", RunnerName: "linux-aaaaa"},
		{ID: 12, RunID: 7, RunAttempt: 1, Name: "test", Status: "in_progress", RunnerName: "linux-kkkkk"},
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	rg.r.queue.Store(&q)
	rg.clk.Step(10 * time.Minute) // the killed job failed; the run is read every 2 minutes now
	rg.reconcile("linux-aaaaa")
	rg.gh.complete(map[string]string{"build": "failure"})
	rg.clk.Step(5 * time.Second)
	rg.reconcile("linux-aaaaa") // not woken: the last reading is 5 s old, nothing asked
	if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunWaiting {
		t.Fatalf("record = %+v before the wake, want Waiting", got)
	}

	rg.r.Wake(context.Background(), types.NamespacedName{Namespace: "ci", Name: "linux-kkkkk"})
	if q.Len() != 1 {
		t.Fatalf("the wake queued %d requests, want the killed job's record", q.Len())
	}
	req, _ := q.Get()
	if req.Name != "linux-aaaaa" {
		t.Errorf("woke %s, want linux-aaaaa", req.Name)
	}
	rg.clk.Step(minWakeRead)
	rg.reconcile("linux-aaaaa")
	if got := rg.record("linux-aaaaa"); got.State != v1alpha1.RerunDone {
		t.Errorf("record = %+v after the wake, want Done", got)
	}
	if diff := cmp.Diff([]string{"get_run", "get_run", "list_jobs", "rerun_job"}, rg.gh.gotCalls()); diff != "" {
		t.Errorf("GitHub calls (-want +got):\n%s", diff)
	}
}
