package run

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/api/v1alpha1"
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
	wl := sc.workload()
	if len(wl.spread) != 50 {
		t.Fatalf("the burst is spread over %d pools, want 50", len(wl.spread))
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
		name string
		f    FleetSpec
		want string
	}{
		{name: "no credentials", f: FleetSpec{Credentials: 0}, want: "credentials must be at least 1"},
		{name: "an architecture GitHub has no label for", f: FleetSpec{Credentials: 1, NodeArchs: []string{"riscv64"}}, want: `"riscv64" has no runner label`},
		{name: "a restart by another signal", f: FleetSpec{Credentials: 1, Restart: "HUP"}, want: "restart must be KILL or TERM"},
	} {
		sc := Scenarios["fleet"]
		sc.Fleet = &tt.f
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
	a := kubeAudit{requests: map[string]int64{}, collector: map[string]int64{}, poolStatusWrites: map[string][]time.Time{}}
	add := func(at time.Time, user, verb, res string, n int) {
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
	f := fleetReport(sc, in, &Report{KubeAPI: a.kubeAPI(2, 8, t0, t0.Add(time.Minute))})
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
	}
	want := map[string]any{
		"nodes": map[string]int{"amd64": 5, "arm64": 5}, "pools": "6 scale set, 2 webhook, 2 credentials",
		"node reads": map[string]int64{"watch nodes": 1, "list nodes": 1}, "node lists": int64(1), "secret reads": int64(3),
		"startup": map[string]float64{"patch runnerpools": 1, "patch runnerpools/status": 2},
		"idle":    map[string]float64{"patch runnerpools/status": 0.063}, "idle status per 10 min": 0.625, // 1 write, 8 pools, 2 minutes
		"restart":      map[string]float64{"patch runnerpools/status": 1},
		"burst":        "4 pools (3 scale set, 1 webhook), 2 jobs",
		"burst writes": map[string]int64{"create pods": 3, "collector delete pods": 1}, "writes per job": 2.0,
		"pickup p99": map[v1alpha1.DemandSource]float64{v1alpha1.DemandSourceScaleSet: 1, v1alpha1.DemandSourceWebhook: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fleet report (-want +got):\n%s", diff)
	}
}

// The fleet's targets are judged on its phases' figures, its pickup against
// burst-scaleset's of the same comparison; a restart whose sessions never all opened
// counts as the wait's bound, not as a small number.
func TestFleetTargets(t *testing.T) {
	secs := func(x float64) *float64 { return &x }
	fleet := func() *Report {
		return &Report{Scenario: "fleet", DemandSource: v1alpha1.DemandSourceScaleSet, JobsTotal: 500,
			PickupSeconds: Quantiles{P99: 10}, Controller: Controller{PeakRSSBytes: 120 << 20, Processes: 2},
			KubeAPI: &KubeAPI{WorkloadWritesPerJob: 6.8},
			Fleet: &FleetReport{Nodes: 1000, NodeListCalls: 1, IdlePoolStatusWritesPer10Minutes: 0.05,
				Restart: &RestartReport{SessionsSeconds: secs(12)}},
		}
	}
	single := FiguresOf(&Report{Scenario: "burst-scaleset", JobsTotal: 500, PickupSeconds: Quantiles{P99: 9.5}})
	verdicts := func(r *Report) map[string]bool {
		out := map[string]bool{}
		for _, v := range Judge("fleet", FiguresOf(r), map[string]Figures{"burst-scaleset": single}) {
			out[v.Target.Figure] = v.Met
		}
		return out
	}
	all := map[string]bool{"jobs never picked up": true, "left over": true, "pickup p99 (s)": true,
		"writes per job from the workload's start": true, "controller peak RSS (MiB)": true, "fleet: node list calls": true,
		"fleet: restart to all sessions open (s)": true, "fleet: idle pool status writes per pool per 10 min": true}
	if diff := cmp.Diff(all, verdicts(fleet())); diff != "" {
		t.Errorf("a fleet within its targets (-want +got):\n%s", diff)
	}
	r := fleet()
	r.PickupSeconds.P99 = 10.6 // more than 1.1 × 9.5
	r.Fleet.Restart.SessionsSeconds = nil
	r.Fleet.NodeListCalls = 200 // a list per pool
	r.Controller.PeakRSSBytes = 200 << 20
	want := map[string]bool{}
	for k, v := range all {
		want[k] = v
	}
	for _, k := range []string{"pickup p99 (s)", "fleet: restart to all sessions open (s)", "fleet: node list calls", "controller peak RSS (MiB)"} {
		want[k] = false
	}
	if diff := cmp.Diff(want, verdicts(r)); diff != "" {
		t.Errorf("a fleet missing targets (-want +got):\n%s", diff)
	}
}
