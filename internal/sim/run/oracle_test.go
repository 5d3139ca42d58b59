package run

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The oracle serves every id it reads, at most workers at once, skips what is not an
// id, and returns once its input has ended and every job is served.
func TestServeIDsServesEveryIDWorkersAtATime(t *testing.T) {
	in := strings.NewReader("3\n1\nnot-an-id\n\n2\n 4 \n5\n6\n")
	var mu sync.Mutex
	var got []int64
	var running, most atomic.Int64
	served := serveIDs(t.Context(), in, 2, func(_ context.Context, id int64) {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		got = append(got, id)
		mu.Unlock()
		running.Add(-1)
	})
	slices.Sort(got)
	if served != 6 || !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("served %d: %v; want the 6 ids", served, got)
	}
	if most.Load() > 2 {
		t.Errorf("%d jobs served at once, want at most 2 workers' worth", most.Load())
	}
}

// The harness hands the oracle each job as it is queued, one id a line, and closes the
// oracle's input once the feed is closed: what the oracle reads is every queued job.
func TestFeedOracleWritesEachJobThenCloses(t *testing.T) {
	pr, pw := io.Pipe()
	feed := newJobFeed()
	done := make(chan error, 1)
	go func() { done <- feedOracle(t.Context(), feed, pw) }()
	var served []int64
	var mu sync.Mutex
	read := make(chan int)
	go func() {
		read <- serveIDs(t.Context(), pr, 4, func(_ context.Context, id int64) {
			mu.Lock()
			served = append(served, id)
			mu.Unlock()
		})
	}()
	for i := range int64(100) {
		feed.add(queuedJob{id: 1000 + i})
	}
	feed.close()
	if err := <-done; err != nil {
		t.Fatalf("feedOracle: %v", err)
	}
	if n := <-read; n != 100 {
		t.Fatalf("the oracle served %d jobs, want 100", n)
	}
	slices.Sort(served)
	if served[0] != 1000 || served[99] != 1099 {
		t.Errorf("served ids %d..%d, want 1000..1099", served[0], served[99])
	}
}
