package warm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

func window(t *testing.T, name, cron, tz string, d time.Duration, minIdle int32) Window {
	t.Helper()
	w, err := ParseWindow(v1alpha1.WarmSchedule{Name: name, Cron: cron, TimeZone: tz, Duration: metav1.Duration{Duration: d}, MinIdle: minIdle})
	if err != nil {
		t.Fatalf("ParseWindow(%q, %q): %v", cron, tz, err)
	}
	return w
}

func at(t *testing.T, tz, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseWindowRefuses(t *testing.T) {
	tests := []struct {
		name, cron, tz, wantErr string
	}{
		{"minute out of range", "61 8 * * *", "UTC", "61"},
		{"six fields", "0 0 8 * * *", "UTC", "expected exactly 5 fields"},
		{"unknown zone", "0 8 * * *", "Mars/Olympus", "not a known IANA time zone"},
		{"zone in the expression", "CRON_TZ=UTC 0 8 * * *", "UTC", "timeZone"},
		{"every", "@every 1h", "UTC", "timeZone"},
		{"never fires", "0 8 30 2 *", "UTC", "never fires"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWindow(v1alpha1.WarmSchedule{Name: "w", Cron: tt.cron, TimeZone: tt.tz, Duration: metav1.Duration{Duration: time.Hour}, MinIdle: 1})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseWindow(%q, %q) = %v, want an error with %q", tt.cron, tt.tz, err, tt.wantErr)
			}
		})
	}
}

// A weekday working-hours window, read in three zones at the same instants.
func TestScheduleFloorTimeZones(t *testing.T) {
	// Tuesday 2025-06-10 07:30 UTC is 09:30 in Berlin (CEST) and 03:30 in New York (EDT).
	now := at(t, "UTC", "2025-06-10 07:30")
	tests := []struct {
		tz       string
		wantOpen bool
		wantNext time.Time
	}{
		{"UTC", false, at(t, "UTC", "2025-06-10 08:00")},
		{"", false, at(t, "UTC", "2025-06-10 08:00")}, // UTC by default
		{"Europe/Berlin", true, at(t, "Europe/Berlin", "2025-06-10 18:00")},
		{"America/New_York", false, at(t, "America/New_York", "2025-06-10 08:00")},
		{"Asia/Kolkata", true, at(t, "Asia/Kolkata", "2025-06-10 18:00")}, // 13:00, a half-hour offset
	}
	for _, tt := range tests {
		t.Run(tt.tz, func(t *testing.T) {
			w := window(t, "working-hours", "0 8 * * 1-5", tt.tz, 10*time.Hour, 4)
			f := ScheduleFloor(1, []Window{w}, now)
			wantMin, wantSrc := 1, v1alpha1.WarmSourceMinIdle
			if tt.wantOpen {
				wantMin, wantSrc = 4, v1alpha1.WarmSourceSchedule
			}
			if f.MinIdle != wantMin || f.Source != wantSrc || !f.Next.Equal(tt.wantNext) {
				t.Errorf("floor %d from %s, next %s; want %d from %s, next %s", f.MinIdle, f.Source, f.Next, wantMin, wantSrc, tt.wantNext)
			}
		})
	}
}

