package controller

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/actions/scaleset"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// newScaleSetWorld is newWorld with a simulated Actions service whose long poll holds
// for pollHold and whose abandoned sessions expire after sessionTimeout (0: the
// simulator's defaults, GitHub's 50 s and 2 minutes).
func newScaleSetWorld(t *testing.T, sessionTimeout, pollHold time.Duration) *world {
	t.Helper()
	return newWorldWith(t, stack.Options{ActionsSessionTimeout: sessionTimeout, ActionsPollHold: pollHold})
}

// scaleSetClient is GitHub's own Actions service client, as another listener (a dead
// controller, a person) would use it.
func (w *world) scaleSetClient() *scaleset.Client {
	w.t.Helper()
	c, err := scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
		GitHubConfigURL: w.simURL + "/acme", PersonalAccessToken: testToken,
		SystemInfo: scaleset.SystemInfo{System: "gantry-test"},
	}, scaleset.WithRetryMax(1), scaleset.WithRetryWaitMax(10*time.Millisecond))
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// waitSession waits until the pool's ScaleSetSession condition is True and returns the
// scale set's id.
func (w *world) waitSession(pool string) int64 {
	w.t.Helper()
	var id int64
	w.eventually("the scale set session of "+pool+" to be active", func() (bool, error) {
		p := w.getPool(pool)
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionScaleSetSession)
		if p.Status.ScaleSet == nil || c == nil || c.Status != "True" || p.Status.ScaleSet.ID == 0 {
			return false, nil
		}
		id = p.Status.ScaleSet.ID
		return true, nil
	})
	return id
}

// A scale-set pool creates its scale set with the pool's labels, opens a session, scales
// from zero for the jobs GitHub assigns it, back to zero, and on deletion leaves nothing
// behind: no runner, no pod, no scale set, no session.
func TestScaleSetPoolScalesFromZeroAndBack(t *testing.T) {
	const jobs = 4
	w := newScaleSetWorld(t, 0, 2*time.Second)
	w.create(w.pool("ss").ScaleSet("").MaxRunners(jobs).Obj())
	id := w.waitSession("ss")

	sets := w.sim.ScaleSets()
	if len(sets) != 1 || sets[0].ID != id || sets[0].Name != "ss" || sets[0].Session == "" {
		t.Fatalf("scale sets on GitHub = %+v, want one named ss (id %d) with a session", sets, id)
	}
	for _, want := range []string{"ss", "self-hosted", "linux", "x64"} {
		if !containsFold(sets[0].Labels, want) {
			t.Errorf("scale set labels %v lack %q", sets[0].Labels, want)
		}
	}
	if n := len(w.runners("ss")); n != 0 {
		t.Fatalf("%d runners before any job, want 0", n)
	}

	for range jobs {
		if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"ss"}, Duration: simgithub.Duration(100 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	w.runJobs("ss", jobs)
	w.eventually("the pool back at zero", func() (bool, error) {
		p := w.getPool("ss")
		return len(w.runners("ss")) == 0 && len(w.sim.Runners()) == 0 && p.Status.ScaleSet != nil &&
			p.Status.ScaleSet.Statistics != nil && p.Status.ScaleSet.Statistics.AssignedJobs == 0, nil
	})
	// Frugal: one runner per job, and a runner that finished its job and left the service
	// on its own costs no call to remove it.
	calls := w.sim.CallCounts()
	if n := calls["POST /_apis/runtime/runnerscalesets/{id}/generatejitconfig"].Total; n != jobs {
		t.Errorf("%d runners registered for %d jobs, want one each", n, jobs)
	}
	if n := calls["DELETE /_apis/distributedtask/pools/0/agents/{id}"].Total; n != 0 {
		t.Errorf("%d runner removals, want none: every runner finished its job and left the service on its own", n)
	}

	if err := w.c.Delete(w.ctx(), w.getPool("ss")); err != nil {
		t.Fatal(err)
	}
	w.eventually("the pool and its scale set gone", func() (bool, error) {
		p := &v1alpha1.RunnerPool{}
		err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: w.ns, Name: "ss"}, p)
		return err != nil && len(w.sim.ScaleSets()) == 0, nil
	})
	var pods corev1.PodList
	if err := w.c.List(w.ctx(), &pods); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Namespace == w.ns {
			t.Errorf("pod %s left over", p.Name)
		}
	}
}

