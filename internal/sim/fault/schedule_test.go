package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

func d(s string) simgithub.Duration { return D(s) }

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Schedule
		wantErr []string // substrings of the error; nil: no error
	}{
		{
			name: "object with seed and every kind",
			in: `{"seed": 7, "steps": [
				{"name": "drop", "at": "10s", "for": "30s", "webhook_drop": {"rate": 0.3}},
				{"at": "20s", "for": "20s", "api_errors": {"rate": 0.5, "status": 502, "routes": ["GET /orgs/{org}/actions/runners"]}},
				{"at": "40s", "for": "20s", "rate_limit": {"kind": "primary", "limit": 30}},
				{"at": "60s", "for": "20s", "rate_limit": {"kind": "secondary", "points_per_minute": 60, "status": 429}},
				{"at": "50s", "for": "5s", "controller_kill": {}},
				{"at": "90s", "node_lost": {"how": "delete"}}]}`,
			want: Schedule{Seed: 7, Steps: []Step{
				{Name: "drop", At: d("10s"), For: d("30s"), WebhookDrop: &WebhookDrop{Rate: 0.3}},
				{At: d("20s"), For: d("20s"), APIErrors: &APIErrors{Rate: 0.5, Status: 502, Routes: []string{"GET /orgs/{org}/actions/runners"}}},
				{At: d("40s"), For: d("20s"), RateLimit: &RateLimit{Kind: "primary", Limit: 30}},
				{At: d("60s"), For: d("20s"), RateLimit: &RateLimit{Kind: "secondary", PointsPerMinute: 60, Status: 429}},
				{At: d("50s"), For: d("5s"), ControllerKill: &ControllerKill{}},
				{At: d("90s"), NodeLost: &NodeLost{How: "delete"}},
			}},
		},
		{
			name: "a bare list of steps; durations as milliseconds",
			in:   `[{"at": 1500, "for": 2000, "webhook_drop": {"rate": 1}}]`,
			want: Schedule{Steps: []Step{{At: d("1.5s"), For: d("2s"), WebhookDrop: &WebhookDrop{Rate: 1}}}},
		},
		{name: "empty schedule", in: `{"steps": []}`, want: Schedule{Steps: []Step{}}},
		{name: "unknown field", in: `{"steps": [{"at": "1s", "for": "1s", "webhook_dorp": {"rate": 0.5}}]}`, wantErr: []string{"unknown field"}},
		{name: "not JSON", in: `steps: []`, wantErr: []string{"parsing the fault schedule"}},
		{name: "two values", in: `{"steps": []} {}`, wantErr: []string{"more than one JSON value"}},
		{name: "no kind", in: `{"steps": [{"at": "1s"}]}`, wantErr: []string{"step 0", "exactly one of"}},
		{name: "two kinds", in: `{"steps": [{"at": "1s", "for": "1s", "webhook_drop": {"rate": 0.5}, "node_lost": {}}]}`, wantErr: []string{"exactly one of"}},
		{name: "negative at", in: `[{"at": "-1s", "node_lost": {}}]`, wantErr: []string{"at must not be negative"}},
		{name: "drop without for", in: `[{"at": "1s", "webhook_drop": {"rate": 0.5}}]`, wantErr: []string{"for must be positive"}},
		{name: "node loss with for", in: `[{"at": "1s", "for": "1s", "node_lost": {}}]`, wantErr: []string{"instantaneous"}},
		{name: "rate zero", in: `[{"at": "1s", "for": "1s", "webhook_drop": {"rate": 0}}]`, wantErr: []string{"rate must be in (0, 1]"}},
		{name: "rate above one", in: `[{"at": "1s", "for": "1s", "api_errors": {"rate": 1.5}}]`, wantErr: []string{"api_errors.rate"}},
		{name: "client error status", in: `[{"at": "1s", "for": "1s", "api_errors": {"rate": 0.5, "status": 404}}]`, wantErr: []string{"server error"}},
		{name: "bad route", in: `[{"at": "1s", "for": "1s", "api_errors": {"rate": 0.5, "routes": ["generate-jitconfig"]}}]`, wantErr: []string{"is not a route"}},
		{name: "bad rate-limit kind", in: `[{"at": "1s", "for": "1s", "rate_limit": {"kind": "tertiary"}}]`, wantErr: []string{"primary or secondary"}},
		{name: "bad rate-limit status", in: `[{"at": "1s", "for": "1s", "rate_limit": {"kind": "primary", "status": 500}}]`, wantErr: []string{"403 or 429"}},
		{name: "bad signal", in: `[{"at": "1s", "controller_kill": {"signal": "HUP"}}]`, wantErr: []string{"KILL or TERM"}},
		{name: "bad node loss", in: `[{"at": "1s", "node_lost": {"how": "explode"}}]`, wantErr: []string{"heartbeat or delete"}},
		{
			name:    "same kind overlapping",
			in:      `[{"at": "10s", "for": "10s", "webhook_drop": {"rate": 0.5}}, {"at": "15s", "for": "10s", "webhook_drop": {"rate": 0.1}}]`,
			wantErr: []string{"step 1", "overlaps step 0"},
		},
		{
			name: "same kind back to back, other kinds overlapping",
			in: `[{"at": "10s", "for": "10s", "webhook_drop": {"rate": 0.5}}, {"at": "20s", "for": "10s", "webhook_drop": {"rate": 0.1}},
			      {"at": "12s", "for": "10s", "api_errors": {"rate": 0.5}}, {"at": "12s", "node_lost": {}}, {"at": "12s", "node_lost": {}}]`,
			want: Schedule{Steps: []Step{
				{At: d("10s"), For: d("10s"), WebhookDrop: &WebhookDrop{Rate: 0.5}},
				{At: d("20s"), For: d("10s"), WebhookDrop: &WebhookDrop{Rate: 0.1}},
				{At: d("12s"), For: d("10s"), APIErrors: &APIErrors{Rate: 0.5}},
				{At: d("12s"), NodeLost: &NodeLost{}},
				{At: d("12s"), NodeLost: &NodeLost{}},
			}},
		},
		{
			name:    "two controller kills at once",
			in:      `[{"at": "10s", "controller_kill": {}}, {"at": "10s", "controller_kill": {}}]`,
			wantErr: []string{"overlaps"},
		},
		{
			name: "every disruption",
			in: `[{"at": "10s", "drain": {"pick": "idle", "timeout": "2m", "then": "uncordon"}},
			      {"at": "10s", "drain": {"node": "kwok-node-1", "grace_period": "5s"}},
			      {"at": "20s", "consolidate": {}},
			      {"at": "30s", "spot_reclaim": {"pick": "busy"}},
			      {"at": "40s", "kubelet_eviction": {"count": 2, "resource": "ephemeral-storage"}},
			      {"at": "50s", "oom_kill": {}}]`,
			want: Schedule{Steps: []Step{
				{At: d("10s"), Drain: &Drain{Pick: PickIdle, Timeout: d("2m"), Then: ThenUncordon}},
				{At: d("10s"), Drain: &Drain{Node: "kwok-node-1", GracePeriod: new(d("5s"))}},
				{At: d("20s"), Consolidate: &Drain{}},
				{At: d("30s"), SpotReclaim: &SpotReclaim{Pick: PickBusy}},
				{At: d("40s"), KubeletEviction: &PodKill{Count: 2, Resource: "ephemeral-storage"}},
				{At: d("50s"), OOMKill: &PodKill{}},
			}},
		},
		{name: "a drain takes no for", in: `[{"at": "1s", "for": "1s", "drain": {}}]`, wantErr: []string{"takes no for"}},
		{name: "unknown pick", in: `[{"at": "1s", "spot_reclaim": {"pick": "random"}}]`, wantErr: []string{"pick must be one of"}},
		{name: "unknown then", in: `[{"at": "1s", "drain": {"then": "reboot"}}]`, wantErr: []string{"then must be uncordon or delete"}},
		{name: "negative drain timeout", in: `[{"at": "1s", "consolidate": {"timeout": "-1s"}}]`, wantErr: []string{"must not be negative"}},
		{name: "negative kill count", in: `[{"at": "1s", "kubelet_eviction": {"count": -1}}]`, wantErr: []string{"count must not be negative"}},
		{name: "an OOM has no resource", in: `[{"at": "1s", "oom_kill": {"resource": "memory"}}]`, wantErr: []string{"oom_kill takes no resource"}},
		{name: "a drain and a reclaim in one step", in: `[{"at": "1s", "drain": {}, "spot_reclaim": {}}]`, wantErr: []string{"exactly one of"}},
		{
			name:    "every problem reported",
			in:      `[{"at": "1s"}, {"at": "1s", "for": "1s", "webhook_drop": {"rate": 2}}]`,
			wantErr: []string{"step 0", "step 1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Parse accepted %s: %+v", tc.in, got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGitHubFaultsAt(t *testing.T) {
	s := Schedule{Seed: 9, Steps: []Step{
		{At: d("10s"), For: d("10s"), WebhookDrop: &WebhookDrop{Rate: 0.3}},
		{At: d("15s"), For: d("10s"), APIErrors: &APIErrors{Rate: 0.5, Routes: []string{"GET /a", "POST /b"}}},
		{At: d("30s"), NodeLost: &NodeLost{}},
	}}
	base := simgithub.Faults{Seed: 1, Endpoints: map[string]simgithub.EndpointFaults{"GET /a": {Latency: d("5ms")}}}
	tests := []struct {
		at   string
		want simgithub.Faults
	}{
		{"0s", simgithub.Faults{Seed: 9, Endpoints: map[string]simgithub.EndpointFaults{"GET /a": {Latency: d("5ms")}}}},
		{"10s", simgithub.Faults{Seed: 9, Endpoints: map[string]simgithub.EndpointFaults{"GET /a": {Latency: d("5ms")}},
			Webhooks: simgithub.WebhookFaults{DropRate: 0.3}}},
		{"15s", simgithub.Faults{Seed: 9, Endpoints: map[string]simgithub.EndpointFaults{
			"GET /a":  {Latency: d("5ms"), ErrorRate: 0.5, ErrorStatus: 503},
			"POST /b": {ErrorRate: 0.5, ErrorStatus: 503},
		}, Webhooks: simgithub.WebhookFaults{DropRate: 0.3}}},
		{"20s", simgithub.Faults{Seed: 9, Endpoints: map[string]simgithub.EndpointFaults{
			"GET /a":  {Latency: d("5ms"), ErrorRate: 0.5, ErrorStatus: 503},
			"POST /b": {ErrorRate: 0.5, ErrorStatus: 503},
		}}},
		{"25s", simgithub.Faults{Seed: 9, Endpoints: map[string]simgithub.EndpointFaults{"GET /a": {Latency: d("5ms")}}}},
	}
	for _, tc := range tests {
		got := s.GitHubFaultsAt(time.Duration(d(tc.at)), base)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("faults at %s (-want +got):\n%s", tc.at, diff)
		}
	}
	if base.Endpoints["GET /a"].ErrorRate != 0 {
		t.Error("GitHubFaultsAt changed the base's endpoints")
	}
	// Default routes: the runner routes of every scope.
	def := Schedule{Steps: []Step{{At: 0, For: d("1s"), APIErrors: &APIErrors{Rate: 1}}}}.GitHubFaultsAt(0, simgithub.Faults{})
	if got := len(def.Endpoints); got != len(RunnerRoutes()) || def.Endpoints["POST /orgs/{org}/actions/runners/generate-jitconfig"].ErrorRate != 1 {
		t.Errorf("default api_errors routes: %d endpoints %v", got, def.Endpoints)
	}
}

func TestRateLimitsAt(t *testing.T) {
	s := Schedule{Steps: []Step{
		{At: d("10s"), For: d("20s"), RateLimit: &RateLimit{Kind: RateLimitPrimary, Limit: 30}},
		{At: d("40s"), For: d("20s"), RateLimit: &RateLimit{Kind: RateLimitSecondary, PointsPerMinute: 60, Status: 429}},
	}}
	off := simgithub.RateLimits{Disabled: true}
	tests := []struct {
		at   string
		base simgithub.RateLimits
		want simgithub.RateLimits
	}{
		{"5s", off, off},
		{"10s", off, simgithub.RateLimits{PAT: 30, Installation: 30, App: 30, Window: d("20s"), ExhaustedStatus: 403,
			Secondary: simgithub.SecondaryLimits{Disabled: true}}},
		{"30s", off, off},
		{"45s", off, simgithub.RateLimits{PAT: 1 << 30, Installation: 1 << 30, App: 1 << 30,
			Secondary: simgithub.SecondaryLimits{PointsPerMinute: 60, Status: 429}}},
		// With github.com's limits on, the step changes only its own limit.
		{"45s", simgithub.RateLimits{PAT: 5000}, simgithub.RateLimits{PAT: 5000,
			Secondary: simgithub.SecondaryLimits{PointsPerMinute: 60, Status: 429}}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, s.RateLimitsAt(time.Duration(d(tc.at)), tc.base)); diff != "" {
			t.Errorf("limits at %s over %+v (-want +got):\n%s", tc.at, tc.base, diff)
		}
	}
}

func TestTimeline(t *testing.T) {
	s := Schedule{Steps: []Step{
		{At: d("20s"), For: d("10s"), WebhookDrop: &WebhookDrop{Rate: 0.5}},
		{At: d("10s"), For: d("10s"), WebhookDrop: &WebhookDrop{Rate: 0.5}},
		{At: d("20s"), NodeLost: &NodeLost{}},
		{At: d("5s"), ControllerKill: &ControllerKill{}},
	}}
	type ev struct {
		At   string
		Step int
		End  bool
	}
	var got []ev
	for _, e := range s.timeline() {
		got = append(got, ev{e.at.String(), e.step, e.end})
	}
	want := []ev{
		{"5s", 3, false}, {"5s", 3, true}, // a kill with no downtime restarts at once
		{"10s", 1, false},
		{"20s", 1, true}, // the step ending first, then those starting
		{"20s", 0, false}, {"20s", 2, false},
		{"30s", 0, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"seed": 1, "steps": [{"at": "1s", "for": "2s", "webhook_drop": {"rate": 0.5}}]}`))
	f.Add([]byte(`[{"at": 10, "node_lost": {"node": "n", "how": "heartbeat"}}]`))
	f.Add([]byte(`[{"at": "1s", "for": "1s", "rate_limit": {"kind": "secondary"}}, {"at": "0s", "controller_kill": {"signal": "TERM"}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		// What Parse accepts is valid, and playing it is well defined.
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid schedule: %v", err)
		}
		for _, st := range s.Steps {
			if st.Kind() == "" || st.At < 0 || st.For < 0 {
				t.Fatalf("Parse accepted step %+v", st)
			}
		}
		evs := s.timeline()
		for i := 1; i < len(evs); i++ {
			if evs[i].at < evs[i-1].at {
				t.Fatalf("timeline out of order: %+v", evs)
			}
		}
		_ = s.GitHubFaultsAt(0, simgithub.Faults{})
		_ = s.RateLimitsAt(0, simgithub.RateLimits{})
	})
}
