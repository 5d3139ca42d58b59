package fault

import (
	"context"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

const testToken = "ghp_faulttesttoken0000000000000000000000"

// fakeController records kills and starts; onKill runs while the controller is down.
type fakeController struct {
	pid     int
	signals []syscall.Signal
	onKill  func()
}

func (c *fakeController) Kill(_ context.Context, sig syscall.Signal) (int, error) {
	c.signals = append(c.signals, sig)
	if c.onKill != nil {
		c.onKill()
	}
	return c.pid, nil
}

func (c *fakeController) Start(context.Context) (int, error) {
	c.pid++
	return c.pid, nil
}

// fakeNodes loses nodes; onLose runs as the node is lost.
type fakeNodes struct {
	lost   []string
	onLose func()
}

func (n *fakeNodes) BusiestNode(context.Context) (string, error) { return "node-b", nil }

func (n *fakeNodes) LoseNode(_ context.Context, node, how string) (int, int, error) {
	n.lost = append(n.lost, node+"/"+how)
	if n.onLose != nil {
		n.onLose()
	}
	return 5, 2, nil
}

// newSim is a simulator with org acme, repo acme/app and an org hook to a receiver.
func newSim(t *testing.T) (*simgithub.Sim, *httptest.Server) {
	t.Helper()
	sim := simgithub.New(simgithub.Options{
		PATs:       []simgithub.PAT{{Token: testToken, Login: "t", Scopes: []string{"repo", "admin:org"}}},
		RateLimits: simgithub.RateLimits{Disabled: true},
	})
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	t.Cleanup(hook.Close)
	if _, err := sim.CreateOrg(simgithub.OrgSpec{Login: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CreateHook(simgithub.HookSpec{Org: "acme", URL: hook.URL, Secret: "s", Events: []string{"workflow_job"}}); err != nil {
		t.Fatal(err)
	}
	return sim, srv
}

func get(t *testing.T, srv *httptest.Server, path string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
	req.Header.Set("Authorization", "token "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRunInjectsEveryKind(t *testing.T) {
	sim, srv := newSim(t)
	baseFaults, baseLimits := sim.Faults(), sim.RateLimits()
	sched := Schedule{Seed: 3, Steps: []Step{
		{Name: "drop", At: 0, For: d("400ms"), WebhookDrop: &WebhookDrop{Rate: 1}},
		{Name: "errors", At: 0, For: d("400ms"), APIErrors: &APIErrors{Rate: 1, Routes: []string{"GET /orgs/{org}/actions/runners"}}},
		{Name: "kill", At: d("100ms"), For: d("100ms"), ControllerKill: &ControllerKill{}},
		{Name: "limit", At: d("500ms"), For: d("400ms"), RateLimit: &RateLimit{Kind: RateLimitPrimary, Limit: 2}},
		{Name: "node", At: d("600ms"), NodeLost: &NodeLost{}},
	}}
	if err := sched.Validate(); err != nil {
		t.Fatal(err)
	}
	var codesWhileDown, codesWhileLimited []int
	// The fakes act at the steps' own times, so the faults in force are known.
	ctrl := &fakeController{pid: 100, onKill: func() {
		codesWhileDown = append(codesWhileDown, get(t, srv, "/orgs/acme/actions/runners"), get(t, srv, "/repos/acme/app/actions/runs"))
		if _, err := sim.QueueJob(simgithub.JobSpec{Repo: "acme/app"}); err != nil {
			t.Error(err)
		}
		if err := sim.FlushWebhooks(t.Context()); err != nil {
			t.Error(err)
		}
	}}
	nodes := &fakeNodes{onLose: func() {
		for range 4 {
			codesWhileLimited = append(codesWhileLimited, get(t, srv, "/orgs/acme/actions/runners"))
		}
	}}

	got := Run(t.Context(), sched, time.Now(), Targets{GitHub: sim, Controller: ctrl, Nodes: nodes})

	if diff := cmp.Diff([]int{503, 200}, codesWhileDown); diff != "" {
		t.Errorf("answers during api_errors on one route (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{200, 200, 403, 403}, codesWhileLimited); diff != "" {
		t.Errorf("answers during a primary limit of 2 (-want +got):\n%s", diff)
	}
	if len(got) != 5 {
		t.Fatalf("got %d injections, want 5", len(got))
	}
	for _, in := range got {
		if !in.Injected || in.Error != "" {
			t.Errorf("step %s: injected %v, error %q", in.Name, in.Injected, in.Error)
		}
	}
	if got[0].WebhooksDropped != 1 {
		t.Errorf("webhooks dropped = %d, want 1 (one job queued while all deliveries dropped)", got[0].WebhooksDropped)
	}
	if got[1].ErrorAnswers != 1 {
		t.Errorf("error answers = %d, want 1", got[1].ErrorAnswers)
	}
	if got[3].RateLimitedAnswers != 2 {
		t.Errorf("rate-limited answers = %d, want 2", got[3].RateLimitedAnswers)
	}
	if k := got[2]; k.KilledPID != 100 || k.StartedPID != 101 || k.DowntimeSeconds <= 0 || k.EndSeconds < k.StartSeconds {
		t.Errorf("controller_kill injection %+v: want pid 100 killed, 101 started, some downtime", k)
	}
	if diff := cmp.Diff([]syscall.Signal{syscall.SIGKILL}, ctrl.signals); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	if n := got[4]; n.Node != "node-b" || n.PodsOnNode != 5 || n.BusyPodsOnNode != 2 || len(nodes.lost) != 1 || nodes.lost[0] != "node-b/heartbeat" {
		t.Errorf("node_lost injection %+v, nodes lost %v: want the busiest node lost by heartbeat", n, nodes.lost)
	}
	for i, in := range got {
		if in.StartSeconds < time.Duration(sched.Steps[i].At).Seconds()-0.05 {
			t.Errorf("step %s started at %.2fs, before its time", in.Name, in.StartSeconds)
		}
	}
	if diff := cmp.Diff(baseFaults, sim.Faults()); diff != "" {
		t.Errorf("faults not restored (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(baseLimits, sim.RateLimits()); diff != "" {
		t.Errorf("rate limits not restored (-want +got):\n%s", diff)
	}
}

func TestRunStopsWithContextAndRestores(t *testing.T) {
	sim, _ := newSim(t)
	base := sim.Faults()
	sched := Schedule{Steps: []Step{
		{At: 0, For: d("1h"), WebhookDrop: &WebhookDrop{Rate: 0.5}},
		{At: d("1h"), NodeLost: &NodeLost{}},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	nodes := &fakeNodes{}
	got := Run(ctx, sched, time.Now(), Targets{GitHub: sim, Nodes: nodes})
	if !got[0].Injected || got[1].Injected || len(nodes.lost) != 0 {
		t.Errorf("injections %+v, nodes lost %v: want the first step only", got, nodes.lost)
	}
	if diff := cmp.Diff(base, sim.Faults()); diff != "" {
		t.Errorf("faults not restored after the run ended (-want +got):\n%s", diff)
	}
}

func TestRunReportsMissingTargets(t *testing.T) {
	sched := Schedule{Steps: []Step{
		{At: 0, ControllerKill: &ControllerKill{}},
		{At: 0, For: d("10ms"), WebhookDrop: &WebhookDrop{Rate: 1}},
		{At: 0, NodeLost: &NodeLost{Node: "n"}},
	}}
	for _, in := range Run(t.Context(), sched, time.Now(), Targets{}) {
		if in.Injected || in.Error == "" {
			t.Errorf("step %s without a target: injected %v, error %q", in.Name, in.Injected, in.Error)
		}
	}
}
