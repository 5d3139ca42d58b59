// Workflow runs as their workflows declare them — jobs that need other jobs — and their
// attempts: the state of GitHub's re-run protocol, beside the job model (state.go).
//
// A run's jobs are the nodes of a graph (jobs.<job_id> and jobs.<job_id>.needs). A node
// is executed by one job per attempt that runs it, each with an ID of its own, as GitHub
// gives a re-run job a new ID. A node has no execution in an attempt until the jobs it
// needs completed: GitHub hands a job to runners only once its needs are satisfied
// (github-aws-runners/terraform-aws-github-runner#1902), and when one of them failed or
// was skipped it skips the job without queueing it ("If a job fails or is skipped, all
// jobs that need it are skipped", workflow syntax, jobs.<job_id>.needs): its only
// workflow_job event is completed, conclusion skipped (which actions-runner-controller
// ignores: controllers/actions.summerwind.net/horizontal_runner_autoscaler_webhook.go).
//
// A re-run (rerun_routes.go) makes a new attempt of a completed run: the jobs it names and
// every job that needs them, transitively, get new executions; the others keep their
// results ("Jobs that aren't included keep their outputs from the previous attempt",
// docs.github.com, Re-running workflows and jobs). The run's status is that of the latest
// execution of each job.
//
// Workflows is the logic, guarded by Sim.mu: a job's completion and its run's next jobs
// change together with the job model.

package github

import (
	"net/http"
	"time"
)

// maxReruns is how often a run may be re-run: "A workflow run can be re-run a maximum of
// 50 times. This limit includes both full re-runs and re-runs of a subset of jobs."
// (docs.github.com, Re-running workflows and jobs). Attempts go up to 51.
const maxReruns = 50

// How a re-run attempt was asked for (Attempt.How): the endpoint.
const (
	HowRerunJob        = "rerun_job"
	HowRerunFailedJobs = "rerun_failed_jobs"
	HowRerunRun        = "rerun"
)

// runGraph is a run's jobs and attempts.
type runGraph struct {
	run   *workflowRun
	nodes []*graphNode
	// attempts[n-1] is attempt n; a run starts with attempt 1.
	attempts []*runAttempt
}

// runAttempt is one attempt of a run.
type runAttempt struct {
	number  int
	started time.Time
	// done is when its last job completed; zero while it runs.
	done time.Time
	// jobs are the executions it made, in the order they were made.
	jobs []*job
	// how is what made it: "" for the first, else a How… constant; requested are the
	// jobs the re-run named (the job, the failed ones, all), before their dependents.
	how       string
	requested []*job
}

// graphNode is one job of a run's workflow.
type graphNode struct {
	// key is the job's ID in the workflow; group the key of the matrix it is a copy of
	// ("" for none).
	key, group string
	spec       JobSpec
	needs      []*graphNode
	// execs are its executions, oldest first.
	execs []*job
	// waiting: the latest attempt runs it, and has not made its execution yet.
	waiting bool
}

// nodeSpec is a job of a run being queued, and the matrix it belongs to.
type nodeSpec struct {
	spec  JobSpec
	group string
}

// newRunGraph checks a run's jobs — each spec valid, keys unique, needs naming jobs (or
// a matrix) of the run, no cycle — and returns their graph, every node waiting.
func newRunGraph(specs []nodeSpec) (*runGraph, error) {
	g := &runGraph{}
	byKey := map[string][]*graphNode{}
	groups := map[string][]*graphNode{}
	for _, ns := range specs {
		if _, err := jobFromSpec(ns.spec); err != nil {
			return nil, err
		}
		n := &graphNode{key: nodeKey(ns.spec), group: ns.group, spec: ns.spec, waiting: true}
		if ns.spec.Key != "" && len(byKey[n.key]) > 0 {
			return nil, errorf(http.StatusUnprocessableEntity, "two jobs of the run are keyed %q: give them keys of their own", n.key)
		}
		// Jobs without a key are keyed by their name, which two may share.
		byKey[n.key] = append(byKey[n.key], n)
		if n.group != "" {
			groups[n.group] = append(groups[n.group], n)
		}
		g.nodes = append(g.nodes, n)
	}
	for _, n := range g.nodes {
		for _, need := range n.spec.Needs {
			deps := groups[need]
			switch m := byKey[need]; {
			case len(m) > 1:
				return nil, errorf(http.StatusUnprocessableEntity, "job %q needs %q, the name of several jobs of the run: give them keys", n.key, need)
			case len(m) == 1:
				deps = m
			}
			if len(deps) == 0 {
				return nil, errorf(http.StatusUnprocessableEntity, "job %q needs %q, which is not a job of the run", n.key, need)
			}
			n.needs = append(n.needs, deps...)
		}
	}
	if err := g.checkAcyclic(); err != nil {
		return nil, err
	}
	return g, nil
}