// Each day of a daylight-saving change, the window at 02:30 (a time the clocks skip in
// spring and pass twice in autumn) opens exactly once.
func TestScheduleDaylightSaving(t *testing.T) {
	tests := []struct {
		name, tz, from string
		want           []string // openings, local time with offset
	}{
		{"New York spring forward: 02:30 does not exist, opens at 03:00 EDT", "America/New_York", "2025-03-08 12:00",
			[]string{"2025-03-09 03:00 -0400", "2025-03-10 02:30 -0400"}},
		{"Berlin spring forward", "Europe/Berlin", "2025-03-29 12:00",
			[]string{"2025-03-30 03:00 +0200", "2025-03-31 02:30 +0200"}},
		{"Berlin fall back: 02:30 happens twice, opens once at the first", "Europe/Berlin", "2025-10-25 12:00",
			[]string{"2025-10-26 02:30 +0200", "2025-10-27 02:30 +0100"}},
		{"New York fall back", "America/New_York", "2025-11-01 12:00",
			[]string{"2025-11-02 01:30 -0400", "2025-11-03 01:30 -0500"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cron := "30 2 * * *"
			if strings.HasPrefix(tt.name, "New York fall") {
				cron = "30 1 * * *" // 01:30 is New York's twice-passed hour
			}
			w := window(t, "night", cron, tt.tz, time.Hour, 2)
			var got []string
			next := at(t, tt.tz, tt.from)
			for range tt.want {
				next = w.next(next)
				got = append(got, next.Format("2006-01-02 15:04 -0700"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("openings (-want +got):\n%s", diff)
			}
		})
	}
}

// The duration is elapsed time: a 10h window opened at 08:00 on a fall-back day closes
// at 17:00 local time, and is open at 16:30 but not at 17:30.
func TestScheduleDurationIsElapsed(t *testing.T) {
	w := window(t, "day", "0 0 * * *", "Europe/Berlin", 10*time.Hour, 3)
	// 2025-10-26: the clocks go back at 03:00; midnight + 10h elapsed is 09:00 local.
	if open, closes, _ := w.OpenAt(at(t, "Europe/Berlin", "2025-10-26 08:30")); !open || !closes.Equal(at(t, "Europe/Berlin", "2025-10-26 09:00")) {
		t.Errorf("at 08:30: open %v closes %s; want open, closing at 09:00", open, closes)
	}
	if open, _, _ := w.OpenAt(at(t, "Europe/Berlin", "2025-10-26 09:30")); open {
		t.Error("at 09:30: open; want closed")
	}
}

func TestScheduleFloorOverlaps(t *testing.T) {
	mk := func() []Window {
		return []Window{
			window(t, "office", "0 8 * * 1-5", "UTC", 10*time.Hour, 3),
			window(t, "nightly-build", "0 17 * * *", "UTC", 2*time.Hour, 6),
			window(t, "small", "0 9 * * *", "UTC", time.Hour, 2),
			window(t, "tie", "0 8 * * 1-5", "UTC", 10*time.Hour, 3),
		}
	}
	tests := []struct {
		name       string
		base       int
		now        string
		wantMin    int
		wantSrc    string
		wantWindow string
		wantNext   string
	}{
		{"before any", 1, "2025-06-10 07:00", 1, v1alpha1.WarmSourceMinIdle, "", "2025-06-10 08:00"},
		{"office alone", 1, "2025-06-10 08:00", 3, v1alpha1.WarmSourceSchedule, "office", "2025-06-10 09:00"},
		{"office and small: the highest, first listed on a tie", 1, "2025-06-10 09:30", 3, v1alpha1.WarmSourceSchedule, "office", "2025-06-10 10:00"},
		{"office and nightly: the highest", 1, "2025-06-10 17:30", 6, v1alpha1.WarmSourceSchedule, "nightly-build", "2025-06-10 18:00"},
		{"nightly alone", 1, "2025-06-10 18:30", 6, v1alpha1.WarmSourceSchedule, "nightly-build", "2025-06-10 19:00"},
		{"minIdle above every window", 8, "2025-06-10 17:30", 8, v1alpha1.WarmSourceMinIdle, "", "2025-06-10 18:00"},
		{"weekend: office closed", 1, "2025-06-14 10:00", 1, v1alpha1.WarmSourceMinIdle, "", "2025-06-14 17:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ScheduleFloor(tt.base, mk(), at(t, "UTC", tt.now))
			got := []any{f.MinIdle, f.Source, f.Window, f.Next.UTC().Format("2006-01-02 15:04")}
			want := []any{tt.wantMin, tt.wantSrc, tt.wantWindow, tt.wantNext}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("floor (-want +got):\n%s", diff)
			}
		})
	}
}

// A window that opens again before it closes stays open until its last opening's end:
// at 10:45 the 10:00 opening holds it open until 11:30, and the next edge is 11:00.
func TestWindowOverlapsItself(t *testing.T) {
	w := window(t, "hourly", "0 * * * *", "UTC", 90*time.Minute, 2)
	open, closes, next := w.OpenAt(at(t, "UTC", "2025-06-10 10:45"))
	if !open || !closes.Equal(at(t, "UTC", "2025-06-10 11:30")) || !next.Equal(at(t, "UTC", "2025-06-10 11:00")) {
		t.Errorf("at 10:45: open %v closes %s next %s; want open, closing 11:30, next edge 11:00", open, closes, next)
	}
	// At 11:10 two openings overlap: 10:00 until 11:30 and 11:00 until 12:30.
	open, closes, next = w.OpenAt(at(t, "UTC", "2025-06-10 11:10"))
	if !open || !closes.Equal(at(t, "UTC", "2025-06-10 12:30")) || !next.Equal(at(t, "UTC", "2025-06-10 11:30")) {
		t.Errorf("at 11:10: open %v closes %s next %s; want open, closing 12:30, next edge 11:30", open, closes, next)
	}
}
