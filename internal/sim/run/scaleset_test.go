package run

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/trace"
)

func sampleTrace(t *testing.T) trace.Trace {
	t.Helper()
	f, err := os.Open("testdata/sample-trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// burst-scaleset and steady-scaleset are burst and steady but for the demand source.
func TestScaleSetScenariosAreDerived(t *testing.T) {
	for _, name := range []string{"burst", "steady"} {
		sc, v := Scenarios[name], Scenarios[name+"-scaleset"]
		if v.DemandSource != v1alpha1.DemandSourceScaleSet || v.demandSource() != v1alpha1.DemandSourceScaleSet {
			t.Errorf("%s-scaleset: demand source %q, want ScaleSet", name, v.DemandSource)
		}
		if !strings.HasPrefix(v.Description, sc.Description) || !strings.Contains(v.Description, "scale set") {
			t.Errorf("%s-scaleset: description %q does not extend %q", name, v.Description, sc.Description)
		}
		v.Name, v.Description, v.DemandSource = sc.Name, sc.Description, sc.DemandSource
		if diff := cmp.Diff(sc, v); diff != "" {
			t.Errorf("%s-scaleset differs from %s in more than its demand source (-%s +%s-scaleset):\n%s", name, name, name, name, diff)
		}
		if sc.demandSource() != v1alpha1.DemandSourceWebhook {
			t.Errorf("%s: demand source %s, want Webhook", name, sc.demandSource())
		}
	}
	if Scenarios["burst"].hasFloor() == false || Scenarios["burst-scaleset"].hasFloor() {
		t.Error("burst must measure the floor and burst-scaleset must not (the oracle registers classic runners)")
	}
}

func TestWithDemandSource(t *testing.T) {
	burst, derived := Scenarios["burst"], Scenarios["burst-scaleset"]
	tr := TraceScenario(sampleTrace(t), "sample-trace.jsonl", 4)
	tests := []struct {
		name     string
		in       Scenario
		src      v1alpha1.DemandSource
		wantName string
		wantSrc  v1alpha1.DemandSource
	}{
		{"same source: unchanged", burst, v1alpha1.DemandSourceWebhook, "burst", v1alpha1.DemandSourceWebhook},
		{"to ScaleSet: the built-in variant", burst, v1alpha1.DemandSourceScaleSet, "burst-scaleset", v1alpha1.DemandSourceScaleSet},
		{"a variant back to Webhook: the scenario", derived, v1alpha1.DemandSourceWebhook, "burst", v1alpha1.DemandSourceWebhook},
		{"a variant to its own source", derived, v1alpha1.DemandSourceScaleSet, "burst-scaleset", v1alpha1.DemandSourceScaleSet},
		{"a trace", tr, v1alpha1.DemandSourceScaleSet, "trace-scaleset", v1alpha1.DemandSourceScaleSet},
		{"a scale-set scenario of its own to Webhook", Scenario{Name: "mine", DemandSource: v1alpha1.DemandSourceScaleSet}, v1alpha1.DemandSourceWebhook, "mine-webhook", v1alpha1.DemandSourceWebhook},
	}
	for _, tc := range tests {
		got := WithDemandSource(tc.in, tc.src)
		if got.Name != tc.wantName || got.demandSource() != tc.wantSrc {
			t.Errorf("%s: %s, %s; want %s, %s", tc.name, got.Name, got.demandSource(), tc.wantName, tc.wantSrc)
		}
		if got := newPool(got, "http://sim", poolName).Spec.Demand.Source; got != tc.wantSrc && (got != "" || tc.wantSrc != v1alpha1.DemandSourceWebhook) {
			t.Errorf("%s: the pool's spec.demand.source is %q, want %s", tc.name, got, tc.wantSrc)
		}
	}
	// Derived with the flag, burst is the built-in burst-scaleset, and back again burst.
	if diff := cmp.Diff(derived, WithDemandSource(burst, v1alpha1.DemandSourceScaleSet)); diff != "" {
		t.Errorf("burst on ScaleSet is not burst-scaleset (-want +got):\n%s", diff)
	}
	back := WithDemandSource(derived, v1alpha1.DemandSourceWebhook)
	back.DemandSource = ""
	if diff := cmp.Diff(burst, back); diff != "" {
		t.Errorf("burst-scaleset on Webhook is not burst (-want +got):\n%s", diff)
	}
}

func TestParseDemandSource(t *testing.T) {
	for in, want := range map[string]v1alpha1.DemandSource{
		"Webhook": v1alpha1.DemandSourceWebhook, "webhook": v1alpha1.DemandSourceWebhook,
		"ScaleSet": v1alpha1.DemandSourceScaleSet, "scaleset": v1alpha1.DemandSourceScaleSet, " SCALESET ": v1alpha1.DemandSourceScaleSet,
	} {
		if got, err := ParseDemandSource(in); err != nil || got != want {
			t.Errorf("ParseDemandSource(%q) = %q, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "scale-set", "Webhooks", "RegistrationToken"} {
		if _, err := ParseDemandSource(bad); err == nil || !strings.Contains(err.Error(), "want Webhook or ScaleSet") {
			t.Errorf("ParseDemandSource(%q): err = %v, want one naming Webhook and ScaleSet", bad, err)
		}
	}
	sc := Scenarios["burst"]
	sc.DemandSource = "Poll"
	if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), `demand_source "Poll"`) {
		t.Errorf("a scenario with demand source Poll: Validate() = %v", err)
	}
}

// scaleSetLabels are the labels the controller creates a pool's scale set with: its
// name, then the labels its runners register.
func scaleSetLabels(pool *v1alpha1.RunnerPool) []string {
	return append([]string{pool.ScaleSetName()}, pool.RunnerLabels()...)
}

// Every job any scenario (or the sample trace's replay) queues has its runs-on labels
// among its pool's scale-set labels: on --demand-source ScaleSet, GitHub hands every
// job to the pool's scale set (as the simulator's matchScaleSet does: every label of
// the job, case-insensitively, is one of the scale set's). With many pools, a job fits
// exactly one: the pool its runs-on names.
func TestEveryScenarioJobFitsItsScaleSet(t *testing.T) {
	scenarios := []Scenario{TraceScenario(sampleTrace(t), "sample-trace.jsonl", 1)}
	for _, sc := range Scenarios {
		scenarios = append(scenarios, sc)
	}
	for _, sc := range scenarios {
		sc = WithDemandSource(sc, v1alpha1.DemandSourceScaleSet)
		pools := newPools(sc, "http://sim")
		if len(pools) != sc.pools() {
			t.Errorf("%s: %d pools, want %d", sc.Name, len(pools), sc.pools())
		}
		for i, pool := range pools {
			scaleSet := sc.poolSource(i) == v1alpha1.DemandSourceScaleSet // a fleet's webhook pools: none
			if want := sc.poolNames()[i]; pool.UsesScaleSet() != scaleSet || pool.Name != want || (scaleSet && pool.ScaleSetName() != want) {
				t.Errorf("%s: pool %s uses a scale set %v named %q; want %v, named %s", sc.Name, pool.Name, pool.UsesScaleSet(), pool.ScaleSetName(), scaleSet, want)
			}
		}
		wl := sc.workload()
		jobs := [][]string{wl.job.Labels}
		switch {
		case sc.Trace != nil:
			jobs = nil
			for _, j := range sc.Trace.Jobs {
				jobs = append(jobs, j.Labels)
			}
		case len(wl.spread) > 0:
			jobs = wl.spread
		}
		for _, labels := range jobs {
			var fits []string
			for _, pool := range pools {
				// A webhook pool (of a fleet) takes the jobs its runners' labels cover,
				// as the Router matches them.
				have := pool.RunnerLabels()
				if pool.UsesScaleSet() {
					have = scaleSetLabels(pool)
				}
				if covers(have, labels) {
					fits = append(fits, pool.Name)
				}
			}
			if len(fits) != 1 {
				t.Errorf("%s: a job's runs-on %v fits the pools %v; want exactly one", sc.Name, labels, fits)
			}
		}
	}
}

// covers reports whether every label of a job is one of a scale set's, as GitHub
// compares them (case-insensitively).
func covers(setLabels, jobLabels []string) bool {
	have := map[string]bool{}
	for _, l := range setLabels {
		have[strings.ToLower(l)] = true
	}
	for _, l := range jobLabels {
		if !have[strings.ToLower(l)] {
			return false
		}
	}
	return true
}

// The simulator itself assigns the workload's jobs to the scale set the controller will
// create for the pool: the scale-set scenarios' jobs, a trace's, and a burst spread
// over some of many pools, each job to the pool it names.
func TestSimulatorAssignsTheWorkloadToThePoolsScaleSet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spread := Scenarios["burst-scalesets-50"]
	spread.Pools, spread.BurstPools = 5, 3
	scenarios := []Scenario{
		Scenarios["burst-scaleset"], Scenarios["steady-scaleset"], spread,
		WithDemandSource(TraceScenario(sampleTrace(t), "sample-trace.jsonl", 1e6), v1alpha1.DemandSourceScaleSet),
	}
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			w := &world{}
			defer w.stop()
			if err := w.startGitHub(ctx, sc); err != nil {
				t.Fatal(err)
			}
			pools := newPools(sc, w.simURL)
			c, err := scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
				GitHubConfigURL: pools[0].Spec.GitHub.URL, PersonalAccessToken: simToken,
				SystemInfo: scaleset.SystemInfo{System: "gantry-sim-test"},
			}, scaleset.WithRetryMax(1), scaleset.WithRetryWaitMax(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			g, err := c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
			if err != nil {
				t.Fatalf("runner group: %v", err)
			}
			for _, pool := range pools {
				set := &scaleset.RunnerScaleSet{Name: pool.ScaleSetName(), RunnerGroupID: g.ID}
				for _, l := range scaleSetLabels(pool) {
					set.Labels = append(set.Labels, scaleset.Label{Name: l})
				}
				if _, err := c.CreateRunnerScaleSet(ctx, set); err != nil {
					t.Fatalf("creating the scale set of %s: %v", pool.Name, err)
				}
			}

			wl := sc.workload()
			if wl.trace == nil {
				wl.burst, wl.rate = 20, 0 // the jobs' labels are what matters, not their number
			}
			queued, err := queueWorkload(ctx, w.sim, wl, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{}
			for i, name := range sc.poolNames() {
				switch {
				case len(pools) == 1:
					want[name] = len(queued)
				case i < sc.BurstPools:
					want[name] = (wl.burst - i + sc.BurstPools - 1) / sc.BurstPools // jobs i, i+3, …
				default:
					want[name] = 0
				}
			}
			got := map[string]int{}
			for _, ss := range w.sim.ScaleSets() {
				got[ss.Name] = ss.Assigned
			}
			if diff := cmp.Diff(want, got); diff != "" || len(queued) == 0 {
				t.Errorf("%d jobs queued; jobs assigned per scale set (-want +got):\n%s", len(queued), diff)
			}
		})
	}
}
