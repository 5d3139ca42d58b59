// Go API: queueing jobs and runs, and reading jobs, runners, deliveries and counts.

package github

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// QueueJob queues one job. Without RunID it gets a run of its own; with RunID it is
// added to that run's latest attempt. Needs are for QueueRun.
func (s *Sim) QueueJob(spec JobSpec) (Job, error) {
	if len(spec.Needs) > 0 {
		return Job{}, errorf(http.StatusUnprocessableEntity, "needs are declared with the run's jobs: queue them with QueueRun")
	}
	if _, err := jobFromSpec(spec); err != nil {
		return Job{}, err
	}
	s.lock()
	defer s.unlock()
	var wr *workflowRun
	if spec.RunID != 0 {
		wr = s.st.runs[spec.RunID]
		if wr == nil || !strings.EqualFold(wr.repo.fullName(), spec.Repo) {
			return Job{}, errorf(http.StatusNotFound, "run %d of %s not found", spec.RunID, spec.Repo)
		}
	} else {
		r := s.st.repoByName(spec.Repo)
		if r == nil {
			return Job{}, errorf(http.StatusNotFound, "repository %q not found", spec.Repo)
		}
		wr = s.newRunLocked(r, spec.Workflow, spec.Branch, spec.Actor)
	}
	j := s.wf.addJobLocked(wr, spec)
	s.enqueueLocked(j)
	return jobView(j), nil
}

// QueueRun queues a workflow run with its jobs (and matrix): those that need no other
// job at once, the others once their needs succeeded (Run.Waiting).
func (s *Sim) QueueRun(spec RunSpec) (Run, error) {
	if spec.Matrix < 0 || spec.Matrix > 256 {
		return Run{}, errorf(http.StatusUnprocessableEntity, "a matrix has at most 256 jobs")
	}
	nodes := make([]nodeSpec, 0, len(spec.Jobs)+spec.Matrix)
	for _, js := range spec.Jobs {
		nodes = append(nodes, nodeSpec{spec: js})
	}
	for i := range spec.Matrix {
		js := spec.Template
		name := js.Name
		if name == "" {
			name = "build"
		}
		group := js.Key
		if group == "" {
			group = name
		}
		js.Name, js.Key = fmt.Sprintf("%s (%d)", name, i+1), fmt.Sprintf("%s (%d)", group, i+1)
		nodes = append(nodes, nodeSpec{spec: js, group: group})
	}
	if len(nodes) == 0 {
		return Run{}, errorf(http.StatusUnprocessableEntity, "a run needs at least one job")
	}
	s.lock()
	defer s.unlock()
	r := s.st.repoByName(spec.Repo)
	if r == nil {
		return Run{}, errorf(http.StatusNotFound, "repository %q not found", spec.Repo)
	}
	g, err := newRunGraph(nodes)
	if err != nil {
		return Run{}, err
	}
	wr := s.newRunLocked(r, spec.Workflow, spec.Branch, spec.Actor)
	queued := s.wf.startLocked(wr, g)
	out := Run{ID: wr.id}
	for _, j := range queued {
		out.Jobs = append(out.Jobs, jobView(j))
	}
	for _, n := range g.nodes {
		if n.waiting {
			out.Waiting = append(out.Waiting, n.key)
		}
	}
	return out, nil
}

func (s *Sim) newRunLocked(r *repo, workflow, branch, actor string) *workflowRun {
	if workflow == "" {
		workflow = "CI"
	}
	if branch == "" {
		branch = "main"
	}
	if actor == "" {
		actor = "sim-user"
	}
	r.runNum++
	now := s.now()
	wr := &workflowRun{id: s.st.newID(), number: r.runNum, repo: r, name: workflow,
		path:       ".github/workflows/" + strings.ToLower(strings.ReplaceAll(workflow, " ", "-")) + ".yml",
		workflowID: int64(len(workflow)) + 100, headBranch: branch, event: "push", actor: actor, created: now, updated: now}
	wr.headSHA = fmt.Sprintf("%040x", wr.id)
	wr.graph = &runGraph{run: wr, attempts: []*runAttempt{{number: 1, started: now}}}
	r.runs = append(r.runs, wr)
	s.st.runs[wr.id] = wr
	return wr
}

