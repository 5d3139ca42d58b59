package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// FleetSpec makes a scenario's pools a fleet, as a platform team runs many from one
// controller: pools of both demand sources, several credentials, runners of several
// architectures on a cluster of many nodes, and the controller restarted once in the
// middle. Pool i (from 0) of the scenario's Pools:
//   - takes its demand from webhooks when i+1 is a multiple of WebhookEvery, else from a
//     runner scale set of its name;
//   - uses credentials Secret github-creds-(i mod Credentials + 1), each its own PAT;
//   - pins its runners by its template: linux/amd64 (os and arch: the platform is the
//     template's) when i mod 3 is 1, arm64 alone (the OS read from the nodes) when 2,
//     nothing when 0 (both read from the nodes, which run several architectures);
//   - carries its name as its one label; jobs name it: runs-on [name] for a scale set,
//     [self-hosted, name] for webhooks, so each job has one pool.
type FleetSpec struct {
	WebhookEvery int `json:"webhook_every"`
	Credentials  int `json:"credentials"`
	// NodeArchs are the nodes' architectures, taken in turn (cluster.Options.NodeArchs).
	NodeArchs []string `json:"node_archs"`
	// Restart, KILL or TERM, restarts the controller with that signal between the idle
	// window and the burst; "": no restart.
	Restart string `json:"restart,omitempty"`
	// SinglePoolBurst, once the burst has completed and its runners are gone, queues the
	// same burst again (as many jobs, as long, pods starting as fast) into one pool
	// alone, on the same cluster and controller: the burst's reference
	// (fleetsingle.go). That pool is one of the fleet's, the last scale-set pool outside
	// the burst's, with maxRunners the burst's size.
	SinglePoolBurst bool `json:"single_pool_burst,omitempty"`
}

// fleetScenario is the fleet scenario: 200 pools on a cluster of 1,000 nodes.
//
// kwok renews each node's lease every quarter of the node monitor grace period, as a
// kubelet renews its own every 10 s of a 40 s lease: 100 lease writes a second for 1,000
// nodes, which a real control plane is sized for but 2 shared cores are not. The
// controller never reads leases, so the fleet takes a grace period of 5 minutes (a lease
// renewed every 75 s); nothing else of the nodes changes: kwok reports each node's
// status on its own schedule (its node-heartbeat stage, every 10–20 minutes), and the
// nodes carry a kubelet's labels (OS, architecture, hostname), node info and a Ready
// condition.
var fleetScenario = Scenario{
	Name: "fleet", Description: "200 pools in one controller (every 4th on webhooks, the others on runner scale sets; 5 credentials; pinned to linux/amd64, arm64 or nothing) on 1,000 nodes (3 amd64 to 1 arm64): all sessions opened, idle for 2 minutes, the controller SIGKILLed and restarted, then a 500-job burst over a quarter of the pools (10 jobs each), 10 s jobs, pods start in 1 s; once its runners are gone, the same 500 jobs into one scale-set pool alone (linux-199, maxRunners 500): the burst's reference on the same cluster",
	Pools: 200, BurstPools: 50, DemandSource: v1alpha1.DemandSourceScaleSet, Idle: 2 * time.Minute,
	Burst: 500, JobDuration: 10 * time.Second, MaxRunners: 20, Nodes: 1000, NodeMonitorGracePeriod: 5 * time.Minute,
	Fleet:         &FleetSpec{WebhookEvery: 4, Credentials: 5, NodeArchs: []string{"amd64", "amd64", "amd64", "arm64"}, Restart: "KILL", SinglePoolBurst: true},
	PodStartDelay: time.Second, RateLimits: noLimits, RunnerLostTimeout: time.Minute, Timeout: 15 * time.Minute,
}

func (f *FleetSpec) validate() error {
	var errs []error
	if f.WebhookEvery < 0 || f.Credentials < 1 {
		errs = append(errs, errors.New("fleet: webhook_every must not be negative and credentials must be at least 1"))
	}
	for _, a := range f.NodeArchs {
		if v1alpha1.RunnerArchLabel(a) == "" {
			errs = append(errs, fmt.Errorf("fleet: node architecture %q has no runner label", a))
		}
	}
	if f.Restart != "" && f.Restart != "KILL" && f.Restart != "TERM" {
		errs = append(errs, fmt.Errorf("fleet: restart must be KILL or TERM, got %q", f.Restart))
	}
	return errors.Join(errs...)
}

// validateSinglePool checks that the scenario has a pool for its single-pool burst.
func (s Scenario) validateSinglePool() error {
	if s.Fleet == nil || !s.Fleet.SinglePoolBurst {
		return nil
	}
	if i, _ := s.singlePool(); i < 0 || s.Burst <= 0 {
		return errors.New("fleet: single_pool_burst repeats the burst in a scale-set pool outside the burst's pools: set burst, and leave such a pool (burst_pools below pools)")
	}
	return nil
}

