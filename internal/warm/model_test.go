package warm

import (
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// poissonTail is P(N ≥ n) for N Poisson with mean m, summed directly.
func poissonTail(m float64, n int) float64 {
	cdf, p := 0.0, math.Exp(-m)
	for k := 0; k < n; k++ {
		cdf += p
		p *= m / float64(k+1)
	}
	return 1 - cdf
}

func TestIdleFor(t *testing.T) {
	tests := []struct {
		name string
		in   Inputs
		miss float64
		want int
	}{
		{"no traffic", Inputs{ArrivalsPerSecond: 0, Start: time.Second}, 0.01, 0},
		{"no start time yet", Inputs{ArrivalsPerSecond: 5}, 0.01, 0},
		// 5 jobs/s, 1.2 s start: mean 6; P(N ≥ 13) = 0.0088 ≤ 1 % < P(N ≥ 12) = 0.020.
		{"steady: 5 jobs/s, 1.2 s start, 1 %", Inputs{ArrivalsPerSecond: 5, Start: 1200 * time.Millisecond}, 0.01, 13},
		// One idle runner: the next job finds none while its replacement starts, 2 % of the time.
		{"a job a minute, 1 %", Inputs{ArrivalsPerSecond: 1.0 / 60, Start: 1200 * time.Millisecond}, 0.01, 2},
		// With no idle runner every job waits: any traffic at all keeps one.
		{"a job an hour, 1 %", Inputs{ArrivalsPerSecond: 1.0 / 3600, Start: 1200 * time.Millisecond}, 0.01, 1},
		{"looser target, fewer runners", Inputs{ArrivalsPerSecond: 5, Start: 1200 * time.Millisecond}, 0.1, 10},
		{"slow nodes: a 3-minute start", Inputs{ArrivalsPerSecond: 1, Start: 3 * time.Minute}, 0.01, 213},
		{"a very large mean does not underflow", Inputs{ArrivalsPerSecond: 100, Start: 100 * time.Second}, 0.01, 10234},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := IdleFor(tt.in, tt.miss)
			if got != tt.want {
				t.Errorf("IdleFor = %d, want %d", got, tt.want)
			}
			m := tt.in.ArrivalsPerSecond * tt.in.Start.Seconds()
			if m > 0 && m < 500 {
				// The answer is the smallest n with P(N ≥ n) ≤ miss.
				if tail := poissonTail(m, got); tail > tt.miss {
					t.Errorf("P(N ≥ %d) = %g > %g", got, tail, tt.miss)
				}
				if got > 0 {
					if tail := poissonTail(m, got-1); tail <= tt.miss {
						t.Errorf("P(N ≥ %d) = %g ≤ %g: %d is not the smallest", got-1, tail, tt.miss, got)
					}
				}
			}
		})
	}
}

func TestObservationsRate(t *testing.T) {
	pool := types.NamespacedName{Namespace: "ci", Name: "linux"}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var o Observations
	if _, ok := o.Inputs(pool, t0, time.Minute); ok {
		t.Fatal("inputs before any observation")
	}
	// 5 jobs/s, evenly, for 60 s: the young pool's rate reads near 5, not 5·(1−e^(−½)).
	for i := 0; i < 300; i++ {
		o.Arrival(pool, t0.Add(time.Duration(i)*200*time.Millisecond))
	}
	o.Started(pool, time.Second, t0)
	o.Started(pool, 2*time.Second, t0)
	in, ok := o.Inputs(pool, t0.Add(60*time.Second), 10*time.Minute)
	if !ok || math.Abs(in.ArrivalsPerSecond-5) > 0.3 {
		t.Errorf("rate after 60 s at 5/s = %.2f, want about 5", in.ArrivalsPerSecond)
	}
	if in.Start != 1200*time.Millisecond {
		t.Errorf("start = %s, want 1.2s (1s, then 2s weighted 0.2)", in.Start)
	}
	// Traffic stops: within a minute the rate reads under 0.1/s, and once the cooldown
	// has passed without a job it is 0.
	if in, _ := o.Inputs(pool, t0.Add(120*time.Second), 10*time.Minute); in.ArrivalsPerSecond > 0.1 || in.ArrivalsPerSecond == 0 {
		t.Errorf("rate a minute after the last arrival = %.3f, want above 0 and ≤ 0.1", in.ArrivalsPerSecond)
	}
	if in, _ := o.Inputs(pool, t0.Add(59800*time.Millisecond+10*time.Minute), 10*time.Minute); in.ArrivalsPerSecond != 0 || IdleFor(in, 0.01) != 0 {
		t.Errorf("a cooldown after the last arrival: rate %.4f, %d idle runners predicted; want 0 and 0", in.ArrivalsPerSecond, IdleFor(in, 0.01))
	}
}