// jobFromSpec checks a job's spec and returns the job it describes, not yet part of
// any run.
func jobFromSpec(spec JobSpec) (*job, error) {
	labels := spec.Labels
	if len(labels) == 0 {
		labels = []string{LabelSelfHosted}
	}
	lower, key := normalizeLabels(labels)
	if len(lower) == 0 {
		return nil, errorf(http.StatusUnprocessableEntity, "a job needs at least one non-empty label")
	}
	concl := spec.Conclusion
	if e := validConclusion(&concl); e != nil {
		return nil, fromAPI(e)
	}
	if spec.Duration < 0 {
		return nil, errorf(http.StatusUnprocessableEntity, "duration must not be negative")
	}
	if err := ValidateContainers(spec.Container, spec.Services, spec.ContainerOptions); err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, "%s", err)
	}
	name := spec.Name
	if name == "" {
		name = "build"
	}
	return &job{name: name, labels: slices.Clone(labels), lower: lower, labelKey: key,
		duration: time.Duration(spec.Duration), conclude: concl, container: spec.Container, services: maps.Clone(spec.Services),
		containerOptions: spec.ContainerOptions.Clone(), status: StatusQueued}, nil
}

// newJobLocked adds a job of spec, which jobFromSpec accepted, to run wr.
func (s *Sim) newJobLocked(wr *workflowRun, spec JobSpec) *job {
	j, err := jobFromSpec(spec)
	if err != nil {
		panic("newJobLocked: the spec was checked: " + err.Error())
	}
	j.id, j.run, j.created = s.st.newID(), wr, s.now()
	wr.jobs = append(wr.jobs, j)
	s.st.jobs[j.id] = j
	s.st.jobOrder = append(s.st.jobOrder, j)
	return j
}

func jobView(j *job) Job {
	v := Job{ID: j.id, RunID: j.run.id, Repo: j.repo().fullName(), Name: j.name, Labels: slices.Clone(j.labels),
		Status: j.status, Conclusion: j.conclusion, RunnerID: j.runnerID, RunnerName: j.runnerName,
		Duration: Duration(j.duration), Container: j.container, Services: maps.Clone(j.services), ContainerOptions: j.containerOptions.Clone(),
		QueuedAt: j.created, Timeline: slices.Clone(j.events), RunAttempt: j.attempt}
	if j.node != nil {
		v.Key = j.node.key
	}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	v.AssignedAt, v.StartedAt, v.DoneAt = at(j.assigned), at(j.started), at(j.completed)
	return v
}

// Job returns a job and its timeline.
func (s *Sim) Job(id int64) (Job, bool) {
	s.lock()
	defer s.unlock()
	j := s.st.jobs[id]
	if j == nil {
		return Job{}, false
	}
	return jobView(j), true
}

// Jobs returns every job in the order they were queued.
func (s *Sim) Jobs() []Job {
	s.lock()
	defer s.unlock()
	out := make([]Job, 0, len(s.st.jobOrder))
	for _, j := range s.st.jobOrder {
		out = append(out, jobView(j))
	}
	return out
}