// singlePool is the pool of the single-pool burst, by index and name: the last
// scale-set pool outside the burst's pools ((-1, "") if none). One of the fleet's own,
// it has been through the fleet's start-up, idle window and restart like the others, so
// the pool count stays the fleet's; only its maxRunners differs (fleetPool).
func (s Scenario) singlePool() (int, string) {
	names := s.poolNames()
	for i := len(names) - 1; i >= len(s.burstPools()); i-- {
		if s.poolSource(i) == v1alpha1.DemandSourceScaleSet {
			return i, names[i]
		}
	}
	return -1, ""
}

// poolSource is the demand source of the scenario's i-th pool.
func (s Scenario) poolSource(i int) v1alpha1.DemandSource {
	if f := s.Fleet; f != nil && f.WebhookEvery > 0 && (i+1)%f.WebhookEvery == 0 {
		return v1alpha1.DemandSourceWebhook
	}
	return s.demandSource()
}

// sessionPools are the names of the pools that hold a scale-set session.
func (s Scenario) sessionPools() []string {
	var out []string
	for i, name := range s.poolNames() {
		if s.poolSource(i) == v1alpha1.DemandSourceScaleSet {
			out = append(out, name)
		}
	}
	return out
}

// credential is a credentials Secret of the run and the PAT it holds.
type credential struct{ secret, token string }

// credentials are the run's credentials Secrets: github-creds alone, or a fleet's
// github-creds-1, github-creds-2, …, each with a PAT of its own.
func (s Scenario) credentials() []credential {
	if s.Fleet == nil {
		return []credential{{secret: "github-creds", token: simToken}}
	}
	out := make([]credential, s.Fleet.Credentials)
	for i := range out {
		out[i] = credential{secret: fmt.Sprintf("github-creds-%d", i+1), token: fmt.Sprintf("ghp_gantrysimulatedtoken%015d", i+1)}
	}
	return out
}

// nodeArchs are the architectures of the cluster's nodes, taken in turn.
func (s Scenario) nodeArchs() []string {
	if s.Fleet != nil {
		return s.Fleet.NodeArchs
	}
	return nil
}

// singlePoolMaxRunners is the single-pool burst's pool's maxRunners: the whole burst
// at once.
func (s Scenario) singlePoolMaxRunners() int32 { return max(s.MaxRunners, int32(s.Burst)) }

// fleetPool makes the i-th pool of a fleet out of the scenario's pool: its demand
// source, credentials, pinning and label (FleetSpec); the single-pool burst's pool may
// run the whole burst at once (maxRunners at least the burst's size).
func fleetPool(sc Scenario, pool *v1alpha1.RunnerPool, i int) {
	if single, _ := sc.singlePool(); sc.Fleet.SinglePoolBurst && i == single {
		pool.Spec.MaxRunners = sc.singlePoolMaxRunners()
	}
	creds := sc.credentials()
	pool.Spec.GitHub.CredentialsSecretRef.Name = creds[i%len(creds)].secret
	pool.Spec.Demand.Source = sc.poolSource(i)
	pool.Spec.Labels = []string{pool.Name}
	switch i % 3 {
	case 1:
		pool.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}
	case 2:
		pool.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
	}
}

// fleetJobLabels are the runs-on labels of a fleet's jobs for the i-th pool, name.
func (s Scenario) fleetJobLabels(i int, name string) []string {
	if s.poolSource(i) == v1alpha1.DemandSourceWebhook {
		return []string{"self-hosted", name}
	}
	return []string{name}
}

// RestartReport is the controller's restart in the middle of a fleet run: the old
// process signaled, a new one started. The simulated controller runs alone, without
// leader election: it leads from the moment it is ready.
type RestartReport struct {
	Signal string `json:"signal"`
	// Pools is how many pools hold a scale-set session; Open how many of them had a
	// session opened by the new process when the wait ended.
	Pools int `json:"pools"`
	Open  int `json:"open"`
	// DownSeconds is from the signal to the new process ready; SessionsSeconds from the
	// new process ready (its leadership) to every session open in it, nil if not within
	// sessionsWait; StatusSeconds from the new process ready to every pool's status
	// naming its new session (status.scaleSet.sessionID, which a successor closes), nil
	// if not within statusWait. The burst starts after both.
	DownSeconds     float64  `json:"down_seconds"`
	SessionsSeconds *float64 `json:"sessions_seconds"`
	StatusSeconds   *float64 `json:"status_seconds"`

	at, readyAt, openAt time.Time
}