// After a restart the model starts from the inputs the pool's status kept.
func TestObservationsRestore(t *testing.T) {
	pool := types.NamespacedName{Namespace: "ci", Name: "linux"}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var o Observations
	o.Restore(pool, Inputs{Recent: 5, Start: 1200 * time.Millisecond}, t0)
	in, _ := o.Inputs(pool, t0, time.Minute)
	if math.Abs(in.ArrivalsPerSecond-5) > 0.01 || in.Start != 1200*time.Millisecond {
		t.Errorf("restored inputs %+v, want 5/s and 1.2s", in)
	}
	// A later restore does not overwrite what the running controller learned.
	o.Restore(pool, Inputs{Recent: 50, Start: time.Minute}, t0)
	if in, _ := o.Inputs(pool, t0, time.Minute); in.Start != 1200*time.Millisecond {
		t.Errorf("second restore overwrote the memory: %+v", in)
	}
	var nilObs *Observations
	nilObs.Arrival(pool, t0)
	if _, ok := nilObs.Inputs(pool, t0, time.Minute); ok {
		t.Error("a nil Observations has inputs")
	}
}

// The same hour of past days: a working morning (09:00–10:00 busy, the rest of the day
// quiet) is remembered, read the next morning before any job arrives, and from just
// before 09:00; a partly observed hour does not enter it, and a restored history is
// carried on.
func TestObservationsHourOfDay(t *testing.T) {
	pool := types.NamespacedName{Namespace: "ci", Name: "linux"}
	day1 := time.Date(2026, 3, 2, 8, 55, 0, 0, time.UTC)
	var o Observations
	o.Started(pool, 2*time.Second, day1)
	// 08:55–09:00: observed 5 minutes only, too little for the history.
	o.Arrival(pool, day1.Add(time.Minute))
	// 09:00–10:00: a job every 2 s, 0.5/s.
	nine := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 1800; i++ {
		o.Arrival(pool, nine.Add(time.Duration(i)*2*time.Second))
	}
	in, _ := o.Inputs(pool, nine.Add(90*time.Minute), time.Minute)
	if !in.History.Known[9] || math.Abs(in.History.PerSecond[9]-0.5) > 0.001 {
		t.Errorf("09:00's history after the first day = %v (known %v), want 0.5/s", in.History.PerSecond[9], in.History.Known[9])
	}
	if in.History.Known[8] {
		t.Errorf("08:00 was observed 5 minutes only, yet has a history: %v", in.History.PerSecond[8])
	}
	// The next morning at 08:45 nothing has arrived for hours: the recent rate is 0, and
	// so is the history of 08:00 (not yet known: under way); the hours from 10:00 to
	// 08:00 were observed quiet. At 08:52 the coming hour's history applies.
	next := time.Date(2026, 3, 3, 8, 45, 0, 0, time.UTC)
	in, _ = o.Inputs(pool, next, 10*time.Minute)
	if in.Recent != 0 || in.ArrivalsPerSecond != 0 || !in.History.Known[10] || !in.History.Known[7] || in.History.PerSecond[7] != 0 {
		t.Errorf("08:45 the next day: %+v; want no rate, 10:00 to 07:00 known quiet", in)
	}
	in, _ = o.Inputs(pool, next.Add(7*time.Minute), 10*time.Minute)
	if math.Abs(in.ArrivalsPerSecond-0.5) > 0.001 || in.Past != in.ArrivalsPerSecond {
		t.Errorf("08:52 the next day: rate %.3f (past %.3f), want yesterday's 09:00, 0.5/s", in.ArrivalsPerSecond, in.Past)
	}
	if n := IdleFor(in, 0.01); n < 2 {
		t.Errorf("08:52 the next day: %d idle runners predicted, want the 09:00 traffic's (at least 2)", n)
	}
	// A quiet 09:00 that day counts a third: 0.5 → 1/3.
	in, _ = o.Inputs(pool, next.Add(2*time.Hour), 10*time.Minute)
	if math.Abs(in.History.PerSecond[9]-1.0/3) > 0.001 {
		t.Errorf("09:00's history after a quiet second day = %.3f, want 0.333", in.History.PerSecond[9])
	}

	// A new controller restores the history from the pool's status.
	var restarted Observations
	restarted.Restore(pool, Inputs{Start: 2 * time.Second, History: in.History}, next.Add(24*time.Hour-10*time.Minute))
	if in, _ := restarted.Inputs(pool, next.Add(24*time.Hour-5*time.Minute), 10*time.Minute); in.ArrivalsPerSecond != 0 {
		t.Errorf("restored at 08:35 on day 3, rate at 08:40 %.3f, want 0 (08:00 is quiet)", in.ArrivalsPerSecond)
	}
	in, _ = restarted.Inputs(pool, next.Add(24*time.Hour+7*time.Minute), 10*time.Minute)
	if math.Abs(in.ArrivalsPerSecond-1.0/3) > 0.001 {
		t.Errorf("restored on day 3, rate at 08:52 %.3f, want the history of 09:00, 0.333", in.ArrivalsPerSecond)
	}
}

