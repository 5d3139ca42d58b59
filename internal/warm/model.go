package warm

import (
	"math"
	"strconv"
	"time"
)

// Inputs are what the prediction is made from.
type Inputs struct {
	// ArrivalsPerSecond is the rate the prediction uses: the higher of Recent and Past.
	ArrivalsPerSecond float64
	// Recent is the pool's recent job arrival rate, Past the rate of the same hour on
	// past days (History's).
	Recent, Past float64
	// History is the pool's rate by hour of the day.
	History History
	// Start is the pool's runner start time: a Runner created to its runner container
	// running. Zero while no runner of the pool has started since it was first seen.
	Start time.Duration
}

// maxPredicted bounds the answer whatever the inputs: more than any pool's maxRunners.
const maxPredicted = 100000

// IdleFor is the prediction: the fewest idle runners n for which a job finds none idle
// at most miss of the time (a fraction, 0.01 for 1 %).
//
// The pool keeps busy + queued + n runners: each job that takes an idle runner has a
// replacement created at once, which is ready one start time later. Jobs arriving
// during one start time form a Poisson count N of mean rate × start; replacements under
// way are N (an M/G/∞ queue), and a job finds no idle runner exactly when all n are
// under way, N ≥ n. So n is the smallest with P(N ≥ n) ≤ miss — one more than the 1−miss
// quantile of N.
func IdleFor(in Inputs, miss float64) int {
	mean := in.ArrivalsPerSecond * in.Start.Seconds()
	if mean <= 0 || math.IsNaN(mean) || miss <= 0 {
		return 0
	}
	if miss >= 1 {
		return 0
	}
	// P(N ≥ n) = 1 − P(N ≤ n−1): walk the distribution in log space, so that a large
	// mean (whose first terms underflow) is still summed right.
	logMean := math.Log(mean)
	cdf := 0.0
	for k := 0; k < maxPredicted; k++ {
		if 1-cdf <= miss {
			return k
		}
		lg, _ := math.Lgamma(float64(k + 1))
		cdf += math.Exp(-mean + float64(k)*logMean - lg)
	}
	return maxPredicted
}

// ParsePercent reads targetMissPercent as a fraction: "1" is 0.01. Empty is the
// default, 1 %.
func ParsePercent(s string) (float64, error) {
	if s == "" {
		return 0.01, nil
	}
	p, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return p / 100, nil
}
