package runner

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// A runner's registration and its pod are what register and ensurePod must never make
// twice. They are recorded in the Runner's status, but not with a write of their own:
// with the first status write the runner makes anyway — Busy once it takes a job (in a
// burst, once fewer than burstQueued jobs wait in its pool: tookJob), the Online
// condition once GitHub was asked, a failure, a lease of cache volumes — or
// firstWriteWait after they were made (firstWriteQueuedWait while jobs wait in its
// pool), whichever comes first, so that a new runner's status shows it registered
// within seconds. A runner made for a queued job takes it
// about a second after its pod runs, so one status write records it all. Until then
// this process remembers them (unwritten). A restarted
// process reads the registration back from the runner's Secret (recoverRegistration)
// and the pod's template hash from the pod (annotationTemplateHash); a runner whose
// registration it read back and whose pod is not there is taken as one whose pod is
// gone — whether it ever ran cannot be told — and fails (PodDeleted), never given a
// second pod.

// firstWriteWait is how long a runner's registration and pod wait, unwritten, for a
// status write that records the job the runner takes: longer than a runner made for a
// queued job takes to take it, even in a burst of hundreds of jobs on a small cluster
// (pickup p99 about 12 s for 500 jobs on 2 cores, `gantry sim run --scenario burst`).
const firstWriteWait = 15 * time.Second

// firstWriteQueuedWait replaces firstWriteWait while jobs wait in the runner's pool: in
// a burst of thousands the cluster takes a minute or more to run the pods and GitHub
// to hand them their jobs, and a write at 15 s would be followed by the job's own.
// Measured in a 5,000-job burst (`gantry sim run --scenario scale`): the job's write
// came 20–50 s after the pod was created.
const firstWriteQueuedWait = 2 * time.Minute

// unwritten is what this process knows of one runner and its stored status may not
// show yet.
type unwritten struct {
	uid types.UID
	// since is when this process first remembered something of the runner.
	since time.Time

	registered   bool
	runnerID     int64
	registeredAt metav1.Time
	// recovered: the registration was read back from the Secret, not made by this
	// process; the runner's pod may have existed before this process knew of it.
	recovered bool

	pod          string
	templateHash string
	// containerHook is the hook slot claimed for the runner (Kubernetes mode): the claim
	// itself is on the slot's ServiceAccount, and the pod's environment names it.
	containerHook *v1alpha1.RunnerContainerHook
}

// unwrittenStatus holds unwritten, by namespace and name, for every runner whose
// stored status does not show all of it yet. The zero value is ready to use.
type unwrittenStatus struct {
	m sync.Map // types.NamespacedName → *unwritten
}

// get returns what is remembered of the runner, or nil. A Runner's reconciles never run
// at once, so the entry is the caller's until it returns.
func (u *unwrittenStatus) get(rn *v1alpha1.Runner) *unwritten {
	v, ok := u.m.Load(runnerKey(rn))
	if !ok {
		return nil
	}
	e := v.(*unwritten)
	if e.uid != rn.UID {
		return nil // another Runner of the same name
	}
	return e
}

func (u *unwrittenStatus) entry(rn *v1alpha1.Runner, now time.Time) *unwritten {
	if e := u.get(rn); e != nil {
		return e
	}
	e := &unwritten{uid: rn.UID, since: now}
	u.m.Store(runnerKey(rn), e)
	return e
}

// rememberRegistration remembers the runner's registration, as set in st.
func (u *unwrittenStatus) rememberRegistration(rn *v1alpha1.Runner, st *v1alpha1.RunnerStatus, recovered bool, now time.Time) {
	e := u.entry(rn, now)
	e.registered, e.runnerID, e.recovered = true, st.GitHubRunnerID, recovered
	if st.RegisteredAt != nil {
		e.registeredAt = *st.RegisteredAt
	}
}

// rememberPod remembers the runner's pod, as set in st.
func (u *unwrittenStatus) rememberPod(rn *v1alpha1.Runner, st *v1alpha1.RunnerStatus, now time.Time) {
	e := u.entry(rn, now)
	e.pod, e.templateHash = st.PodName, st.TemplateHash
}

// rememberContainerHook remembers where the runner's hook works, as set in st.
func (u *unwrittenStatus) rememberContainerHook(rn *v1alpha1.Runner, st *v1alpha1.RunnerStatus, now time.Time) {
	u.entry(rn, now).containerHook = st.ContainerHook.DeepCopy()
}

func (u *unwrittenStatus) forget(key types.NamespacedName) { u.m.Delete(key) }

// shownBy reports whether a stored status shows all that is remembered.
func (e *unwritten) shownBy(st v1alpha1.RunnerStatus) bool {
	registration := !e.registered || st.RegisteredAt != nil || st.GitHubRunnerID != 0
	// A recovered registration's pod is unknown until seen: the guard stays till then.
	pod := st.PodName != "" || (e.pod == "" && !e.recovered)
	hook := e.containerHook == nil || st.ContainerHook != nil
	return registration && pod && hook
}

// applyTo sets in st what is remembered and st does not show: st then reads as it will
// once written.
func (e *unwritten) applyTo(st *v1alpha1.RunnerStatus, name string) {
	if e.registered && st.RegisteredAt == nil && st.GitHubRunnerID == 0 {
		at := e.registeredAt
		st.GitHubRunnerID, st.GitHubRunnerName, st.RegisteredAt = e.runnerID, name, &at
		if st.Phase == "" {
			st.Phase = v1alpha1.RunnerPending
		}
	}
	if e.pod != "" && st.PodName == "" {
		st.PodName = e.pod
		if st.TemplateHash == "" {
			st.TemplateHash = e.templateHash
		}
	}
	if e.containerHook != nil && st.ContainerHook == nil {
		st.ContainerHook = e.containerHook.DeepCopy()
	}
}