// Runners returns every registered runner, by ID.
func (s *Sim) Runners() []Runner {
	s.lock()
	defer s.unlock()
	out := make([]Runner, 0, len(s.st.runners))
	for _, r := range s.st.runners {
		v := Runner{ID: r.id, Name: r.name, Scope: r.scope.path(), GroupID: r.group.id, Labels: slices.Clone(r.labels),
			Online: r.online, Busy: r.busy(), Ephemeral: r.ephemeral}
		if r.job != nil {
			v.JobID = r.job.id
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// JITSpec asks for a JIT runner through the Go API, as generate-jitconfig does. Scope
// is "owner/repo", "org" or "enterprises/slug".
type JITSpec struct {
	Scope   string   `json:"scope"`
	Name    string   `json:"name"`
	Labels  []string `json:"labels"`
	GroupID int64    `json:"runner_group_id"`
}

// GenerateJITConfig registers an ephemeral runner and returns its config, as the
// REST endpoint does: the runner has exactly spec.Labels (GitHub adds no self-hosted, OS
// or architecture label to a JIT runner); its URL is Options.URL or the last request's root.
func (s *Sim) GenerateJITConfig(spec JITSpec) (runnerapi.Config, error) {
	req := jitRequest{Name: spec.Name, Labels: spec.Labels, RunnerGroupID: &spec.GroupID}
	if spec.GroupID == 0 {
		one := int64(1)
		req.RunnerGroupID = &one
	}
	if e := req.validate(); e != nil {
		return runnerapi.Config{}, fromAPI(e)
	}
	s.lock()
	defer s.unlock()
	sc, ok := s.st.resolveSpec(spec.Scope)
	if !ok {
		return runnerapi.Config{}, errorf(http.StatusNotFound, "scope %q not found", spec.Scope)
	}
	g, e := s.st.groupByID(sc, *req.RunnerGroupID)
	if e != nil {
		return runnerapi.Config{}, fromAPI(e)
	}
	r, e := s.registerRunnerLocked(sc, registration{name: req.Name, labels: req.Labels, group: g, ephemeral: true})
	if e != nil {
		return runnerapi.Config{}, fromAPI(e)
	}
	return s.runnerConfig(s.publicURL(), r), nil
}

// resolveSpec resolves "owner/repo", "org" or "enterprises/slug".
func (st *state) resolveSpec(spec string) (scopeRef, bool) {
	if slug, ok := strings.CutPrefix(spec, "enterprises/"); ok {
		return st.resolve(scopeEnterprise, slug, "", "", "")
	}
	if owner, name, ok := strings.Cut(spec, "/"); ok {
		return st.resolve(scopeRepo, "", "", owner, name)
	}
	return st.resolve(scopeOrg, "", spec, "", "")
}

// Deliveries returns every webhook delivery attempt, oldest first.
func (s *Sim) Deliveries() []Delivery {
	s.lock()
	defer s.unlock()
	out := make([]Delivery, 0, len(s.st.deliveries))
	for _, d := range s.st.deliveries {
		out = append(out, Delivery{ID: d.id, GUID: d.guid, HookID: d.hook.id, Event: d.event, Action: d.action,
			Redelivery: d.redelivery, Done: d.done, StatusCode: d.statusCode, Status: d.status,
			CreatedAt: d.created, DeliveredAt: d.deliveredAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Summary counts the simulator's objects.
func (s *Sim) Summary() Summary {
	s.lock()
	defer s.unlock()
	sum := Summary{Enterprises: len(s.st.enterprises), Orgs: len(s.st.orgs), Repos: len(s.st.reposByID),
		Apps: len(s.st.apps), Installations: len(s.st.installs), Runners: len(s.st.runners),
		Deliveries: len(s.st.deliveries), Jobs: map[string]int{}}
	for _, r := range s.st.runners {
		if r.online {
			sum.RunnersOnline++
		}
		if r.busy() {
			sum.RunnersBusy++
		}
	}
	for _, j := range s.st.jobOrder {
		sum.Jobs[j.status]++
	}
	return sum
}

// CallCounts returns how often each REST route was called ("METHOD /pattern"; calls
// that matched no route count under "unmatched").
func (s *Sim) CallCounts() map[string]CallCount { return s.calls.snapshot() }

// ResetCallCounts zeroes the call counts.
func (s *Sim) ResetCallCounts() { s.calls.reset() }

// SetFaults replaces the fault-injection settings and reseeds their random source.
func (s *Sim) SetFaults(f Faults) { s.faults.set(f) }

// Faults returns the fault-injection settings.
func (s *Sim) Faults() Faults { return s.faults.get() }

// SetRateLimits replaces the rate-limit settings and starts every window afresh.
func (s *Sim) SetRateLimits(rl RateLimits) { s.rl.set(rl) }

// RateLimits returns the rate-limit settings, defaults filled in.
func (s *Sim) RateLimits() RateLimits { return s.rl.config() }

// SetFailJobsWithoutRunner sets the switch that fails a newly queued job at once when
// no registered runner in scope could ever take it.
func (s *Sim) SetFailJobsWithoutRunner(on bool) {
	s.lock()
	defer s.unlock()
	s.st.failWithoutRunner = on
}