func TestHistoryNextChange(t *testing.T) {
	var h History
	now := time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC)
	if got := h.NextChange(now); !got.IsZero() {
		t.Errorf("an empty history changes at %s, want never", got)
	}
	h.PerSecond[9], h.Known[9] = 0.5, true
	for at, want := range map[time.Time]time.Time{
		now:                        time.Date(2026, 3, 2, 8, 50, 0, 0, time.UTC),
		now.Add(20 * time.Minute):  time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC),
		now.Add(25 * time.Minute):  time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC),
		now.Add(-35 * time.Minute): time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC),
	} {
		if got := h.NextChange(at); !got.Equal(want) {
			t.Errorf("NextChange(%s) = %s, want %s", at.Format("15:04"), got.Format("15:04"), want.Format("15:04"))
		}
	}
}

// Today's traffic ends before yesterday's did: the quiet after this hour's last job
// bounds the hour's past rate, as it bounds the recent one; the next hour's, read
// ahead, is not bounded.
func TestObservationsHistoryYieldsToTodaysQuiet(t *testing.T) {
	pool := types.NamespacedName{Namespace: "ci", Name: "linux"}
	var h History
	h.PerSecond[9], h.Known[9] = 0.5, true
	h.PerSecond[10], h.Known[10] = 0.5, true
	nine := time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC)
	var o Observations
	o.Restore(pool, Inputs{Start: 2 * time.Second, History: h}, nine)
	if in, _ := o.Inputs(pool, nine.Add(5*time.Minute), time.Hour); in.Past != 0.5 {
		t.Errorf("09:05, no job yet today: past rate %.3f, want the history's 0.5", in.Past)
	}
	for i := 0; i < 60; i++ {
		o.Arrival(pool, nine.Add(5*time.Minute+time.Duration(i)*2*time.Second))
	}
	last := nine.Add(5*time.Minute + 118*time.Second)
	in, _ := o.Inputs(pool, last.Add(100*time.Second), time.Hour)
	if math.Abs(in.Past-0.05) > 0.001 {
		t.Errorf("100 s after this hour's last job: past rate %.3f, want 5/100 = 0.05", in.Past)
	}
	// 09:52: 10:00's history is read ahead, whatever the quiet.
	if in, _ := o.Inputs(pool, nine.Add(52*time.Minute), time.Hour); in.Past != 0.5 {
		t.Errorf("09:52: past rate %.3f, want 10:00's 0.5 read ahead", in.Past)
	}
}
