package scaleset

import (
	"sync/atomic"
	"time"

	"github.com/actions/scaleset"

	"github.com/gantry-dev/gantry/internal/demand"
)

// jobNews is one job message of an answer, held until the answer's count.
type jobNews struct {
	action     demand.Action
	job        scaleset.JobMessageBase
	runnerName string
	runnerID   int
	result     string // JobCompleted's
}

// How long answerJobs remembers a runner: one whose job completed is soon gone (its
// Runner is deleted as its pod exits), and the Tracker keeps its word for longer; one
// whose job runs may run for days (GitHub stops a self-hosted runner's job after five),
// and an entry is dropped then in case its JobCompleted was never heard.
const (
	doneMemory    = 10 * time.Minute
	runningMemory = 6 * 24 * time.Hour
)

// answerJobs is what the service's answers said of the pool's runners, each committed
// with the count of jobs assigned (statistics.totalAssignedJobs) and running
// (totalRunningJobs) of the same answer, so that the pool counts its runners as the
// count does. A runner whose job completed no longer counts once the count that no
// longer has its job has come; until then it counts busy, even when its Runner is gone
// already (its pod exited first): counted nowhere, the count would still hold its job
// and the pool would make a runner for it. The listener's goroutine commits; reads take
// the listener's lock, as commits do.
type answerJobs struct {
	running map[string]time.Time // runner → when its job started (JobStarted)
	done    map[string]time.Time // runner → when its job completed (JobCompleted)
	// runningJobs is totalRunningJobs of the last answer: runners running a job that the
	// pool's list no longer has are counted busy up to this many, so that a JobCompleted
	// never heard cannot hold a slot for ever.
	runningJobs int
	// answer numbers the last answer committed (answers).
	answer uint64
}

// answers numbers every listener's answers, so that a listener started again (another
// configuration, another leader term) never reuses a number a pool has seen.
var answers atomic.Uint64

// commit records an answer's job messages and its count of running jobs.
func (a *answerJobs) commit(told []jobNews, runningJobs int, now time.Time) {
	if a.running == nil {
		a.running, a.done = map[string]time.Time{}, map[string]time.Time{}
	}
	for _, n := range told {
		if n.runnerName == "" {
			continue
		}
		switch n.action {
		case demand.ActionInProgress:
			if _, finished := a.done[n.runnerName]; !finished {
				a.running[n.runnerName] = now
			}
		case demand.ActionCompleted:
			delete(a.running, n.runnerName)
			a.done[n.runnerName] = now
		}
	}
	a.runningJobs = runningJobs
	a.answer = answers.Add(1)
	for name, at := range a.done {
		if now.Sub(at) > doneMemory {
			delete(a.done, name)
		}
	}
	for name, at := range a.running {
		if now.Sub(at) > runningMemory {
			delete(a.running, name)
		}
	}
}

// of sorts names, the pool's runners, into those running a job and those whose job
// completed, and names the runners running a job that are not among them.
func (a *answerJobs) of(names []string) (running, done, elsewhere []string) {
	in := make(map[string]struct{}, len(names))
	for _, name := range names {
		in[name] = struct{}{}
		if _, ok := a.done[name]; ok {
			done = append(done, name)
		} else if _, ok := a.running[name]; ok {
			running = append(running, name)
		}
	}
	limit := max(0, a.runningJobs-len(running))
	for name := range a.running {
		if _, ok := in[name]; !ok && len(elsewhere) < limit {
			elsewhere = append(elsewhere, name)
		}
	}
	return running, done, elsewhere
}
