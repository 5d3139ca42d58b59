package run

import (
	"bufio"
	"io"
	"os"
	"strings"
	"time"
)

// watchCutMark is what the kube-apiserver logs, at -v=1, when it closes a watcher whose
// buffered events it could not hand on in time: the watcher fell behind (a client that
// does not read, or an API server short of CPU), and its client watches again from its
// last resource version.
const watchCutMark = "watcher close due to unresponsiveness"

// watchersCut counts the watchers the kube-apiserver's log (klog lines, local time)
// says were cut in [from, to).
func watchersCut(log io.Reader, from, to time.Time) (int, error) {
	n := 0
	sc := bufio.NewScanner(log)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, watchCutMark) {
			continue
		}
		at, ok := klogTime(line, from)
		if ok && !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n, sc.Err()
}

// klogTime reads a klog line's time ("I1125 00:28:16.519337 …", month and day, local
// time), in the year of near: klog does not write the year.
func klogTime(line string, near time.Time) (time.Time, bool) {
	if len(line) < len("I0102 15:04:05.000000") {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:len("I0102 15:04:05.000000")], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	near = near.In(time.Local)
	return time.Date(near.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.Local), true
}

// countWatchersCut sets watchers_cut for Gantry's part, [start, end), and for the
// floor's, from the kube-apiserver's log at path; read after the API server stopped,
// so that its last lines are written. A log that cannot be read leaves both unset.
func (r *Report) countWatchersCut(path string, start, end time.Time, floorStart, floorEnd time.Time) {
	count := func(from, to time.Time) *int {
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		n, err := watchersCut(f, from, to)
		if err != nil {
			return nil
		}
		return &n
	}
	r.WatchersCut = count(start, end)
	if r.Floor != nil && !floorStart.IsZero() && !floorEnd.IsZero() {
		r.Floor.WatchersCut = count(floorStart, floorEnd)
	}
}
