package warm

import (
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Defaults of the model's memory.
const (
	// RateWindow is the time constant of the arrival rate's exponential weighting: an
	// arrival counts e times less after it.
	RateWindow = 2 * time.Minute
	// minRateAge is how much observation the rate is divided by at least: before, a
	// single arrival would read as a very high rate.
	minRateAge = 5 * time.Second
	// quietBound caps the rate after a quiet spell: had jobs still arrived at rate r, a
	// gap of g without any has a chance of e^(−r·g); past quietBound/g that chance is
	// under 1 %, so the rate is taken to be at most quietBound/g. It lets a pool cool
	// down within a minute of its traffic stopping instead of the weighting's minutes.
	quietBound = 5.0
	// startWeight is the weight of each new start time in the weighted average.
	startWeight = 0.2
	// minStart is the least start time the model uses: the API's timestamps, from
	// which start times are measured, have a resolution of one second, so a start under
	// a second often reads as 0.
	minStart = time.Second
)

// Observations hold, per pool, what the prediction needs: job arrivals (from the
// Tracker) and runner start times (from the Runner controller). Safe for concurrent
// use; a nil *Observations records nothing.
type Observations struct {
	mu    sync.Mutex
	pools map[types.NamespacedName]*poolObservations
}

type poolObservations struct {
	// rate is the exponentially weighted count of arrivals, per second of RateWindow,
	// as of at; since is when observation began (the weighting is divided by the share
	// of the window observed, so a young pool does not read low).
	rate      float64
	at, since time.Time
	last      time.Time // the latest arrival
	start     time.Duration
	starts    int
}

func (o *Observations) pool(key types.NamespacedName, now time.Time) *poolObservations {
	if o.pools == nil {
		o.pools = map[types.NamespacedName]*poolObservations{}
	}
	p := o.pools[key]
	if p == nil {
		p = &poolObservations{at: now, since: now}
		o.pools[key] = p
	}
	return p
}

func decay(v float64, from, to time.Time) float64 {
	if !to.After(from) {
		return v
	}
	return v * math.Exp(-to.Sub(from).Seconds()/RateWindow.Seconds())
}

// Arrival records a job queued for pool at at.
func (o *Observations) Arrival(pool types.NamespacedName, at time.Time) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pool(pool, at)
	p.rate = decay(p.rate, p.at, at) + 1/RateWindow.Seconds()
	if at.After(p.at) {
		p.at = at
	}
	if at.After(p.last) {
		p.last = at
	}
}

// Started records how long one of pool's runners took to start.
func (o *Observations) Started(pool types.NamespacedName, d time.Duration, now time.Time) {
	if o == nil || d < 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pool(pool, now)
	if p.starts == 0 {
		p.start = d
	} else {
		p.start += time.Duration(startWeight * float64(d-p.start))
	}
	p.starts++
}

// Inputs returns pool's inputs at now; ok is false while nothing was observed. The rate
// is 0 once no job arrived for cooldown: with any rate above 0 the model keeps at least
// one runner idle, since with none every job waits.
func (o *Observations) Inputs(pool types.NamespacedName, now time.Time, cooldown time.Duration) (in Inputs, ok bool) {
	if o == nil {
		return Inputs{}, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pools[pool]
	if p == nil {
		return Inputs{}, false
	}
	age := max(now.Sub(p.since), minRateAge)
	seen := 1 - math.Exp(-age.Seconds()/RateWindow.Seconds())
	rate := decay(p.rate, p.at, now) / seen
	if !p.last.IsZero() {
		gap := now.Sub(p.last)
		if gap >= cooldown {
			rate = 0
		} else if gap > 0 {
			rate = min(rate, quietBound/gap.Seconds())
		}
	}
	start := p.start
	if p.starts > 0 {
		start = max(start, minStart)
	}
	return Inputs{ArrivalsPerSecond: rate, Start: start}, true
}

// Restore starts pool's memory again from inputs observed at at (a pool's status after
// a restart), unless the pool already has a memory.
func (o *Observations) Restore(pool types.NamespacedName, in Inputs, at time.Time) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pools[pool] != nil {
		return
	}
	// A rate read from a whole window: observation began long before at.
	// The last arrival is not kept: the cooldown counts from at.
	p := &poolObservations{rate: in.ArrivalsPerSecond, at: at, since: at.Add(-100 * RateWindow), last: at, start: in.Start}
	if in.Start > 0 {
		p.starts = 1
	}
	if o.pools == nil {
		o.pools = map[types.NamespacedName]*poolObservations{}
	}
	o.pools[pool] = p
}

// Forget drops a deleted pool's memory.
func (o *Observations) Forget(pool types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.pools, pool)
}
