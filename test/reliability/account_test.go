package reliability

import (
	"context"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// finish waits for every job to complete and the pool to drain, then checks the
// invariants every scenario must keep and records the figures:
//
//   - no job lost: every job queued on GitHub completed;
//   - no duplicate runner: one pod and one registration per Runner, one job per runner;
//   - no busy runner killed: no job failed because its runner died, except runners the
//     test itself killed (faulted);
//   - nothing left over: no Runner, pod or GitHub registration once the pool drained
//     (failed Runners stay visible by design and are excluded);
//   - no secret leaked: none of the scenario's secrets outside its Secrets, in any
//     object, log line, metrics scrape or the audit log;
//   - nothing forbidden: the controller, bound only to the generated role, was never
//     refused by RBAC.
func (w *world) finish(jobTimeout time.Duration) {
	t := w.t
	t.Helper()
	deadline := time.Now().Add(jobTimeout)
	for !w.jobsDone() && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if !w.jobsDone() {
		w.dump()
	}
	drainDeadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(drainDeadline) && w.leftovers() > 0 {
		time.Sleep(200 * time.Millisecond)
	}
	f := w.fig
	f.Finished = true

	// Jobs.
	faulted := w.faultedRunners()
	var pickups []float64
	killedByFault := 0
	for _, j := range w.sim.Jobs() {
		switch {
		case j.Status != simgithub.StatusCompleted:
			f.Lost.Jobs++
		case j.Conclusion != "success":
			if _, ok := faulted[j.RunnerName]; ok {
				killedByFault++
			} else {
				f.Lost.BusyRunnersKilled++
				t.Errorf("job %d failed on runner %s (%s), which no fault touched: a busy runner was killed", j.ID, j.RunnerName, j.Conclusion)
			}
		}
		if j.StartedAt != nil {
			pickups = append(pickups, j.StartedAt.Sub(j.QueuedAt).Seconds())
		}
	}
	if f.Lost.Jobs > 0 {
		t.Errorf("%d of %d jobs never completed", f.Lost.Jobs, len(w.sim.Jobs()))
	}
	f.measure("jobs_killed_with_faulted_pods", float64(killedByFault))
	sort.Float64s(pickups)
	if len(pickups) > 0 {
		f.measure("pickup_p50_seconds", round(quantile(pickups, 0.5)))
		f.measure("pickup_p95_seconds", round(quantile(pickups, 0.95)))
		f.measure("pickup_max_seconds", round(pickups[len(pickups)-1]))
	}

	// Runners.
	pods, regs, twice := w.obs.duplicates()
	f.Lost.DuplicateRunners = pods + regs + twice
	if f.Lost.DuplicateRunners > 0 {
		t.Errorf("duplicates: %d second pods, %d second registrations, %d runners that ran two jobs", pods, regs, twice)
	}
	created, failed, peak := w.obs.counts()
	f.Load.RunnersCreated, f.Load.PeakRunners, f.Load.RunnersFailed = created, peak, failed
	f.measure("runners_unused", float64(w.obs.unused()))
	if n := w.leftovers(); n > 0 {
		f.Lost.Leftovers = n
		w.dump()
		t.Errorf("%d Runners, pods or GitHub runners left after the pool drained", n)
	}
	for _, e := range w.kubelet.errors() {
		t.Logf("runner agent: %s", redact(e))
	}
	f.measure("agent_errors", float64(len(w.kubelet.errors())))
	restricted, unrestricted := w.kubelet.podSecurity()
	f.measure("runner_pods_restricted", float64(restricted))
	if unrestricted > 0 {
		t.Errorf("%d runner pods lack the restricted security defaults (their templates set no securityContext)", unrestricted)
	}

	// Controllers.
	starts := 0
	for _, p := range w.controllers() {
		starts += p.startCount()
	}
	f.Load.ControllerReplicas, f.Load.ControllerStarts = len(w.controllers()), starts
	answers := w.svc.answerCounts()
	for code, n := range answers {
		f.measure("webhook_answers_"+httpCode(code), float64(n))
	}

	// The controllers ran as the Deployment runs them: uid 65532, read-only root.
	for _, p := range w.controllers() {
		if !cp.sandbox || !p.isAlive() {
			continue
		}
		uid, ro, err := p.sandboxState()
		if err != nil {
			t.Errorf("reading the sandbox of controller %s: %v", p.opts.name, err)
		} else if uid != "65532" || !ro {
			t.Errorf("controller %s runs as uid %s, root filesystem read-only %v; want 65532 and read-only", p.opts.name, uid, ro)
		}
	}

	// Secrets.
	res := w.scan()
	f.Load.ObjectsScanned, f.Load.LogLinesScanned, f.Load.MetricsLinesScanned = res.Objects, res.LogLines, res.MetricsLines
	f.Lost.SecretsLeaked = len(res.Leaks)
	for _, l := range res.Leaks {
		t.Errorf("secret %q found in %s", l.Secret, l.Where)
	}
	if res.Home == 0 {
		t.Errorf("the scan found no secret even in the Secrets that hold them: it is not looking")
	}
	if res.LogLines == 0 {
		t.Errorf("the scan read no controller log line")
	}
	// Every runner pod, as the API server admitted it (ServiceAccount admission on):
	// no ServiceAccount token, no credential but the runner's own JIT configuration.
	inspected, creds := w.kubelet.podCredentials()
	f.measure("runner_pods_inspected_for_credentials", float64(inspected))
	f.measure("runner_pod_credentials_found", float64(len(creds)))
	for _, c := range creds {
		t.Errorf("runner pod carries a credential: %s", c)
	}
	if inspected == 0 && created > 0 {
		t.Errorf("%d runners were created and no runner pod was inspected for credentials", created)
	}
	f.measure("secrets_tracked", float64(w.secrets.count()))

	// RBAC.
	_, forbidden, events, err := auditOf(w.saUser())
	if err != nil {
		t.Fatal(err)
	}
	f.Load.AuditEventsChecked = events
	f.Lost.Forbidden = len(forbidden)
	for _, fb := range forbidden {
		t.Errorf("RBAC refused the controller: %s", fb)
	}
	if events == 0 {
		t.Errorf("the audit log has no request of %s: the controller did not run as the ServiceAccount", w.saUser())
	}
	for _, p := range w.controllers() {
		for _, l := range p.logLines() {
			if containsFold(l, "read-only file system") {
				t.Errorf("controller %s tried to write outside /tmp: %s", p.opts.name, redact(l))
				break
			}
			if strings.Contains(l, "WARNING: DATA RACE") {
				t.Errorf("the race detector found a data race in controller %s: see %s", p.opts.name, p.logPath)
				break
			}
		}
	}
}

// leftovers counts Runners still alive (failed ones excluded), runner pods, and
// GitHub runners that do not belong to a failed Runner.
func (w *world) leftovers() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var runners v1alpha1.RunnerList
	if err := cp.c.List(ctx, &runners, client.InNamespace(w.ns)); err != nil {
		return 1
	}
	failed := map[string]bool{}
	n := 0
	for _, r := range runners.Items {
		if r.Status.Phase == v1alpha1.RunnerFailed && r.DeletionTimestamp.IsZero() {
			failed[r.Name] = true
			continue
		}
		n++
	}
	var pods corev1.PodList
	if err := cp.c.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}); err != nil {
		return 1
	}
	n += len(pods.Items)
	for _, r := range w.sim.Runners() {
		if !failed[r.Name] {
			n++
		}
	}
	return n
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func round(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

func httpCode(code int) string {
	if code == 0 {
		return "none"
	}
	return itoa(code)
}
