package run

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// The fleet's pools are of both demand sources, spread over its credentials and pinned
// three ways, each with its name as its label; its burst names each pool its own way (a
// scale set by name, a webhook pool by its label), and only the scale-set pools wait
// for a session.
func TestFleetPools(t *testing.T) {
	sc := Scenarios["fleet"]
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	pools := newPools(sc, "http://sim")
	type shape struct{ Source, Credentials, Pinned string }
	count := map[shape]int{}
	for _, p := range pools {
		if diff := cmp.Diff([]string{p.Name}, p.Spec.Labels); diff != "" {
			t.Errorf("pool %s's labels (-want +got):\n%s", p.Name, diff)
		}
		pinned := "nothing"
		if os, arch := p.Spec.TemplatePlatform(); os != "" || arch != "" {
			pinned = os + "/" + arch
		}
		count[shape{string(p.Spec.Demand.Source), p.Spec.GitHub.CredentialsSecretRef.Name, pinned}]++
	}
	bySource, byCreds, byPin := map[string]int{}, map[string]int{}, map[string]int{}
	for s, n := range count {
		bySource[s.Source] += n
		byCreds[s.Credentials] += n
		byPin[s.Pinned] += n
	}
	want := []map[string]int{
		{"ScaleSet": 150, "Webhook": 50},
		{"github-creds-1": 40, "github-creds-2": 40, "github-creds-3": 40, "github-creds-4": 40, "github-creds-5": 40},
		{"nothing": 67, "linux/amd64": 67, "/arm64": 66},
	}
	if diff := cmp.Diff(want, []map[string]int{bySource, byCreds, byPin}); diff != "" {
		t.Errorf("the fleet's pools by demand source, credentials and pinning (-want +got):\n%s", diff)
	}
	// Every source meets every credentials Secret and every pinning.
	for _, src := range []string{"ScaleSet", "Webhook"} {
		for _, pin := range []string{"nothing", "linux/amd64", "/arm64"} {
			n := 0
			for s, c := range count {
				if s.Source == src && s.Pinned == pin {
					n += c
				}
			}
			if n == 0 {
				t.Errorf("no %s pool pinned to %s", src, pin)
			}
		}
	}
	if n := len(sc.sessionPools()); n != 150 {
		t.Errorf("%d pools wait for a session, want the 150 scale-set pools", n)
	}
	tokens := map[string]bool{}
	for _, c := range sc.credentials() {
		tokens[c.token] = true
	}
	if len(tokens) != 5 {
		t.Errorf("%d distinct tokens, want one per credentials Secret (5)", len(tokens))
	}
	// The single-pool burst's pool is one of the 200, a scale-set pool outside the burst,
	// that may run the whole burst at once; every other pool keeps the fleet's 20.
	i, name := sc.singlePool()
	maxRunners := map[string]int32{}
	for _, p := range pools {
		if p.Spec.MaxRunners != sc.MaxRunners {
			maxRunners[p.Name] = p.Spec.MaxRunners
		}
	}
	if diff := cmp.Diff(map[string]int32{"linux-199": 500}, maxRunners); diff != "" {
		t.Errorf("pools whose maxRunners is not the fleet's (-want +got):\n%s", diff)
	}
	if i != 198 || name != "linux-199" || i < sc.BurstPools || pools[i].Spec.Demand.Source != v1alpha1.DemandSourceScaleSet {
		t.Errorf("single pool %d %s (%s), want 198 linux-199, a scale-set pool outside the burst's first %d", i, name, pools[i].Spec.Demand.Source, sc.BurstPools)
	}
	wl := sc.workload()
	if len(wl.spread) != 50 {
		t.Fatalf("the burst is spread over %d pools, want 50", len(wl.spread))
	}
	// The single-pool burst is the burst — as many jobs of the same template — with every
	// job naming that pool.
	single := sc.singlePoolWorkload()
	if diff := cmp.Diff([][]string{{"linux-199"}}, single.spread); diff != "" {
		t.Errorf("the single-pool burst's jobs' labels (-want +got):\n%s", diff)
	}
	single.spread = wl.spread
	if diff := cmp.Diff(wl, single, cmp.AllowUnexported(workload{})); diff != "" {
		t.Errorf("the single-pool burst differs from the burst beyond its labels (-want +got):\n%s", diff)
	}
	for i, labels := range wl.spread {
		want := []string{pools[i].Name}
		if pools[i].Spec.Demand.Source == v1alpha1.DemandSourceWebhook {
			want = []string{"self-hosted", pools[i].Name}
		}
		if diff := cmp.Diff(want, labels); diff != "" {
			t.Errorf("the burst's jobs for %s (-want +got):\n%s", pools[i].Name, diff)
		}
	}
}

