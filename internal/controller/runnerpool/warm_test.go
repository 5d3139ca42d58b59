package runnerpool

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/warm"
)

func TestComputeWarmFloor(t *testing.T) {
	now := time.Date(2025, 6, 10, 9, 0, 0, 0, time.UTC) // a Tuesday
	office := v1alpha1.WarmSchedule{Name: "office", Cron: "0 8 * * 1-5", Duration: metav1.Duration{Duration: 10 * time.Hour}, MinIdle: 4}
	broken := v1alpha1.WarmSchedule{Name: "broken", Cron: "0 25 * * *", Duration: metav1.Duration{Duration: time.Hour}, MinIdle: 9}
	key := types.NamespacedName{Namespace: "ci", Name: "linux"}
	traffic := &warm.Observations{}
	traffic.Restore(key, warm.Inputs{Recent: 5, Start: 1200 * time.Millisecond}, now)

	tests := []struct {
		name        string
		spec        v1alpha1.RunnerPoolSpec
		obs         *warm.Observations
		wantMin     int
		wantSource  string
		wantInvalid string
		wantMessage string
	}{
		{"no warm: minIdle", v1alpha1.RunnerPoolSpec{MinIdle: 2, MaxRunners: 10}, nil, 2, v1alpha1.WarmSourceMinIdle, "", ""},
		{"an open window", v1alpha1.RunnerPoolSpec{MinIdle: 1, MaxRunners: 10, Warm: &v1alpha1.WarmSpec{Schedules: []v1alpha1.WarmSchedule{office}}},
			nil, 4, v1alpha1.WarmSourceSchedule, "", "window office is open until 2025-06-10T18:00:00Z: 4 idle runners kept"},
		{"capped by maxRunners", v1alpha1.RunnerPoolSpec{MinIdle: 1, MaxRunners: 3, Warm: &v1alpha1.WarmSpec{Schedules: []v1alpha1.WarmSchedule{office}}},
			nil, 3, v1alpha1.WarmSourceSchedule, "", "capped by maxRunners (3)"},
		{"a broken window is ignored and named", v1alpha1.RunnerPoolSpec{MinIdle: 1, MaxRunners: 10, Warm: &v1alpha1.WarmSpec{Schedules: []v1alpha1.WarmSchedule{broken, office}}},
			nil, 4, v1alpha1.WarmSourceSchedule, "warm.schedules[broken]: cron \"0 25 * * *\"", ""},
		{"the prediction above the window", v1alpha1.RunnerPoolSpec{MinIdle: 1, MaxRunners: 50, Warm: &v1alpha1.WarmSpec{Schedules: []v1alpha1.WarmSchedule{office},
			Predictive: &v1alpha1.PredictiveWarmSpec{TargetMissPercent: "1", MaxIdle: 20}}},
			traffic, 13, v1alpha1.WarmSourcePredictive, "", "predicted from 300.0 jobs a minute (recent) and a 1.2s runner start: 13 idle runners kept"},
		{"the prediction within maxIdle", v1alpha1.RunnerPoolSpec{MinIdle: 1, MaxRunners: 50, Warm: &v1alpha1.WarmSpec{
			Predictive: &v1alpha1.PredictiveWarmSpec{TargetMissPercent: "1", MaxIdle: 5}}},
			traffic, 5, v1alpha1.WarmSourcePredictive, "", ""},
		{"maxIdle 0: reported, not applied", v1alpha1.RunnerPoolSpec{MinIdle: 1, MaxRunners: 50, Warm: &v1alpha1.WarmSpec{
			Predictive: &v1alpha1.PredictiveWarmSpec{MaxIdle: 0}}},
			traffic, 1, v1alpha1.WarmSourceMinIdle, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Reconciler{Warm: tt.obs}
			pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: tt.spec}
			f := r.computeWarmFloor(pool, now)
			if diff := cmp.Diff([]any{tt.wantMin, tt.wantSource}, []any{f.MinIdle, f.Source}); diff != "" {
				t.Errorf("floor (-want +got):\n%s", diff)
			}
			if !strings.Contains(f.invalid, tt.wantInvalid) || (tt.wantInvalid == "") != (f.invalid == "") {
				t.Errorf("invalid = %q, want %q", f.invalid, tt.wantInvalid)
			}
			st := warmStatus(pool, f, now)
			if tt.spec.Warm == nil {
				if st != nil {
					t.Errorf("status.warm = %+v for a pool without warm", st)
				}
				return
			}
			if int(st.MinIdle) != tt.wantMin || st.Source != tt.wantSource || !strings.Contains(st.Message, tt.wantMessage) {
				t.Errorf("status.warm = %+v; want minIdle %d from %s, message with %q", st, tt.wantMin, tt.wantSource, tt.wantMessage)
			}
		})
	}
}