// recall applies what this process remembers of the runner to the reconcile's working
// status, and lets it go once the stored status shows it all.
func (r *Reconciler) recall(s *scope) {
	e := r.unwritten.get(s.runner)
	if e == nil {
		return
	}
	if e.shownBy(s.before.Status) {
		r.unwritten.forget(runnerKey(s.runner))
		return
	}
	e.applyTo(&s.runner.Status, s.runner.Name)
}

// writeLater reports how long the status write may wait: the working status differs
// from the stored one only by what this process remembers, for less than
// firstWriteWait (firstWriteQueuedWait while jobs wait in its pool). 0: write now.
func (r *Reconciler) writeLater(s *scope) time.Duration {
	e := r.unwritten.get(s.runner)
	if e == nil {
		return 0
	}
	wait, recheck := firstWriteWait, time.Duration(0)
	queued := r.queuedJobs(s)
	burst := inBurst(s.pool, queued)
	if burst || queued > 0 {
		wait, recheck = firstWriteQueuedWait, queuedRecheck
	}
	left := wait - r.Clock.Since(e.since)
	if left <= 0 {
		return 0
	}
	if recheck > 0 {
		left = min(left, recheck) // the queue may empty meanwhile: then write at once
	}
	stored := s.before.Status.DeepCopy()
	e.applyTo(stored, s.runner.Name)
	if stored.Job == nil && s.runner.Status.Phase == stored.Phase {
		// The job GitHub gave the runner, heard before the cache shows its pod running:
		// the Tracker holds it too, and the pod's start, a moment later, brings the
		// write that records it with Busy.
		stored.Job = s.runner.Status.Job
	}
	if burst {
		tookJob(stored, s.runner.Status)
	}
	if !equalStatus(*stored, s.runner.Status) {
		return 0
	}
	return left
}

// burstQueued is how many jobs must wait in a pool for it to be in a burst: more than
// one round of the runners reconciled at once (the manager's RunnerConcurrency, 64 by
// default). Steady arrivals keep a few jobs waiting, each for a runner on its way; a
// burst keeps hundreds waiting while its runners and pods are made.
const burstQueued = 64

// inBurst reports whether at least burstQueued jobs wait in pool: by the Tracker
// (tracked; webhook demand, freshest) or by the pool's status.queuedJobs, which the pool
// writes at most once a second from either demand source (a scale set's jobs are counted
// from the service's answer, not held in the Tracker).
func inBurst(pool *v1alpha1.RunnerPool, tracked int) bool {
	return max(int(pool.Status.QueuedJobs), tracked) >= burstQueued
}

// tookJob sets in stored what taking its job changed in the runner's working status:
// Busy, the job, the Online condition. writeLater calls it while the runner's pool is in
// a burst, so that a new runner's first status write waits, past its job's start, until
// fewer than burstQueued jobs wait (looked at every queuedRecheck) or
// firstWriteQueuedWait has passed. A burst's Busy writes are the dearest the API server
// gets from Gantry — about 3 ms of its CPU each, twice a Runner's create — and in a
// 5,000-job burst 1,538 of them came while the pool's last runners and pods were still
// being made. Until then the Tracker holds the job: the pool counts the runner busy
// (runnerpool's isBusy), recallJob gives every reconcile the job, and GitHub refuses to
// remove a runner running one (finalize). `kubectl get runners` shows the runner without
// a phase meanwhile; the pool's BUSY column counts it.
func tookJob(stored *v1alpha1.RunnerStatus, working v1alpha1.RunnerStatus) {
	if working.Phase != v1alpha1.RunnerBusy || working.Job == nil || stored.Job != nil {
		return
	}
	if stored.Phase != v1alpha1.RunnerPending && stored.Phase != v1alpha1.RunnerIdle {
		return
	}
	stored.Phase, stored.Job = working.Phase, working.Job
	if c := meta.FindStatusCondition(working.Conditions, ConditionOnline); c != nil {
		meta.SetStatusCondition(&stored.Conditions, *c)
	}
}

// recallJob gives the working status the job the Tracker says the runner took, before
// any phase runs: the stored status may not show it yet (tookJob).
func (r *Reconciler) recallJob(s *scope) {
	if r.Tracker == nil || s.runner.Status.Job != nil {
		return
	}
	if job, ok := r.Tracker.RunnerJob(s.runner.Name); ok {
		s.runner.Status.Job = &v1alpha1.RunnerJob{ID: job.ID, RunID: job.RunID, Repository: job.Repository(), Workflow: job.Workflow}
	}
}

// podMade reports whether this process made the runner's pod, or found it, and its
// stored status may not show it yet.
func (r *Reconciler) podMade(rn *v1alpha1.Runner) bool {
	e := r.unwritten.get(rn)
	return e != nil && e.pod != ""
}

// podUnknown reports whether the runner's registration was read back from its Secret
// and this process has not seen its pod: an earlier process may have made it.
func (r *Reconciler) podUnknown(s *scope) bool {
	e := r.unwritten.get(s.runner)
	return e != nil && e.recovered && s.runner.Status.PodName == ""
}