func nodeKey(spec JobSpec) string {
	switch {
	case spec.Key != "":
		return spec.Key
	case spec.Name != "":
		return spec.Name
	}
	return "build"
}

// checkAcyclic refuses needs that go round in a circle.
func (g *runGraph) checkAcyclic() error {
	const (
		unseen = iota
		visiting
		done
	)
	state := map[*graphNode]int{}
	var visit func(n *graphNode) error
	visit = func(n *graphNode) error {
		switch state[n] {
		case visiting:
			return errorf(http.StatusUnprocessableEntity, "the needs of job %q go round in a circle", n.key)
		case done:
			return nil
		}
		state[n] = visiting
		for _, m := range n.needs {
			if err := visit(m); err != nil {
				return err
			}
		}
		state[n] = done
		return nil
	}
	for _, n := range g.nodes {
		if err := visit(n); err != nil {
			return err
		}
	}
	return nil
}

// attempt is the number of the run's latest attempt.
func (g *runGraph) attempt() int { return len(g.attempts) }

func (g *runGraph) current() *runAttempt { return g.attempts[len(g.attempts)-1] }

// latestAt is n's execution in attempt a or the last one before it; nil if none.
func (n *graphNode) latestAt(a int) *job {
	for i := len(n.execs) - 1; i >= 0; i-- {
		if n.execs[i].attempt <= a {
			return n.execs[i]
		}
	}
	return nil
}

// latest is n's execution that counts now: nil while the latest attempt waits to run it.
func (n *graphNode) latest() *job {
	if n.waiting || len(n.execs) == 0 {
		return nil
	}
	return n.execs[len(n.execs)-1]
}

// statusAt is the status and conclusion of the run as of attempt a: completed when
// the latest execution of every job up to a completed; in progress once a job of
// attempt a started or completed; else queued.
func (g *runGraph) statusAt(a int) (status, conclusion string) {
	var conclusions []string
	for _, n := range g.nodes {
		j := n.latestAt(a)
		if a == g.attempt() {
			j = n.latest()
		}
		if j == nil || j.status != StatusCompleted {
			continue
		}
		conclusions = append(conclusions, j.conclusion)
	}
	if len(conclusions) == len(g.nodes) {
		return StatusCompleted, runConclusion(conclusions)
	}
	for _, j := range g.attempts[a-1].jobs {
		if j.status != StatusQueued {
			return StatusInProgress, ""
		}
	}
	return StatusQueued, ""
}

// runConclusion is a completed run's conclusion from its jobs': failure if one failed,
// else ConclusionCancelled if one was, else skipped if every one was, else success.
func runConclusion(jobs []string) string {
	out, skipped := ConclusionSuccess, 0
	for _, c := range jobs {
		switch c {
		case ConclusionFailure:
			return ConclusionFailure
		case ConclusionCancelled:
			out = ConclusionCancelled
		case ConclusionSkipped:
			skipped++
		}
	}
	if len(jobs) > 0 && skipped == len(jobs) {
		return ConclusionSkipped
	}
	return out
}

// needsDone reports whether every job n needs has completed, and whether one of them
// did not succeed (n is then skipped).
func (n *graphNode) needsDone() (done, skip bool) {
	for _, m := range n.needs {
		j := m.latest()
		if j == nil || j.status != StatusCompleted {
			return false, false
		}
		if j.conclusion != ConclusionSuccess {
			skip = true
		}
	}
	return true, skip
}

// latestJobs are the latest execution of each job that has one in the latest attempt,
// by ID: what GET …/runs/{id}/jobs lists by default (filter=latest).
func (g *runGraph) latestJobs() []*job {
	var out []*job
	for _, n := range g.nodes {
		if j := n.latest(); j != nil {
			out = append(out, j)
		}
	}
	sortJobsByID(out)
	return out
}