// statusWait bounds the wait for the pools' statuses to name their new sessions.
const statusWait = 2 * time.Minute

// restartController signals the running controller, starts a new one and waits until
// every scale-set pool has a session opened by it (named by its POD_NAME).
func restartController(ctx context.Context, w *world, sc Scenario, out io.Writer) (*RestartReport, error) {
	sig := syscall.SIGKILL
	if sc.Fleet.Restart == "TERM" {
		sig = syscall.SIGTERM
	}
	names := sc.sessionPools()
	before, err := recordedSessions(ctx, w.cl.Client)
	if err != nil {
		return nil, err
	}
	r := &RestartReport{Signal: sc.Fleet.Restart, Pools: len(names), at: time.Now()}
	fmt.Fprintf(out, "Restarting the controller (SIG%s)\n", sc.Fleet.Restart)
	if _, err := w.ctrl.Kill(ctx, sig); err != nil {
		return nil, err
	}
	pid, err := w.ctrl.Start(ctx)
	if err != nil {
		return nil, err
	}
	r.readyAt = time.Now()
	r.DownSeconds = round1(r.readyAt.Sub(r.at).Seconds())
	owner := w.ctrl.owner()
	fmt.Fprintf(out, "Controller restarted (pid %d, ready %.1fs after the signal); waiting for its %d sessions\n", pid, r.DownSeconds, len(names))
	deadline := r.readyAt.Add(sessionsWait)
	lastSaid := r.readyAt
	for {
		r.Open = sessionsOwnedBy(w.sim.ScaleSets(), names, owner)
		if r.Open == len(names) {
			r.openAt = time.Now()
			secs := round1(r.openAt.Sub(r.readyAt).Seconds())
			r.SessionsSeconds = &secs
			fmt.Fprintf(out, "All %d sessions open in the new controller %.1fs after it was ready\n", r.Open, secs)
			return r, waitSessionsRecorded(ctx, w.cl.Client, names, before, r, out)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(out, "Only %d of %d sessions open in the new controller after %s; going on\n", r.Open, len(names), sessionsWait)
			return r, ctx.Err()
		}
		if time.Since(lastSaid) >= 5*time.Second {
			fmt.Fprintf(out, "  sessions open in the new controller: %d of %d\n", r.Open, len(names))
			lastSaid = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// recordedSessions are the session ids the pools' statuses name, by pool.
func recordedSessions(ctx context.Context, c client.Client) (map[string]string, error) {
	var pools v1alpha1.RunnerPoolList
	if err := c.List(ctx, &pools, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("reading the pools' sessions: %w", err)
	}
	out := map[string]string{}
	for _, p := range pools.Items {
		if ss := p.Status.ScaleSet; ss != nil {
			out[p.Name] = ss.SessionID
		}
	}
	return out, nil
}

// waitSessionsRecorded waits until every pool of names has a status naming a session
// other than the one it named before the restart, or statusWait, and records when.
func waitSessionsRecorded(ctx context.Context, c client.Client, names []string, before map[string]string, r *RestartReport, out io.Writer) error {
	deadline := time.Now().Add(statusWait)
	for {
		now, err := recordedSessions(ctx, c)
		if err != nil {
			return err
		}
		recorded := 0
		for _, name := range names {
			if id := now[name]; id != "" && id != before[name] {
				recorded++
			}
		}
		if recorded == len(names) {
			secs := round1(time.Since(r.readyAt).Seconds())
			r.StatusSeconds = &secs
			fmt.Fprintf(out, "Every pool's status names its new session %.1fs after the new controller was ready\n", secs)
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(out, "Only %d of %d pools' statuses name their new session after %s; going on\n", recorded, len(names), statusWait)
			return ctx.Err()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// sessionsOwnedBy counts the scale sets named in names whose live session owner holds.
func sessionsOwnedBy(sets []simgithub.ScaleSet, names []string, owner string) int {
	open := 0
	for _, ss := range sets {
		if ss.Session == owner && slices.Contains(names, ss.Name) {
			open++
		}
	}
	return open
}

// poolPlatforms counts the pools by the platform their status records: "linux/arm64
// (Template)".
func poolPlatforms(ctx context.Context, c client.Client) map[string]int {
	var pools v1alpha1.RunnerPoolList
	if err := c.List(ctx, &pools, client.InNamespace(namespace)); err != nil {
		return nil
	}
	out := map[string]int{}
	for _, p := range pools.Items {
		key := "none"
		if pl := p.Status.Platform; pl != nil {
			key = fmt.Sprintf("%s/%s (%s)", pl.OS, pl.Arch, pl.Source)
		}
		out[key]++
	}
	return out
}
