package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WarmSpec raises a pool's idle floor above minIdle: in time windows (schedules), from
// the traffic the pool sees (predictive), or both. The floor in force is the highest of
// minIdle, every open window's minIdle and the predictive answer, at most maxRunners.
type WarmSpec struct {
	// schedules are time windows with their own idle floor, such as working hours. A
	// window opens at each time its cron expression names, in its time zone, and stays
	// open for its duration; overlapping windows take the highest minIdle, and outside
	// every window spec.minIdle applies. A window only raises the floor: below
	// spec.minIdle it changes nothing.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20
	Schedules []WarmSchedule `json:"schedules,omitempty"`

	// predictive sizes the idle floor from the pool's observed job arrival rate and
	// runner start time, so that a job finds no idle runner at most targetMissPercent of
	// the time, with at most maxIdle runners kept idle for it. Off when unset.
	// +optional
	Predictive *PredictiveWarmSpec `json:"predictive,omitempty"`
}

// WarmSchedule is one time window with its own idle floor.
type WarmSchedule struct {
	// name says what the window is for, such as working-hours; status.warm names the
	// window in force by it. Lowercase letters, digits and dashes.
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([a-z0-9-]*[a-z0-9])?$')",message="warm.schedules[].name must be lowercase letters, digits and dashes, starting and ending with a letter or digit, such as working-hours"
	Name string `json:"name"`

	// cron says when the window opens: five fields (minute hour day-of-month month
	// day-of-week), such as "0 8 * * 1-5" for 08:00 on weekdays, or one of @yearly,
	// @monthly, @weekly, @daily and @hourly; read in timeZone.
	// +required
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9A-Za-z*?/,-]+( +[0-9A-Za-z*?/,-]+){4})$')",message="warm.schedules[].cron must be five fields, minute hour day-of-month month day-of-week, such as \"0 8 * * 1-5\" (08:00 on weekdays), or one of @yearly, @monthly, @weekly, @daily, @hourly; set the time zone in timeZone, not in the expression"
	Cron string `json:"cron"`

	// timeZone is the IANA time zone cron is read in, such as Europe/Berlin or
	// America/New_York. Daylight-saving changes follow the zone's rules: a window whose
	// opening time does not exist on the day the clocks go forward opens at the first
	// time that does.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$')",message="warm.schedules[].timeZone must be an IANA time zone name, such as UTC, Europe/Berlin or America/New_York"
	TimeZone string `json:"timeZone,omitempty"`

	// duration is how long the window stays open after each opening, from 1m to 168h
	// (a week), with units, such as 10h or 90m. It is elapsed time: a 10h window opened
	// at 08:00 on the day the clocks go back closes at 17:00 local time.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="warm.schedules[].duration must be a duration from 1m to 168h written with units, such as \"10h\" or \"90m\""
	Duration metav1.Duration `json:"duration"`

	// minIdle is the idle floor while the window is open. The floor never exceeds
	// maxRunners.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	MinIdle int32 `json:"minIdle"`
}

// PredictiveWarmSpec sizes the idle floor from observed traffic.
type PredictiveWarmSpec struct {
	// targetMissPercent is the chance, in percent, that a job finds no idle runner and
	// waits for a runner to start, from 0.01 to 50, such as "1" or "0.5" (a string).
	// Lower costs more idle runners.
	// +optional
	// +kubebuilder:default="1"
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+([.][0-9]+)?$') && double(self) >= 0.01 && double(self) <= 50.0",message="warm.predictive.targetMissPercent must be a percentage from 0.01 to 50 written as a string, such as \"1\" or \"0.5\""
	TargetMissPercent string `json:"targetMissPercent,omitempty"`

	// maxIdle caps the idle runners the prediction may ask for (maxRunners caps them
	// too). 0 turns the prediction into a report: its answer is shown in status.warm but
	// not applied.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	MaxIdle int32 `json:"maxIdle"`

	// cooldown is how long after the pool's last job the prediction keeps runners
	// idle; then it asks for none until the next job. Any traffic at all makes the model
	// keep a runner idle (with none, every job waits for a start), so this is what lets
	// a quiet pool scale to zero. A duration from 10s to 24h with units, such as 10m.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="warm.predictive.cooldown must be a duration from 10s to 24h written with units, such as \"10m\" or \"1h\""
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`
}

// DefaultWarmCooldown is warm.predictive.cooldown's default.
const DefaultWarmCooldown = 10 * time.Minute

// CooldownOrDefault returns cooldown, or its default when unset.
func (p PredictiveWarmSpec) CooldownOrDefault() time.Duration {
	return durationOr(p.Cooldown, DefaultWarmCooldown)
}

// Sources of the idle floor in force (status.warm.source).
const (
	// WarmSourceMinIdle: spec.minIdle; no window is open and the prediction asks for no more.
	WarmSourceMinIdle = "MinIdle"
	// WarmSourceSchedule: an open window of spec.warm.schedules.
	WarmSourceSchedule = "Schedule"
	// WarmSourcePredictive: the prediction of spec.warm.predictive.
	WarmSourcePredictive = "Predictive"
)

// WarmStatus is the idle floor in force and why.
type WarmStatus struct {
	// minIdle is the idle floor in force now: the highest of spec.minIdle, the open
	// windows' and the prediction's, at most maxRunners.
	// +optional
	MinIdle int32 `json:"minIdle"`

	// source says where minIdle comes from: MinIdle, Schedule or Predictive.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Source string `json:"source,omitempty"`

	// schedule names the open window minIdle comes from (source Schedule).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Schedule string `json:"schedule,omitempty"`

	// nextChangeAt is the next time a window opens or closes: the floor is computed
	// again then, whatever else happens.
	// +optional
	NextChangeAt *metav1.Time `json:"nextChangeAt,omitempty"`

	// message says, for a person, what the floor is and why.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// predictive is the prediction's inputs and answer (spec.warm.predictive only).
	// +optional
	Predictive *PredictiveWarmStatus `json:"predictive,omitempty"`
}

// PredictiveWarmStatus is the model's inputs and answer. The controller keeps the model
// in memory and writes it here; after a restart or a leader change it starts again from
// these inputs, so the floor does not fall to minIdle while it learns.
type PredictiveWarmStatus struct {
	// arrivalsPerMinute is the pool's recent job arrival rate: queued jobs per minute,
	// exponentially weighted over the last few minutes, as a decimal string.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ArrivalsPerMinute string `json:"arrivalsPerMinute,omitempty"`

	// hourOfDay is the pool's job arrival rate by hour of the day (UTC), in jobs per
	// minute as decimal strings, the first for 00:00–01:00: each the weighted mean of
	// that hour on the days observed, the latest day counting a third; an empty string
	// for an hour never observed. The prediction uses the higher of the recent rate and
	// the current hour's (in an hour's last 10 minutes, the next hour's if higher), so a
	// pool is warm for the morning rise it saw yesterday.
	// +optional
	// +kubebuilder:validation:MaxItems=24
	// +kubebuilder:validation:items:MaxLength=16
	HourOfDay []string `json:"hourOfDay,omitempty"`

	// startSeconds is the pool's measured runner start time, from the Runner's creation
	// to its runner container running, exponentially weighted over recent runners, in
	// seconds as a decimal string.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	StartSeconds string `json:"startSeconds,omitempty"`

	// idleRunners is the model's answer: the fewest idle runners for which more jobs
	// arrive during one start time at most targetMissPercent of the time, under a
	// Poisson model, before maxIdle.
	// +optional
	IdleRunners int32 `json:"idleRunners"`

	// observedAt is when the inputs were last brought up to date.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
}