// Workflows is the re-run protocol's logic over the runs' graphs, and its Go API
// (rerun_api.go). Its …Locked methods run under Sim.mu.
type Workflows struct{ s *Sim }

// startLocked gives run wr the graph g (its first attempt) and queues the jobs that
// need none; the others wait. It returns the jobs queued.
func (w *Workflows) startLocked(wr *workflowRun, g *runGraph) []*job {
	g.run, g.attempts = wr, wr.graph.attempts
	wr.graph = g
	return w.advanceLocked(g)
}

// addJobLocked adds a job that needs none to wr's latest attempt (QueueJob) and returns
// its execution, to be queued.
func (w *Workflows) addJobLocked(wr *workflowRun, spec JobSpec) *job {
	n := &graphNode{key: nodeKey(spec), spec: spec}
	wr.graph.nodes = append(wr.graph.nodes, n)
	wr.graph.current().done = time.Time{}
	return w.newExecLocked(wr.graph, n)
}

// newExecLocked makes n's execution in g's latest attempt.
func (w *Workflows) newExecLocked(g *runGraph, n *graphNode) *job {
	j := w.s.newJobLocked(g.run, n.spec)
	j.node, j.attempt = n, g.attempt()
	n.execs = append(n.execs, j)
	a := g.current()
	a.jobs = append(a.jobs, j)
	return j
}

// advanceLocked makes the executions of the waiting jobs whose needs completed: skipped
// at once when one did not succeed, else queued (every one made first, then queued, in
// the run's order). It returns those queued.
func (w *Workflows) advanceLocked(g *runGraph) []*job {
	s := w.s
	var queue []*job
	for changed := true; changed; {
		changed = false
		for _, n := range g.nodes {
			if !n.waiting {
				continue
			}
			done, skip := n.needsDone()
			if !done {
				continue
			}
			n.waiting, changed = false, true
			j := w.newExecLocked(g, n)
			if !skip {
				queue = append(queue, j)
				continue
			}
			now := s.now()
			j.status, j.conclusion, j.started, j.completed = StatusCompleted, ConclusionSkipped, now, now
			j.events = append(j.events, TimelineEvent{Type: EventCompleted, Time: now})
			g.run.updated = now
			s.emitJobLocked(j, "completed")
		}
	}
	for _, j := range queue {
		s.enqueueLocked(j)
	}
	w.noteDoneLocked(g)
	return queue
}

// completedLocked moves j's run on once j completed: the jobs that needed it.
func (w *Workflows) completedLocked(j *job) {
	if j.node == nil || j.attempt != j.run.graph.attempt() {
		return
	}
	w.advanceLocked(j.run.graph)
}

// noteDoneLocked records when g's latest attempt completed.
func (w *Workflows) noteDoneLocked(g *runGraph) {
	a := g.current()
	if st, _ := g.statusAt(a.number); st == StatusCompleted && a.done.IsZero() {
		a.done = w.s.now()
	}
}

// rerunError is a refusal of a re-run endpoint, with the documentation URL GitHub
// gives for it.
func rerunError(msg, docs string) *apiError {
	e := newError(http.StatusForbidden, msg)
	e.DocumentationURL = docs
	return e
}

// rerunLocked makes the next attempt of g's completed run: targets and the jobs that
// need them, transitively, are run again (requested are the jobs the caller named).
// running is the refusal while the run has not completed.
func (w *Workflows) rerunLocked(g *runGraph, how string, targets []*graphNode, requested []*job, running, docs string) *apiError {
	if st, _ := g.statusAt(g.attempt()); st != StatusCompleted {
		return rerunError(running, docs)
	}
	if g.attempt() > maxReruns {
		return rerunError(msgRunNotRetriable, docs)
	}
	again := map[*graphNode]bool{}
	for _, n := range targets {
		again[n] = true
	}
	// Nodes are in declaration order and needs may point forward: repeat until stable.
	for changed := true; changed; {
		changed = false
		for _, n := range g.nodes {
			if again[n] {
				continue
			}
			for _, m := range n.needs {
				if again[m] {
					again[n], changed = true, true
					break
				}
			}
		}
	}
	now := w.s.now()
	g.attempts = append(g.attempts, &runAttempt{number: g.attempt() + 1, started: now, how: how, requested: requested})
	for _, n := range g.nodes {
		if again[n] {
			n.waiting = true
		}
	}
	g.run.updated = now
	w.advanceLocked(g)
	return nil
}