// Changing the pool's labels changes the scale set's: the same scale set, updated.
func TestScaleSetFollowsThePoolsLabels(t *testing.T) {
	w := newScaleSetWorld(t, 0, 2*time.Second)
	w.create(w.pool("relabel").ScaleSet("").Obj())
	id := w.waitSession("relabel")
	p := w.getPool("relabel")
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Labels = []string{"linux", "gpu"}
	if err := w.c.Patch(w.ctx(), p, patch); err != nil {
		t.Fatal(err)
	}
	w.eventually("the scale set labeled gpu", func() (bool, error) {
		sets := w.sim.ScaleSets()
		return len(sets) == 1 && sets[0].ID == id && containsFold(sets[0].Labels, "gpu") && sets[0].Session != "", nil
	})
}

// A scale set deleted on GitHub is created again, and jobs flow through the new one.
func TestScaleSetDeletedOnGitHubIsRecreated(t *testing.T) {
	w := newScaleSetWorld(t, 0, 2*time.Second)
	w.create(w.pool("again").ScaleSet("").MaxRunners(2).Obj())
	first := w.waitSession("again")
	if err := w.scaleSetClient().DeleteRunnerScaleSet(w.ctx(), int(first)); err != nil {
		t.Fatal(err)
	}
	var second int64
	w.eventuallyWithin(60*time.Second, "a new scale set in the pool's status", func() (bool, error) {
		p := w.getPool("again")
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionScaleSetSession)
		if p.Status.ScaleSet == nil || p.Status.ScaleSet.ID == first || p.Status.ScaleSet.ID == 0 || c == nil || c.Status != "True" {
			return false, nil
		}
		second = p.Status.ScaleSet.ID
		return true, nil
	})
	if sets := w.sim.ScaleSets(); len(sets) != 1 || sets[0].ID != second {
		t.Fatalf("scale sets on GitHub = %+v, want only the new one, %d", sets, second)
	}
	if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"again"}, Duration: simgithub.Duration(100 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	w.runJobs("again", 1)
}

