package runnerpool

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/warm"
)

// warmFloor is one reconcile's idle floor: the number desired() adds to busy and queued.
type warmFloor struct {
	warm.Floor
	// invalid says which schedules cannot be read (they are ignored), or is empty.
	invalid string
	// predicted is the prediction's answer before maxIdle and maxRunners, and inputs
	// what it was made from (ok: any observation at all).
	predicted int
	inputs    warm.Inputs
	observed  bool
	// capped: maxRunners holds the floor below what minIdle, a window or the
	// prediction asks.
	capped bool
}

// predictiveRecheck is how often a predictive pool is reconciled while it keeps runners
// warm for its traffic: the prediction falls as arrivals stop, with no event to say so.
const predictiveRecheck = 10 * time.Second

// computeWarmFloor computes the idle floor in force at now. Contract: the floor is
// spec.minIdle raised by the open windows of spec.warm.schedules and by the prediction
// of spec.warm.predictive (capped by its maxIdle), and never above maxRunners; a
// schedule that cannot be read is ignored and named in invalid. Next is when the floor
// must be computed again without any event: the next window edge, or soon while the
// prediction keeps runners warm.
func (r *Reconciler) computeWarmFloor(pool *v1alpha1.RunnerPool, now time.Time) warmFloor {
	spec := pool.Spec
	base := int(spec.MinIdle)
	if spec.Warm == nil {
		return warmFloor{Floor: warm.Floor{MinIdle: min(base, int(spec.MaxRunners)), Source: v1alpha1.WarmSourceMinIdle}}
	}
	var windows []warm.Window
	var invalid []string
	for _, s := range spec.Warm.Schedules {
		w, err := warm.ParseWindow(s)
		if err != nil {
			invalid = append(invalid, fmt.Sprintf("warm.schedules[%s]: %v", s.Name, err))
			continue
		}
		windows = append(windows, w)
	}
	f := warmFloor{Floor: warm.ScheduleFloor(base, windows, now), invalid: strings.Join(invalid, "; ")}
	if p := spec.Warm.Predictive; p != nil {
		key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
		if st := pool.Status.Warm; st != nil && st.Predictive != nil && st.Predictive.ObservedAt != nil {
			r.Warm.Restore(key, storedInputs(st.Predictive), st.Predictive.ObservedAt.Time)
		}
		f.inputs, f.observed = r.Warm.Inputs(key, now, p.CooldownOrDefault())
		miss, err := warm.ParsePercent(p.TargetMissPercent)
		if err != nil || miss <= 0 {
			miss = 0.01
		}
		f.predicted = warm.IdleFor(f.inputs, miss)
		if n := min(f.predicted, int(p.MaxIdle)); n > f.MinIdle {
			f.MinIdle, f.Source, f.Window, f.Closes = n, v1alpha1.WarmSourcePredictive, "", time.Time{}
		}
		next := f.inputs.History.NextChange(now) // the history's rate moves with the hour
		if f.predicted > 0 || f.inputs.ArrivalsPerSecond > 0 {
			next = now.Add(predictiveRecheck)
		}
		if !next.IsZero() && (f.Next.IsZero() || next.Before(f.Next)) {
			f.Next = next
		}
	}
	f.capped = f.MinIdle > int(spec.MaxRunners)
	f.MinIdle = max(0, min(f.MinIdle, int(spec.MaxRunners)))
	return f
}

// storedInputs reads the inputs a previous controller wrote in status.
func storedInputs(st *v1alpha1.PredictiveWarmStatus) warm.Inputs {
	rate, _ := strconv.ParseFloat(st.ArrivalsPerMinute, 64)
	start, _ := strconv.ParseFloat(st.StartSeconds, 64)
	in := warm.Inputs{Recent: rate / 60, Start: time.Duration(start * float64(time.Second))}
	for h, v := range st.HourOfDay {
		if h >= len(in.History.PerSecond) || v == "" {
			continue
		}
		if perMinute, err := strconv.ParseFloat(v, 64); err == nil && perMinute >= 0 {
			in.History.PerSecond[h], in.History.Known[h] = perMinute/60, true
		}
	}
	return in
}