func TestFleetValidate(t *testing.T) {
	for _, tt := range []struct {
		name       string
		f          FleetSpec
		burstPools int
		want       string
	}{
		{name: "no credentials", f: FleetSpec{Credentials: 0}, want: "credentials must be at least 1"},
		{name: "an architecture GitHub has no label for", f: FleetSpec{Credentials: 1, NodeArchs: []string{"riscv64"}}, want: `"riscv64" has no runner label`},
		{name: "a restart by another signal", f: FleetSpec{Credentials: 1, Restart: "HUP"}, want: "restart must be KILL or TERM"},
		{name: "a single-pool burst with every pool in the burst", f: FleetSpec{Credentials: 1, WebhookEvery: 4, SinglePoolBurst: true}, burstPools: 200,
			want: "single_pool_burst repeats the burst in a scale-set pool outside the burst's pools"},
		{name: "a single-pool burst with only webhook pools outside the burst", f: FleetSpec{Credentials: 1, WebhookEvery: 1, SinglePoolBurst: true},
			want: "single_pool_burst repeats the burst in a scale-set pool outside the burst's pools"},
	} {
		sc := Scenarios["fleet"]
		sc.Fleet = &tt.f
		if tt.burstPools > 0 {
			sc.BurstPools = tt.burstPools
		}
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}

// The fleet report splits the audit log by phase — start-up, idle window, restart,
// burst — per pool and minute, counts the node and Secret reads, and the burst's pickup
// by demand source.
func TestFleetReport(t *testing.T) {
	sc := Scenarios["fleet"]
	sc.Pools, sc.BurstPools, sc.Nodes = 8, 4, 10
	sc.Fleet = &FleetSpec{WebhookEvery: 4, Credentials: 2, NodeArchs: []string{"amd64", "arm64"}, Restart: "KILL"}
	launched := t0.Add(-10 * time.Minute)
	idle := &IdleReport{from: t0.Add(-8 * time.Minute), to: t0.Add(-6 * time.Minute)}
	restart := &RestartReport{Signal: "KILL", Pools: 6, Open: 6, at: t0.Add(-5 * time.Minute)}
	a := newKubeAudit()
	add := func(at time.Time, user, verb, res string, n int) { addAudit(&a, at, user, verb, res, n) }
	add(launched.Add(time.Second), controllerUser, "watch", "nodes", 1)
	add(launched.Add(time.Second), controllerUser, "get", "secrets", 2)
	add(launched.Add(2*time.Second), controllerUser, "patch", "runnerpools", 8)
	add(launched.Add(3*time.Second), controllerUser, "patch", "runnerpools/status", 16)
	add(idle.from.Add(time.Minute), controllerUser, "patch", "runnerpools/status", 1)
	add(idle.from.Add(time.Minute), controllerUser, "get", "secrets", 1)
	add(restart.at.Add(time.Second), controllerUser, "list", "nodes", 1)
	add(restart.at.Add(2*time.Second), controllerUser, "patch", "runnerpools/status", 8)
	add(t0.Add(time.Second), controllerUser, "create", "pods", 3)
	add(t0.Add(time.Minute), cluster.CollectorUser, "delete", "pods", 1)
	in := reportInputs{start: t0, launched: launched, idle: idle, restart: restart, audit: a,
		platforms: map[string]int{"linux/amd64 (Nodes)": 8},
		jobs:      []simgithub.Job{job(1, 0, 1, 2, "success"), job(2, 0, 3, 4, "success")},
	}
	in.jobs[0].Labels, in.jobs[1].Labels = []string{"linux-001"}, []string{"self-hosted", "linux-004"}
	in.events = []agent.Event{{Pod: "linux-001-a", Kind: agent.EventCreated, At: at(0.5)}, {Pod: "linux-001-a", Kind: agent.EventRunning, At: at(3)}}
	// The single-pool burst, 10 minutes on: its audit log is its own.
	in.single = &singlePoolRun{pool: "linux-007", maxRunners: 500, start: at(600), finished: true, drained: true, drainedAt: at(620),
		jobs: []simgithub.Job{job(3, 600, 601, 611, "success"), job(4, 600, 602, 612, "success")}, audit: newKubeAudit()}
	f := fleetReport(sc, in, &Report{PickupSeconds: Quantiles{P99: 3}, KubeAPI: a.kubeAPI(2, 8, t0, t0.Add(time.Minute))})
	got := map[string]any{
		"nodes": f.NodesByArch, "pools": fmt.Sprintf("%d scale set, %d webhook, %d credentials", f.ScaleSetPools, f.WebhookPools, f.Credentials),
		"node reads": f.NodeReads, "node lists": f.NodeListCalls, "secret reads": f.SecretReads,
		"startup": f.StartupWritesPerPool, "idle": f.IdleWritesPerPoolPerMinute, "idle status per 10 min": f.IdlePoolStatusWritesPer10Minutes,
		"restart":      f.RestartWritesPerPool,
		"burst":        fmt.Sprintf("%d pools (%d scale set, %d webhook), %d jobs", f.Burst.Pools, f.Burst.ScaleSetPools, f.Burst.WebhookPools, f.Burst.Jobs),
		"burst writes": f.Burst.Writes, "writes per job": f.Burst.WritesPerJob,
		"pickup p99": map[v1alpha1.DemandSource]float64{
			v1alpha1.DemandSourceScaleSet: f.Burst.PickupByDemandSource[v1alpha1.DemandSourceScaleSet].P99,
			v1alpha1.DemandSourceWebhook:  f.Burst.PickupByDemandSource[v1alpha1.DemandSourceWebhook].P99,
		},
		"pod start":   f.Burst.RunnerPodStart.P99,
		"single pool": fmt.Sprintf("%d jobs into %s, pickup p99 %v", f.SinglePoolBurst.Jobs, f.SinglePoolBurst.Pool, f.SinglePoolBurst.PickupSeconds.P99),
		"ratio":       f.BurstPickupP99OverSinglePool,
	}
	want := map[string]any{
		"nodes": map[string]int{"amd64": 5, "arm64": 5}, "pools": "6 scale set, 2 webhook, 2 credentials",
		"node reads": map[string]int64{"watch nodes": 1, "list nodes": 1}, "node lists": int64(1), "secret reads": int64(3),
		"startup": map[string]float64{"patch runnerpools": 1, "patch runnerpools/status": 2},
		"idle":    map[string]float64{"patch runnerpools/status": 0.063}, "idle status per 10 min": 0.625, // 1 write, 8 pools, 2 minutes
		"restart":      map[string]float64{"patch runnerpools/status": 1},
		"burst":        "4 pools (3 scale set, 1 webhook), 2 jobs",
		"burst writes": map[string]int64{"create pods": 3, "collector delete pods": 1}, "writes per job": 2.0,
		"pickup p99":  map[v1alpha1.DemandSource]float64{v1alpha1.DemandSourceScaleSet: 1, v1alpha1.DemandSourceWebhook: 3},
		"pod start":   2.5,
		"single pool": "2 jobs into linux-007, pickup p99 2", "ratio": val(1.5), // the burst's 3 s over its 2 s
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fleet report (-want +got):\n%s", diff)
	}
}

// The fleet's targets are judged on its phases' figures, its pickup against its own
// single-pool burst's (not burst-scaleset's, even when compared with it); a restart
// whose sessions never all opened counts as the wait's bound, not as a small number,
// and a single-pool burst that did not end clean leaves the ratio unmeasured: missed.
func TestFleetTargets(t *testing.T) {
	secs := func(x float64) *float64 { return &x }
	fleet := func() *Report {
		return &Report{Scenario: "fleet", DemandSource: v1alpha1.DemandSourceScaleSet, JobsTotal: 500,
			PickupSeconds: Quantiles{P99: 10}, Controller: Controller{PeakRSSBytes: 120 << 20, Processes: 2},
			KubeAPI: &KubeAPI{WorkloadWritesPerJob: 6.8},
			Fleet: &FleetReport{Nodes: 1000, NodeListCalls: 1, IdlePoolStatusWritesPer10Minutes: 0.05,
				Restart:                      &RestartReport{SessionsSeconds: secs(12)},
				SinglePoolBurst:              &SinglePoolBurst{Jobs: 500, Finished: true, Drained: true, PickupSeconds: Quantiles{P99: 9.5}, WritesPerJob: 6.5},
				BurstPickupP99OverSinglePool: secs(1.05)},
		}
	}
	// burst-scaleset's pickup, a third of the fleet's: no target of the fleet's is on it.
	other := FiguresOf(&Report{Scenario: "burst-scaleset", JobsTotal: 500, PickupSeconds: Quantiles{P99: 3}})
	verdicts := func(r *Report) map[string]bool {
		out := map[string]bool{}
		for _, v := range Judge("fleet", FiguresOf(r), map[string]Figures{"burst-scaleset": other}) {
			out[v.Target.Figure] = v.Met
		}
		return out
	}
	all := map[string]bool{"jobs never picked up": true, "left over": true, "fleet: burst pickup p99 / single pool's": true,
		"writes per job from the workload's start": true, "controller peak RSS (MiB)": true, "fleet: node list calls": true,
		"fleet: restart to all sessions open (s)": true, "fleet: idle pool status writes per pool per 10 min": true}
	if diff := cmp.Diff(all, verdicts(fleet())); diff != "" {
		t.Errorf("a fleet within its targets (-want +got):\n%s", diff)
	}
	missing := func(figures ...string) map[string]bool {
		want := maps.Clone(all)
		for _, k := range figures {
			want[k] = false
		}
		return want
	}
	for _, tt := range []struct {
		name   string
		change func(r *Report)
		want   map[string]bool
	}{
		{name: "slower than its single pool, a restart never done, a list per pool, too much memory", change: func(r *Report) {
			r.Fleet.BurstPickupP99OverSinglePool = secs(1.12)
			r.Fleet.Restart.SessionsSeconds = nil
			r.Fleet.NodeListCalls = 200
			r.Controller.PeakRSSBytes = 200 << 20
		}, want: missing("fleet: burst pickup p99 / single pool's", "fleet: restart to all sessions open (s)", "fleet: node list calls", "controller peak RSS (MiB)")},
		{name: "at the bound", change: func(r *Report) { r.Fleet.BurstPickupP99OverSinglePool = secs(1.1) }, want: all},
		{name: "no single-pool burst", change: func(r *Report) { r.Fleet.SinglePoolBurst, r.Fleet.BurstPickupP99OverSinglePool = nil, nil },
			want: missing("fleet: burst pickup p99 / single pool's")},
	} {
		r := fleet()
		tt.change(r)
		if diff := cmp.Diff(tt.want, verdicts(r)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	got := FiguresOf(fleet())
	if diff := cmp.Diff([]*float64{secs(9.5), secs(1.05), secs(6.5)}, []*float64{got.SinglePoolPickupP99, got.PickupP99OverSinglePool, got.SinglePoolWritesPerJob}); diff != "" {
		t.Errorf("the single-pool burst's figures (-want +got):\n%s", diff)
	}
}

// The single-pool burst is read as the fleet burst is: its pickup is each job's queued
// to started, its writes every write on the controller's behalf from its start, per
// job; the fleet burst's pickup p99 is set over its only when it ended clean.
func TestSinglePoolBurst(t *testing.T) {
	start := at(100)
	audit := newKubeAudit()
	write := func(s float64, user, verb, res string, n int) { addAudit(&audit, at(s), user, verb, res, n) }
	write(101, controllerUser, "create", "pods", 4)
	write(101, controllerUser, "create", "runners", 4)
	write(130, cluster.CollectorUser, "delete", "pods", 4)
	// Jobs queued at 100 s, picked up 1, 2, 3 and 4 s later.
	jobs := func() []simgithub.Job {
		return []simgithub.Job{job(1, 100, 101, 111, "success"), job(2, 100, 102, 112, "success"), job(3, 100, 103, 113, "success"), job(4, 100, 104, 114, "success")}
	}
	clean := func() *singlePoolRun {
		return &singlePoolRun{pool: "linux-199", maxRunners: 500, start: start, jobs: jobs(), finished: true, drained: true,
			lastJobDone: at(114), drainedAt: at(120), audit: audit,
			events: []agent.Event{{Pod: "linux-199-a", Kind: agent.EventCreated, At: at(100.5)}, {Pod: "linux-199-b", Kind: agent.EventCreated, At: at(100.5)},
				{Pod: "linux-199-a", Kind: agent.EventRunning, At: at(101.5)}, {Pod: "linux-199-b", Kind: agent.EventRunning, At: at(102.5)}},
			runnersSeen: []time.Time{at(100.25), at(100.25), at(100.25), at(100.25)}}
	}
	type result struct {
		Burst *SinglePoolBurst
		Ratio *float64
	}
	cleanBurst := func() *SinglePoolBurst {
		return &SinglePoolBurst{Pool: "linux-199", MaxRunners: 500, Jobs: 4, Finished: true, Drained: true, RunnersCreated: 2,
			PickupSeconds: Quantiles{P50: 2, P95: 4, P99: 4, Max: 4}, ReactionSeconds: Quantiles{P50: 0.5, P95: 0.5, P99: 0.5, Max: 0.5},
			PoolReaction: Quantiles{P50: 0.25, P95: 0.25, P99: 0.25, Max: 0.25}, RunnerPodStart: Quantiles{P50: 1, P95: 2, P99: 2, Max: 2},
			Writes: map[string]int64{"create pods": 4, "create runners": 4, "collector delete pods": 4}, WritesPerJob: 3, WallSeconds: 20}
	}
	for _, tt := range []struct {
		name   string
		change func(*singlePoolRun)
		want   func(*SinglePoolBurst)
		ratio  *float64
	}{
		{name: "clean: the fleet's p99 of 5 s over its 4 s", change: func(*singlePoolRun) {}, want: func(*SinglePoolBurst) {}, ratio: val(1.25)},
		{name: "a job never picked up", change: func(r *singlePoolRun) {
			r.jobs[3] = job(4, 100, -1, -1, "")
			r.finished = false
		}, want: func(b *SinglePoolBurst) {
			b.JobsNeverPickedUp, b.Finished, b.PickupSeconds = 1, false, Quantiles{P50: 2, P95: 3, P99: 3, Max: 3}
		}},
		{name: "its runners not all gone", change: func(r *singlePoolRun) { r.drained = false }, want: func(b *SinglePoolBurst) { b.Drained = false }},
		{name: "a busy runner killed", change: func(r *singlePoolRun) {
			r.events = append(r.events, agent.Event{Pod: "linux-199-a", Kind: agent.EventKilled, Job: 1, Cause: agent.CausePodDeleted, At: at(105)})
		}, want: func(b *SinglePoolBurst) { b.BusyRunnersKilled = 1 }},
	} {
		run := clean()
		tt.change(run)
		b := singlePoolBurst(run, 200)
		want := cleanBurst()
		tt.want(want)
		if diff := cmp.Diff(result{want, tt.ratio}, result{b, pickupOverSinglePool(5, b)}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// addAudit adds to a n requests of user's, verb on res ("runnerpools/status") in the
// run's namespace, answered at at.
func addAudit(a *kubeAudit, at time.Time, user, verb, res string, n int) {
	ev := auditEvent{Verb: verb, StageTimestamp: at}
	ev.User.Username = user
	ev.ObjectRef = &struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	}{Namespace: namespace, Name: "linux-001"}
	ev.ObjectRef.Resource, ev.ObjectRef.Subresource, _ = strings.Cut(res, "/")
	for range n {
		a.add(ev)
	}
}