// A session left open by a controller that died (SIGKILL: it could not close it) is
// the Actions service's until it expires: the new leader is refused with 409, says so
// in the ScaleSetSession condition, retries with backoff, and gets in once it expires.
// A session the broker drops (refresh answered 404) is created again.
func TestSessionHeldByADeadLeaderIsTakenOver(t *testing.T) {
	const expiry = 8 * time.Second
	w := newScaleSetWorld(t, expiry, 2*time.Second)
	// What the dead leader left: the scale set it created and recorded in the pool's
	// status, and its open session.
	c := w.scaleSetClient()
	group, err := c.GetRunnerGroupByName(w.ctx(), "Default")
	if err != nil {
		t.Fatal(err)
	}
	ss, err := c.CreateRunnerScaleSet(w.ctx(), &scaleset.RunnerScaleSet{Name: "ha", RunnerGroupID: group.ID,
		Labels: []scaleset.Label{{Name: "ha"}, {Name: "self-hosted"}, {Name: "linux"}, {Name: "x64"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.MessageSessionClient(w.ctx(), ss.ID, "dead-leader"); err != nil {
		t.Fatal(err)
	}
	pool := w.pool("ha").ScaleSet("").Obj()
	w.create(pool)
	before := pool.DeepCopy()
	pool.Status.ScaleSet = &v1alpha1.ScaleSetStatus{ID: int64(ss.ID), Name: "ha"}
	if err := w.c.Status().Patch(w.ctx(), pool, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	w.eventually("the conflict shown in the ScaleSetSession condition", func() (bool, error) {
		c := meta.FindStatusCondition(w.getPool("ha").Status.Conditions, v1alpha1.ConditionScaleSetSession)
		return c != nil && c.Status == "False" && c.Reason == v1alpha1.ReasonSessionConflict, nil
	})
	id := w.waitSession("ha")
	took := time.Since(start)
	if id != int64(ss.ID) {
		t.Errorf("the pool's scale set is %d, want the recorded %d (never a new one)", id, ss.ID)
	}
	if took < expiry/2 {
		t.Errorf("the session was taken over after %v, before the old one could expire (%v)", took, expiry)
	}
	t.Logf("session taken over %v after the pool was created (the dead leader's session expires after %v of silence)", took.Round(100*time.Millisecond), expiry)
	if sets := w.sim.ScaleSets(); len(sets) != 1 || sets[0].Session == "dead-leader" || sets[0].Session == "" {
		t.Fatalf("scale sets = %+v, want one whose session is Gantry's", sets)
	}

	// The broker drops the session: the controller opens a new one.
	if err := w.sim.DropScaleSetSession(id); err != nil {
		t.Fatal(err)
	}
	w.eventuallyWithin(60*time.Second, "a new session after the broker dropped the old one", func() (bool, error) {
		sets := w.sim.ScaleSets()
		return len(sets) == 1 && sets[0].Session != "", nil
	})
	if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{"ha"}, Duration: simgithub.Duration(100 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	w.runJobs("ha", 1)
}

// The dead leader recorded its session in the pool's status, as Gantry's leader does:
// the new one closes it and opens its own at once, long before the service would expire
// it, and never shows a conflict.
func TestSessionRecordedByADeadLeaderIsClosedAtOnce(t *testing.T) {
	const expiry = 5 * time.Minute
	w := newScaleSetWorld(t, expiry, 2*time.Second)
	c := w.scaleSetClient()
	group, err := c.GetRunnerGroupByName(w.ctx(), "Default")
	if err != nil {
		t.Fatal(err)
	}
	ss, err := c.CreateRunnerScaleSet(w.ctx(), &scaleset.RunnerScaleSet{Name: "ha", RunnerGroupID: group.ID,
		Labels: []scaleset.Label{{Name: "ha"}, {Name: "self-hosted"}, {Name: "linux"}, {Name: "x64"}}})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := c.MessageSessionClient(w.ctx(), ss.ID, "dead-leader")
	if err != nil {
		t.Fatal(err)
	}
	pool := w.pool("ha").ScaleSet("").Obj()
	w.create(pool)
	before := pool.DeepCopy()
	pool.Status.ScaleSet = &v1alpha1.ScaleSetStatus{ID: int64(ss.ID), Name: "ha", SessionID: dead.Session().SessionID.String()}
	if err := w.c.Status().Patch(w.ctx(), pool, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	id := w.waitSession("ha")
	took := time.Since(start)
	if id != int64(ss.ID) {
		t.Errorf("the pool's scale set is %d, want the recorded %d", id, ss.ID)
	}
	if took > 20*time.Second {
		t.Errorf("the session was taken over after %v; want at once (the dead one expires after %v)", took, expiry)
	}
	t.Logf("dead leader's session closed and a new one opened %v after the pool was created", took.Round(100*time.Millisecond))
	sets := w.sim.ScaleSets()
	if len(sets) != 1 || sets[0].Session == "dead-leader" || sets[0].Session == "" {
		t.Fatalf("scale sets = %+v, want one whose session is Gantry's", sets)
	}
	if got := w.getPool("ha").Status.ScaleSet.SessionID; got == "" || got == dead.Session().SessionID.String() {
		t.Errorf("status.scaleSet.sessionID = %q, want the new session's", got)
	}
	if n := w.sim.CallCounts()["POST /_apis/runtime/runnerscalesets/{id}/sessions"].ByStatus[409]; n != 0 {
		t.Errorf("%d session creations refused with 409, want none", n)
	}
}

// A same-named scale set Gantry did not create for the pool is never taken over: the
// pool is not Ready (ScaleSetNameTaken) and creates no runner, even for its jobs.
func TestForeignScaleSetIsNotTakenOver(t *testing.T) {
	w := newScaleSetWorld(t, 0, 2*time.Second)
	c := w.scaleSetClient()
	group, err := c.GetRunnerGroupByName(w.ctx(), "Default")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := c.CreateRunnerScaleSet(w.ctx(), &scaleset.RunnerScaleSet{Name: "taken", RunnerGroupID: group.ID})
	if err != nil {
		t.Fatal(err)
	}
	w.create(w.pool("taken").ScaleSet("").Obj())
	w.eventually("the pool not Ready with ScaleSetNameTaken", func() (bool, error) {
		p := w.getPool("taken")
		ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		sess := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionScaleSetSession)
		return ready != nil && ready.Status == "False" && ready.Reason == v1alpha1.ReasonScaleSetNameTaken &&
			sess != nil && sess.Reason == v1alpha1.ReasonScaleSetNameTaken && strings.Contains(sess.Message, "delete it on GitHub"), nil
	})
	sets := w.sim.ScaleSets()
	if len(sets) != 1 || sets[0].ID != int64(foreign.ID) || sets[0].Session != "" {
		t.Fatalf("scale sets = %+v, want only the foreign one, without a session", sets)
	}
	if n := len(w.runners("taken")); n != 0 {
		t.Errorf("%d runners, want 0", n)
	}
}

func containsFold(list []string, s string) bool {
	for _, l := range list {
		if strings.EqualFold(l, s) {
			return true
		}
	}
	return false
}

// Two hundred scale-set pools live in the one manager: every pool gets its scale set
// and an open session, idle sessions cost the Actions service little, and a burst
// spread over fifty of them is run to the end. The figures are logged; they include
// the simulator's side of each long poll, which runs in this process too (the bench,
// `gantry sim run --scenario idle-scalesets`, measures the controller alone).
func TestTwoHundredScaleSetPoolsInOneManager(t *testing.T) {
	if testing.Short() {
		t.Skip("200 pools and a minute of idle sessions: not in -short")
	}
	const pools, burst = 200, 50
	w := newScaleSetWorld(t, 0, 0)
	runtime.GC()
	goroutines0 := runtime.NumGoroutine()
	var mem0 runtime.MemStats
	runtime.ReadMemStats(&mem0)

	start := time.Now()
	for i := range pools {
		w.create(w.pool(fmt.Sprintf("p%03d", i)).ScaleSet("").MaxRunners(2).Obj())
	}
	w.eventuallyWithin(3*time.Minute, "200 sessions open", func() (bool, error) {
		open := 0
		for _, ss := range w.sim.ScaleSets() {
			if ss.Session != "" {
				open++
			}
		}
		return open == pools, nil
	})
	t.Logf("%d scale sets created and their sessions opened in %v", pools, time.Since(start).Round(100*time.Millisecond))

	// A minute of idle sessions: the long poll holds 50 s, as GitHub's does.
	w.sim.ResetCallCounts()
	idleStart := time.Now()
	time.Sleep(time.Minute)
	idle := time.Since(idleStart)
	var service int64
	for route, c := range w.sim.CallCounts() {
		if simgithub.IsActionsServiceRoute(route) {
			service += c.Total
		} else if c.Total > 0 {
			t.Logf("REST while idle: %s %d", route, c.Total)
		}
	}
	runtime.GC()
	var mem1 runtime.MemStats
	runtime.ReadMemStats(&mem1)
	perMin := float64(service) / idle.Minutes()
	t.Logf("200 idle scale-set pools: %d goroutines more than before (both ends of each long poll), heap +%.1f MiB, %.0f Actions service calls per minute (%.2f per pool)",
		runtime.NumGoroutine()-goroutines0, float64(int64(mem1.HeapAlloc)-int64(mem0.HeapAlloc))/(1<<20), perMin, perMin/pools)
	if perMin/pools > 3 {
		t.Errorf("%.2f Actions service calls per idle pool per minute, want at most 3 (one long poll per 50 s and its rare refresh)", perMin/pools)
	}

	// A burst spread over fifty of them: one job each.
	w.sim.ResetCallCounts()
	burstStart := time.Now()
	for i := range burst {
		if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: "acme/api", Labels: []string{fmt.Sprintf("p%03d", i*pools/burst)},
			Duration: simgithub.Duration(100 * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	w.runJobs("", burst)
	w.eventuallyWithin(2*time.Minute, "every pool back at zero", func() (bool, error) {
		return len(w.runners("")) == 0 && len(w.sim.Runners()) == 0, nil
	})
	var calls int64
	for _, c := range w.sim.CallCounts() {
		calls += c.Total
	}
	t.Logf("a burst of %d jobs over %d pools ran and drained in %v with %.1f GitHub calls per job (REST and Actions service, long polls included)",
		burst, burst, time.Since(burstStart).Round(100*time.Millisecond), float64(calls)/burst)
}
