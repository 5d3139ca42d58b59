package run

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
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

// startOracle runs the oracle as a process of its own, hands it the jobs on its
// standard input and reads its result and CPU time once it exits; a failing oracle is
// an error naming its log.
func TestOracleProcess(t *testing.T) {
	script := func(body string) floorEnv {
		dir := t.TempDir()
		exe := dir + "/gantry"
		if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return floorEnv{gantry: exe, logDir: dir, kubeconfig: dir + "/kubeconfig",
			pool: &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux"}}}
	}

	// It reads every id, then answers.
	p, err := startOracle(script(`test "$1 $2 $8" = "sim oracle ci/linux" || exit 9; n=$(wc -l); echo "{\"served\": $n}"`))
	if err != nil {
		t.Fatal(err)
	}
	feed := newJobFeed()
	for i := range int64(3) {
		feed.add(queuedJob{id: i + 1})
	}
	feed.close()
	if err := feedOracle(t.Context(), feed, p.stdin); err != nil {
		t.Fatal(err)
	}
	res, cpu, err := p.wait(10 * time.Second)
	if err != nil || res.Served != 3 || cpu < 0 {
		t.Errorf("oracle: %+v, %.2f CPU-s, %v; want 3 served", res, cpu, err)
	}

	// One that fails says so, and where its log is.
	env := script(`echo "no pool ci/linux" >&2; exit 3`)
	p, err = startOracle(env)
	if err != nil {
		t.Fatal(err)
	}
	<-p.exited
	_, _, err = p.wait(10 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "oracle.log") {
		t.Errorf("failed oracle: %v; want an error naming oracle.log", err)
	}
	if b, _ := os.ReadFile(env.logDir + "/oracle.log"); !strings.Contains(string(b), "no pool ci/linux") {
		t.Errorf("oracle.log = %q, want the oracle's stderr", b)
	}
}
