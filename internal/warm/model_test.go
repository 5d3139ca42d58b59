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
	o.Restore(pool, Inputs{ArrivalsPerSecond: 5, Start: 1200 * time.Millisecond}, t0)
	in, _ := o.Inputs(pool, t0, time.Minute)
	if math.Abs(in.ArrivalsPerSecond-5) > 0.01 || in.Start != 1200*time.Millisecond {
		t.Errorf("restored inputs %+v, want 5/s and 1.2s", in)
	}
	// A later restore does not overwrite what the running controller learned.
	o.Restore(pool, Inputs{ArrivalsPerSecond: 50, Start: time.Minute}, t0)
	if in, _ := o.Inputs(pool, t0, time.Minute); in.Start != 1200*time.Millisecond {
		t.Errorf("second restore overwrote the memory: %+v", in)
	}
	var nilObs *Observations
	nilObs.Arrival(pool, t0)
	if _, ok := nilObs.Inputs(pool, t0, time.Minute); ok {
		t.Error("a nil Observations has inputs")
	}
}
