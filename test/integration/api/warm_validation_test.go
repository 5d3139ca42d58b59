package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

func window(name, cron, tz string, d time.Duration, minIdle int32) v1alpha1.WarmSchedule {
	return v1alpha1.WarmSchedule{Name: name, Cron: cron, TimeZone: tz, Duration: metav1.Duration{Duration: d}, MinIdle: minIdle}
}

func TestWarmPoolsAreAcceptedWithDefaults(t *testing.T) {
	ns := env.Namespace(t)
	pool := testutil.RunnerPool(ns, "warm").MaxRunners(50).
		Schedule(window("working-hours", "0 8 * * 1-5", "Europe/Berlin", 10*time.Hour, 5)).
		Schedule(window("nightly", "@daily", "", 2*time.Hour, 3)).
		Schedule(window("every-15-min", "*/15 9-17 ? JAN-DEC MON-FRI", "America/Argentina/Buenos_Aires", time.Minute, 1)).
		Predictive(v1alpha1.PredictiveWarmSpec{MaxIdle: 20}).Obj()
	if err := env.Client.Create(ctx(t), pool); err != nil {
		t.Fatalf("valid warm pool refused: %v", err)
	}
	var got v1alpha1.RunnerPool
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(pool), &got); err != nil {
		t.Fatal(err)
	}
	if tz := got.Spec.Warm.Schedules[1].TimeZone; tz != "UTC" {
		t.Errorf("timeZone defaulted to %q, want UTC", tz)
	}
	p := got.Spec.Warm.Predictive
	if p.TargetMissPercent != "1" || p.Cooldown == nil || p.Cooldown.Duration != 10*time.Minute {
		t.Errorf("predictive defaults: targetMissPercent %q, cooldown %v; want \"1\" and 10m", p.TargetMissPercent, p.Cooldown)
	}
}

func TestInvalidWarmPoolsAreRefusedWithAMessageThatSaysWhatToFix(t *testing.T) {
	ns := env.Namespace(t)
	ok := window("w", "0 8 * * 1-5", "UTC", time.Hour, 2)
	tests := []struct {
		name string
		// set changes a valid window's or the prediction's JSON form.
		path  []string
		value any
		want  string
	}{
		{"cron with six fields", []string{"schedules", "0", "cron"}, "0 0 8 * * 1-5", "warm.schedules[].cron must be five fields"},
		{"cron with four fields", []string{"schedules", "0", "cron"}, "0 8 * *", "warm.schedules[].cron must be five fields"},
		{"cron with a time zone in it", []string{"schedules", "0", "cron"}, "CRON_TZ=Europe/Berlin 0 8 * * *", "set the time zone in timeZone"},
		{"cron @every", []string{"schedules", "0", "cron"}, "@every 1h", "warm.schedules[].cron must be five fields"},
		{"time zone with a space", []string{"schedules", "0", "timeZone"}, "Europe/ Berlin", "warm.schedules[].timeZone must be an IANA time zone name"},
		{"time zone as an offset", []string{"schedules", "0", "timeZone"}, "+02:00", "warm.schedules[].timeZone must be an IANA time zone name"},
		{"duration without units", []string{"schedules", "0", "duration"}, "600", "warm.schedules[].duration must be a duration from 1m to 168h"},
		{"duration under a minute", []string{"schedules", "0", "duration"}, "30s", "warm.schedules[].duration must be a duration from 1m to 168h"},
		{"duration over a week", []string{"schedules", "0", "duration"}, "200h", "warm.schedules[].duration must be a duration from 1m to 168h"},
		{"negative minIdle", []string{"schedules", "0", "minIdle"}, int64(-1), "spec.warm.schedules[0].minIdle"},
		{"name with capitals", []string{"schedules", "0", "name"}, "Working_Hours", "warm.schedules[].name must be lowercase letters, digits and dashes"},
		{"target miss as a fraction word", []string{"predictive", "targetMissPercent"}, "1%", "warm.predictive.targetMissPercent must be a percentage from 0.01 to 50"},
		{"target miss of zero", []string{"predictive", "targetMissPercent"}, "0", "warm.predictive.targetMissPercent must be a percentage from 0.01 to 50"},
		{"target miss over half", []string{"predictive", "targetMissPercent"}, "60", "warm.predictive.targetMissPercent must be a percentage from 0.01 to 50"},
		{"negative maxIdle", []string{"predictive", "maxIdle"}, int64(-3), "spec.warm.predictive.maxIdle"},
		{"cooldown too short", []string{"predictive", "cooldown"}, "1s", "warm.predictive.cooldown must be a duration from 10s to 24h"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testutil.RunnerPool(ns, fmt.Sprintf("warm-%d", i)).Schedule(ok).Predictive(v1alpha1.PredictiveWarmSpec{MaxIdle: 5}).Obj()
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pool)
			if err != nil {
				t.Fatal(err)
			}
			warm := obj["spec"].(map[string]any)["warm"].(map[string]any)
			var at any = warm
			for _, k := range tt.path[:len(tt.path)-1] {
				switch v := at.(type) {
				case map[string]any:
					at = v[k]
				case []any:
					at = v[0]
				}
			}
			at.(map[string]any)[tt.path[len(tt.path)-1]] = tt.value
			err = createRaw(t, obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid (422) admission error, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("admission error does not say %q:\n%v", tt.want, err)
			}
		})
	}
}
