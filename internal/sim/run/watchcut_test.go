package run

import (
	"strings"
	"testing"
	"time"
)

func TestWatchersCutCountsTheWindowsLines(t *testing.T) {
	day := time.Date(2026, 11, 25, 0, 28, 0, 0, time.Local)
	log := strings.Join([]string{
		`I1125 00:28:10.000001    8142 cacher.go:881] Terminating all watchers from cacher pods`,
		`I1125 00:28:16.519337    8142 cache_watcher.go:203] Forcing runners.gantry.dev watcher close due to unresponsiveness: key: "/gantry.dev/runners/ci/", labels: "", fields: "". len(c.input) = 10, len(c.result) = 10, graceful = false`,
		`I1125 00:28:16.855429    8142 cache_watcher.go:203] Forcing pods watcher close due to unresponsiveness: key: "/pods/", labels: "", fields: "spec.nodeName!=". len(c.input) = 10, len(c.result) = 0, graceful = false`,
		`I1125 00:29:12.000000    8142 cache_watcher.go:203] Forcing pods watcher close due to unresponsiveness: key: "/pods/ci/", labels: "", fields: "". len(c.input) = 10, len(c.result) = 0, graceful = false`,
		`garbage`,
	}, "\n")
	for _, c := range []struct {
		from, to time.Time
		want     int
	}{
		{day, day.Add(time.Minute), 2},                                       // Gantry's part
		{day.Add(time.Minute), day.Add(2 * time.Minute), 1},                  // the floor's
		{day.Add(16 * time.Second), day.Add(16519337 * time.Microsecond), 0}, // to is not in the window
		{day.Add(-time.Hour), day, 0},
	} {
		got, err := watchersCut(strings.NewReader(log), c.from, c.to)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("[%s, %s): %d watchers cut, want %d", c.from.Format(time.TimeOnly), c.to.Format(time.TimeOnly), got, c.want)
		}
	}
}