// The window's edges are when the floor is computed again.
func TestComputeWarmFloorNext(t *testing.T) {
	spec := v1alpha1.RunnerPoolSpec{MinIdle: 0, MaxRunners: 10, Warm: &v1alpha1.WarmSpec{Schedules: []v1alpha1.WarmSchedule{
		{Name: "office", Cron: "0 8 * * 1-5", Duration: metav1.Duration{Duration: 10 * time.Hour}, MinIdle: 4}}}}
	pool := &v1alpha1.RunnerPool{Spec: spec}
	r := &Reconciler{}
	for now, want := range map[time.Time]time.Time{
		time.Date(2025, 6, 10, 7, 0, 0, 0, time.UTC):  time.Date(2025, 6, 10, 8, 0, 0, 0, time.UTC),
		time.Date(2025, 6, 10, 12, 0, 0, 0, time.UTC): time.Date(2025, 6, 10, 18, 0, 0, 0, time.UTC),
		time.Date(2025, 6, 13, 19, 0, 0, 0, time.UTC): time.Date(2025, 6, 16, 8, 0, 0, 0, time.UTC), // Friday evening → Monday
	} {
		if got := r.computeWarmFloor(pool, now).Next; !got.Equal(want) {
			t.Errorf("at %s: next edge %s, want %s", now, got, want)
		}
	}
}

// A restarted controller starts from the history status.warm.predictive kept: the
// floor asks for the morning's runners before the morning's first job.
func TestWarmHistoryRoundTripsThroughStatus(t *testing.T) {
	key := types.NamespacedName{Namespace: "ci", Name: "linux"}
	var h warm.History
	h.PerSecond[9], h.Known[9] = 2, true // 120 jobs a minute at 09:00
	h.Known[8] = true                    // 08:00 observed, quiet
	before := &warm.Observations{}
	before.Restore(key, warm.Inputs{Start: 2 * time.Second, History: h}, time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC))
	spec := v1alpha1.RunnerPoolSpec{MaxRunners: 50, Warm: &v1alpha1.WarmSpec{Predictive: &v1alpha1.PredictiveWarmSpec{MaxIdle: 40}}}
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux"}, Spec: spec}
	now := time.Date(2026, 3, 2, 8, 55, 0, 0, time.UTC)
	pool.Status.Warm = warmStatus(pool, (&Reconciler{Warm: before}).computeWarmFloor(pool, now), now)
	stored := pool.Status.Warm.Predictive
	if stored == nil || len(stored.HourOfDay) != 24 || stored.HourOfDay[9] != "120.00" || stored.HourOfDay[8] != "0.00" || stored.HourOfDay[7] != "" {
		t.Fatalf("status.warm.predictive = %+v; want hourOfDay with 09:00 120.00, 08:00 0.00, 07:00 unknown", stored)
	}

	after := &Reconciler{Warm: &warm.Observations{}}
	f := after.computeWarmFloor(pool, now.Add(time.Minute))
	if f.Source != v1alpha1.WarmSourcePredictive || f.MinIdle < 8 {
		t.Errorf("after a restart at 08:56: floor %d from %s; want the 09:00 traffic's (2 jobs/s, 2 s start: at least 8)", f.MinIdle, f.Source)
	}
	if msg := warmStatus(pool, f, now.Add(time.Minute)).Message; !strings.Contains(msg, "the same hour of past days") {
		t.Errorf("message %q does not say the rate comes from past days", msg)
	}
}
