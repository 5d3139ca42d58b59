package warm

import (
	"math"
	"slices"
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
	// historyWeight is the weight of a new day in an hour's history: an hour's rate is
	// the exponentially weighted mean of that hour on the days observed, the latest
	// counting a third.
	historyWeight = 1.0 / 3
	// minHourObserved is the least of an hour that must have been observed for its
	// count to enter the history: less reads too noisy a rate.
	minHourObserved = 10 * time.Minute
	// historyLookahead is how far ahead the history is read: the next hour's rate counts
	// from this long before it begins, so that runners are warm when it does.
	historyLookahead = 10 * time.Minute
)

// History is a pool's job arrival rate by hour of the day (UTC), per second, over the
// days observed; Known says which hours have any.
type History struct {
	PerSecond [24]float64
	Known     [24]bool
}

// Empty reports whether no hour has any history.
func (h History) Empty() bool {
	for _, k := range h.Known {
		if k {
			return false
		}
	}
	return true
}

// at is the history's rate for time t's hour and, within historyLookahead of the next
// hour, the next hour's (0 before).
func (h History) at(t time.Time) (hour, next float64) {
	t = t.UTC()
	if n := t.Add(historyLookahead).Hour(); n != t.Hour() {
		next = h.PerSecond[n]
	}
	return h.PerSecond[t.Hour()], next
}

// NextChange is the first time after now at which the history's rate for the time
// (History.at) may change: the next hour's start or historyLookahead before it; zero
// for a history with no traffic in it.
func (h History) NextChange(now time.Time) time.Time {
	if !slices.ContainsFunc(h.PerSecond[:], func(r float64) bool { return r > 0 }) {
		return time.Time{}
	}
	next := now.UTC().Truncate(time.Hour).Add(time.Hour)
	if early := next.Add(-historyLookahead); early.After(now) {
		return early
	}
	return next
}

func (h *History) add(hour int, rate float64) {
	if !h.Known[hour] {
		h.PerSecond[hour], h.Known[hour] = rate, true
		return
	}
	h.PerSecond[hour] += historyWeight * (rate - h.PerSecond[hour])
}

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
	// history is the rate by hour of past days; hour is the hour being counted (UTC,
	// truncated), count its arrivals so far, and from when within it they were counted.
	history    History
	hour, from time.Time
	count      int
}

// roll closes the hours that ended by now: each enters the history with its arrivals
// over the time it was observed, and each whole hour after it with none, for at most a
// day (a longer gap has no hour left that was not just written).
func (p *poolObservations) roll(now time.Time) {
	h := now.UTC().Truncate(time.Hour)
	if p.hour.IsZero() {
		p.hour, p.from = h, now
		return
	}
	if !h.After(p.hour) {
		return
	}
	if observed := p.hour.Add(time.Hour).Sub(p.from); observed >= minHourObserved {
		p.history.add(p.hour.Hour(), float64(p.count)/observed.Seconds())
	}
	for t, n := p.hour.Add(time.Hour), 0; t.Before(h) && n < 24; t, n = t.Add(time.Hour), n+1 {
		p.history.add(t.Hour(), 0)
	}
	p.hour, p.from, p.count = h, h, 0
}

func (o *Observations) pool(key types.NamespacedName, now time.Time) *poolObservations {
	if o.pools == nil {
		o.pools = map[types.NamespacedName]*poolObservations{}
	}
	p := o.pools[key]
	if p == nil {
		p = &poolObservations{at: now, since: now}
		p.roll(now)
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
	p.roll(at)
	if !at.Before(p.hour) {
		p.count++
	}
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
// is the higher of the recent rate and the history's for this hour (or the next, just
// before it begins). The recent rate is 0 once no job arrived for cooldown: with any
// rate above 0 the model keeps at least one runner idle, since with none every job
// waits.
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
	p.roll(now)
	age := max(now.Sub(p.since), minRateAge)
	seen := 1 - math.Exp(-age.Seconds()/RateWindow.Seconds())
	rate := decay(p.rate, p.at, now) / seen
	var gap time.Duration
	if !p.last.IsZero() {
		gap = now.Sub(p.last)
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
	hour, next := p.history.at(now)
	if p.count > 0 && gap > 0 {
		// Jobs came this hour, then none for gap: the quiet bounds this hour's past rate
		// as it bounds the recent one, so a pool cools down when today's traffic ends
		// before yesterday's did. The next hour's, read ahead, is not bounded.
		hour = min(hour, quietBound/gap.Seconds())
	}
	past := max(hour, next)
	return Inputs{ArrivalsPerSecond: max(rate, past), Recent: rate, Past: past, Start: start, History: p.history}, true
}

// Restore starts pool's memory again from inputs observed at at (a pool's status after
// a restart: the recent rate, the start time and the history), unless the pool already
// has a memory. The hour under way is counted again from at.
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
	p := &poolObservations{rate: in.Recent, at: at, since: at.Add(-100 * RateWindow), last: at, start: in.Start, history: in.History}
	p.roll(at)
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