// hourOfDay is status.warm.predictive.hourOfDay for h: nil while no hour is known.
func hourOfDay(h warm.History) []string {
	if h.Empty() {
		return nil
	}
	out := make([]string, len(h.PerSecond))
	for i, rate := range h.PerSecond {
		if h.Known[i] {
			out[i] = strconv.FormatFloat(rate*60, 'f', 2, 64)
		}
	}
	return out
}

// predictiveRewrite is how old status.warm.predictive may grow while its figures, as
// written, stay the same.
const predictiveRewrite = time.Minute

// warmStatus is status.warm for the floor f at now (nil for a pool without spec.warm).
// The prediction's figures are rounded, and its observedAt moved only when they change
// or every predictiveRewrite, so that a steady pool's status is not rewritten on every
// reconcile.
func warmStatus(pool *v1alpha1.RunnerPool, f warmFloor, now time.Time) *v1alpha1.WarmStatus {
	spec := pool.Spec
	if spec.Warm == nil {
		return nil
	}
	st := &v1alpha1.WarmStatus{MinIdle: int32(f.MinIdle), Source: f.Source, Schedule: f.Window}
	if !f.Next.IsZero() {
		next := metav1.NewTime(f.Next.Truncate(time.Second))
		st.NextChangeAt = &next
	}
	switch f.Source {
	case v1alpha1.WarmSourceSchedule:
		st.Message = fmt.Sprintf("window %s is open until %s: %d idle runners kept", f.Window, f.Closes.UTC().Format(time.RFC3339), f.MinIdle)
	case v1alpha1.WarmSourcePredictive:
		from := "recent"
		if f.inputs.Past > f.inputs.Recent {
			from = "the same hour of past days"
		}
		st.Message = fmt.Sprintf("predicted from %.1f jobs a minute (%s) and a %.1fs runner start: %d idle runners kept",
			f.inputs.ArrivalsPerSecond*60, from, f.inputs.Start.Seconds(), f.MinIdle)
	default:
		st.Message = fmt.Sprintf("no window open and no prediction above it: minIdle (%d idle runners) applies", f.MinIdle)
	}
	if f.capped {
		st.Message += fmt.Sprintf(", capped by maxRunners (%d)", spec.MaxRunners)
	}
	if p := spec.Warm.Predictive; p != nil && f.observed {
		ps := &v1alpha1.PredictiveWarmStatus{
			ArrivalsPerMinute: strconv.FormatFloat(f.inputs.Recent*60, 'f', 1, 64),
			HourOfDay:         hourOfDay(f.inputs.History),
			StartSeconds:      strconv.FormatFloat(f.inputs.Start.Seconds(), 'f', 2, 64),
			IdleRunners:       int32(min(f.predicted, int(p.MaxIdle))),
		}
		at := metav1.NewTime(now.Truncate(time.Second))
		ps.ObservedAt = &at
		if prev := pool.Status.Warm; prev != nil && prev.Predictive != nil && prev.Predictive.ObservedAt != nil &&
			prev.Predictive.ArrivalsPerMinute == ps.ArrivalsPerMinute && prev.Predictive.StartSeconds == ps.StartSeconds &&
			slices.Equal(prev.Predictive.HourOfDay, ps.HourOfDay) &&
			prev.Predictive.IdleRunners == ps.IdleRunners && now.Sub(prev.Predictive.ObservedAt.Time) < predictiveRewrite {
			ps.ObservedAt = prev.Predictive.ObservedAt
		}
		st.Predictive = ps
	} else if p != nil && pool.Status.Warm != nil {
		st.Predictive = pool.Status.Warm.Predictive
	}
	return st
}
