// Package warm computes a pool's idle floor: spec.minIdle, raised in the time windows of
// spec.warm.schedules (schedule.go) and by the prediction of spec.warm.predictive
// (model.go) from the arrival rate and runner start time the controllers observe
// (observations.go). Everything here but Observations is pure: the time is an argument.
package warm

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones in any image, distroless included

	"github.com/robfig/cron/v3"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Window is one parsed entry of spec.warm.schedules.
type Window struct {
	Name     string
	MinIdle  int
	Duration time.Duration
	// Spec is the cron expression and time zone as written, for messages.
	Spec  string
	sched *cron.SpecSchedule // read in UTC: next reads it on the wall clock of loc
	loc   *time.Location
}

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseWindow reads one schedule. The API server checks each field's shape; this
// catches what it cannot: a field out of range (minute 61), an unknown time zone.
func ParseWindow(s v1alpha1.WarmSchedule) (Window, error) {
	tz := s.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	w := Window{Name: s.Name, MinIdle: int(s.MinIdle), Duration: s.Duration.Duration, Spec: fmt.Sprintf("%q in %s", s.Cron, tz)}
	if strings.HasPrefix(s.Cron, "TZ=") || strings.HasPrefix(s.Cron, "CRON_TZ=") || strings.HasPrefix(s.Cron, "@every") {
		return w, fmt.Errorf("cron %q: write five fields or @daily, @weekly…; the time zone goes in timeZone", s.Cron)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return w, fmt.Errorf("timeZone %q is not a known IANA time zone; use a name such as Europe/Berlin or America/New_York", tz)
	}
	parsed, err := parser.Parse(s.Cron)
	if err != nil {
		return w, fmt.Errorf("cron %q: %w; for example \"0 8 * * 1-5\" is 08:00 on weekdays", s.Cron, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return w, fmt.Errorf("cron %q does not name times of day", s.Cron)
	}
	spec.Location = time.UTC
	w.sched, w.loc = spec, loc
	if w.Duration <= 0 {
		return w, errors.New("duration must be positive, such as 10h")
	}
	if w.next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return w, fmt.Errorf("cron %q never fires (such as February 30th)", s.Cron)
	}
	return w, nil
}

// lookback bounds how many openings OpenAt walks through: a window opening every minute
// for a week is 10,080.
const lookback = 20000

// OpenAt reports whether the window is open at now and, if so, when it closes (the last
// of its overlapping openings' ends), and the next time it opens or closes after now.
// A window opened at f is open over [f, f+Duration).
func (w Window) OpenAt(now time.Time) (open bool, closes, next time.Time) {
	if w.sched == nil {
		return false, time.Time{}, time.Time{}
	}
	first := w.next(now.Add(-w.Duration))
	nextOpen := w.next(now)
	if first.IsZero() || first.After(now) {
		return false, time.Time{}, nextOpen
	}
	last := first
	for i := 0; i < lookback; i++ {
		f := w.next(last)
		if f.IsZero() || f.After(now) {
			break
		}
		last = f
	}
	// The floor changes when the earliest of the open windows closes (it may be
	// reopened at once by a later one: then nothing changes) or a new one opens.
	next = first.Add(w.Duration)
	if !nextOpen.IsZero() && nextOpen.Before(next) {
		next = nextOpen
	}
	return true, last.Add(w.Duration), next
}

// next is the first opening after t. The cron expression is read on the wall clock of
// the window's time zone, so that daylight-saving changes neither skip nor repeat a
// day's opening: a wall time the clocks jump over (02:30 on a spring-forward night)
// opens at the jump, the first time that exists after it; a wall time that happens
// twice (02:30 on a fall-back night) opens once, at the first.
func (w Window) next(t time.Time) time.Time {
	wall := wallClock(t.In(w.loc))
	c := w.sched.Next(wall)
	for i := 0; i < 4 && !c.IsZero(); i++ {
		if at := instant(c, w.loc); at.After(t) {
			return at
		}
		c = w.sched.Next(c)
	}
	return time.Time{}
}

// wallClock is t's wall-clock reading in its own zone, written as UTC.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant is the first instant at which loc's clocks read wall (a wall-clock reading
// written as UTC), or, for a reading the clocks jump over, the instant of the jump.
func instant(wall time.Time, loc *time.Location) time.Time {
	t := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), loc)
	if got := wallClock(t); !got.Equal(wall) {
		// In a gap: Go answers with a time on either side of the jump.
		start, end := t.ZoneBounds()
		if got.Before(wall) {
			return end
		}
		return start
	}
	// A reading that happens twice: Go may answer with either; take the first.
	if earlier := t.Add(-time.Hour); wallClock(earlier.In(loc)).Equal(wall) {
		return earlier
	}
	return t
}

// Floor is the idle floor in force and why.
type Floor struct {
	MinIdle int
	// Source is v1alpha1.WarmSourceMinIdle, WarmSourceSchedule or WarmSourcePredictive.
	Source string
	// Window is the open window the floor comes from (Source Schedule).
	Window string
	// Closes is when that window closes.
	Closes time.Time
	// Next is the next time any window opens or closes (zero: none will).
	Next time.Time
}

// ScheduleFloor is the idle floor at now: the highest minIdle among base and the open
// windows (the first listed wins a tie), and the next time a window opens or closes.
func ScheduleFloor(base int, windows []Window, now time.Time) Floor {
	f := Floor{MinIdle: base, Source: v1alpha1.WarmSourceMinIdle}
	for _, w := range windows {
		open, closes, next := w.OpenAt(now)
		if !next.IsZero() && (f.Next.IsZero() || next.Before(f.Next)) {
			f.Next = next
		}
		if open && w.MinIdle > f.MinIdle {
			f.MinIdle, f.Source, f.Window, f.Closes = w.MinIdle, v1alpha1.WarmSourceSchedule, w.Name, closes
		}
	}
	return f
}
