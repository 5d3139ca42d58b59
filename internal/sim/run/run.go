package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	"github.com/gantry-dev/gantry/internal/sim/fault"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

const (
	namespace       = "ci"
	systemNamespace = "gantry-system"
	poolName        = "linux"
	org             = "acme"
	simToken        = "ghp_gantrysimulatedtoken000000000000000"
	hookSecret      = "gantry-sim-webhook-secret"
)

// Options configure a run.
type Options struct {
	// BinDir holds the control-plane binaries (hack/k8s-bins.sh --print).
	BinDir string
	// OutDir receives report.json, report.html and the processes' logs.
	OutDir string
	// Gantry is the gantry binary to run as the controller (default: this executable).
	Gantry string
	// GantryEnv is added to the controller's environment.
	GantryEnv []string
	// Out receives progress and the live view.
	Out io.Writer
	// Seed makes Poisson arrivals reproducible.
	Seed uint64
}

// Run runs a scenario end to end and returns its report (also written to OutDir).
func Run(ctx context.Context, sc Scenario, opts Options) (*Report, error) {
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	// The live view, the fault schedule and the setup all write progress.
	opts.Out = &syncWriter{w: opts.Out}
	if opts.Gantry == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Gantry = exe
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	say := func(format string, args ...any) { fmt.Fprintf(opts.Out, format+"\n", args...) }
	host := hostNow()

	// The cluster.
	say("Scenario %s: %s", sc.Name, sc.Description)
	cl, err := cluster.Start(ctx, cluster.Options{
		BinDir: opts.BinDir, WorkDir: filepath.Join(opts.OutDir, "cluster"),
		Nodes: sc.Nodes, PodStartDelay: sc.PodStartDelay, NodeMonitorGracePeriod: sc.NodeMonitorGracePeriod, Log: opts.Out,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = cl.Stop() }()

	// The GitHub simulator.
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	simURL := "http://" + ln.Addr().String()
	sim := simgithub.New(simgithub.Options{
		URL:               simURL,
		PATs:              []simgithub.PAT{{Token: simToken, Login: "gantry-sim", Scopes: []string{"repo", "admin:org", "manage_runners:org", "admin:org_hook"}}},
		RateLimits:        sc.RateLimits,
		WebhookWorkers:    16,
		RunnerLostTimeout: sc.RunnerLostTimeout,
	})
	defer sim.Close()
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	if _, err := sim.CreateOrg(simgithub.OrgSpec{Login: org}); err != nil {
		return nil, err
	}
	for _, name := range repoNames(sc) {
		if _, err := sim.CreateRepo(simgithub.RepoSpec{Owner: org, Name: name}); err != nil {
			return nil, err
		}
	}
	say("GitHub simulator on %s", simURL)

	// The controller, as a separate process, exactly as it runs in a cluster.
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	webhookAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	if _, err := sim.CreateHook(simgithub.HookSpec{Org: org, URL: "http://" + webhookAddr + "/webhook", Secret: hookSecret, Events: []string{"workflow_job"}}); err != nil {
		return nil, err
	}
	if err := setupNamespaces(ctx, cl.Client, simURL, sc); err != nil {
		return nil, err
	}
	ctrl, err := newController(opts, sc, cl.Kubeconfig, webhookAddr, ports[1], ports[2])
	if err != nil {
		return nil, err
	}
	defer ctrl.stop()
	pid, err := ctrl.Start(ctx)
	if err != nil {
		return nil, err
	}
	say("Gantry controller running (pid %d, logs in %s)", pid, ctrl.logPath)

	// Agents, the sampler, the workload and its faults.
	var agentOpts agent.Options
	if sc.RunnerLostTimeout > 0 {
		agentOpts.RenewEvery = sc.RunnerLostTimeout / 4
	}
	agents, err := agent.New(cl.Config, namespace, agentOpts)
	if err != nil {
		return nil, err
	}
	actx, stopAgents := context.WithCancel(ctx)
	agentsDone := make(chan struct{})
	go func() { _ = agents.Run(actx); close(agentsDone) }()
	defer func() { stopAgents(); <-agentsDone }()

	rctx, stopRunnerWatch := context.WithCancel(ctx)
	defer stopRunnerWatch()
	runners, err := watchRunners(rctx, cl.Config)
	if err != nil {
		return nil, err
	}

	smp := newSampler(runners, sim, ctrl.pid, opts.Out)
	sctx, stopSampler := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() { smp.run(sctx); close(samplerDone) }()
	defer func() { stopSampler(); <-samplerDone }()

	start := time.Now()
	var injections []fault.Injection
	faultsDone := make(chan struct{})
	fctx, stopFaults := context.WithCancel(ctx)
	// On every exit path the schedule stops before the controller does: a restart in
	// flight must not outlive the run.
	defer func() { stopFaults(); <-faultsDone }()
	if sc.Faults != nil {
		sched := *sc.Faults
		if sched.Seed == 0 {
			sched.Seed = int64(opts.Seed) //nolint:gosec // any bit pattern is a fine seed
		}
		go func() {
			defer close(faultsDone)
			injections = fault.Run(fctx, sched, start, fault.Targets{
				GitHub: sim, Controller: ctrl, Nodes: simNodes{cl: cl, agents: agents}, Log: opts.Out,
			})
		}()
	} else {
		close(faultsDone)
	}
	queued, err := queueWorkload(ctx, sim, sc, opts.Seed)
	if err != nil {
		return nil, err
	}
	finished, lastDone := waitJobs(ctx, sim, len(queued), start.Add(sc.Timeout))
	// The schedule ends with the workload at the latest; a step still ahead is
	// reported as not injected.
	stopFaults()
	<-faultsDone
	if ctrl.pid() == 0 {
		// The run ended while a fault had the controller down: it drains the pool.
		if _, err := ctrl.Start(ctx); err != nil {
			return nil, err
		}
	}
	drainStart := time.Now()
	drained := waitDrained(ctx, cl.Client, runners, sim, drainStart.Add(drainTimeout(sc)))
	drainedAt := time.Now()
	stopSampler()
	<-samplerDone

	var lostNodePods map[string]int
	for _, in := range injections {
		if in.Kind == fault.KindNodeLost && in.Node != "" {
			if lostNodePods == nil {
				lostNodePods = map[string]int{}
			}
			pods, err := cl.RunnerPodsOn(ctx, in.Node)
			if err == nil {
				lostNodePods[in.Node] = len(pods)
			}
		}
	}
	leftover := leftovers(ctx, cl.Client, sim)
	cpu := processCPU()
	stopAgents()
	<-agentsDone
	usage := ctrl.stop()
	if usage.Processes > 0 {
		cpu["gantry controller"] = round1(usage.CPUSeconds) // every process, killed ones too
	}
	rep := buildReport(sc, start, reportInputs{
		jobs: sim.Jobs(), queued: queued, events: agents.Events(), runnersSeen: runners.times(), calls: sim.CallCounts(),
		samples: smp.samples(), finished: finished, lastJobDone: lastDone,
		drained: drained, drainedAt: drainedAt, controller: usage,
		injections: injections, lostNodePods: lostNodePods, leftover: leftover,
		host: host, hostEnd: hostNow(), cpu: cpu,
	})
	for _, e := range agents.Errors() {
		rep.AgentErrors = append(rep.AgentErrors, e.Error())
	}
	if err := rep.write(opts.OutDir); err != nil {
		return rep, err
	}
	return rep, nil
}

// drainTimeout bounds the wait for the pool to drain: two minutes, plus what the
// scenario's recovery settings can hold a runner for after its job.
func drainTimeout(sc Scenario) time.Duration {
	d := 2 * time.Minute
	if sc.Faults != nil {
		grace := sc.PodTerminationGracePeriod
		if grace == 0 {
			grace = 30 * time.Second
		}
		d += sc.NodeLostTimeout + sc.FailedRunnerRetention + sc.RunnerLostTimeout + sc.UnreachableToleration + sc.NodeMonitorGracePeriod + grace
	}
	return d
}

// repoNames are the repositories of acme the workload needs.
func repoNames(sc Scenario) []string {
	if sc.Trace == nil {
		return []string{"app"}
	}
	seen := map[string]bool{}
	var out []string
	for _, j := range sc.Trace.Jobs {
		if n := strings.ToLower(j.RepoName()); !seen[n] {
			seen[n] = true
			out = append(out, j.RepoName())
		}
	}
	return out
}

func setupNamespaces(ctx context.Context, c client.Client, simURL string, sc Scenario) error {
	for _, ns := range []string{namespace, systemNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		// Pods are admitted once the namespace's default ServiceAccount exists.
		if err := cluster.WaitForDefaultServiceAccount(ctx, c, ns); err != nil {
			return err
		}
	}
	pool := &v1alpha1.RunnerPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: poolName},
		Spec: v1alpha1.RunnerPoolSpec{
			GitHub: v1alpha1.GitHubSpec{URL: simURL + "/" + org, CredentialsSecretRef: v1alpha1.SecretReference{Name: "github-creds"}},
			Labels: sc.poolLabels(), MinIdle: sc.MinIdle, MaxRunners: sc.MaxRunners, RegistrationMode: sc.Mode,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: v1alpha1.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:latest",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
			}}}},
		},
	}
	if sc.NodeLostTimeout > 0 {
		pool.Spec.Recovery.NodeLostTimeout = &metav1.Duration{Duration: sc.NodeLostTimeout}
	}
	if sc.PodTerminationGracePeriod > 0 {
		secs := int64(sc.PodTerminationGracePeriod.Seconds())
		pool.Spec.Template.Spec.TerminationGracePeriodSeconds = &secs
	}
	if sc.UnreachableToleration > 0 {
		secs := int64(sc.UnreachableToleration.Seconds())
		for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
			pool.Spec.Template.Spec.Tolerations = append(pool.Spec.Template.Spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs,
			})
		}
	}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "gantry-webhook"},
			Data: map[string][]byte{manager.WebhookSecretKey: []byte(hookSecret)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "github-creds"},
			Data: map[string][]byte{"github_token": []byte(simToken)}},
		pool,
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// simNodes loses nodes of the simulated cluster, the runner processes on them first.
type simNodes struct {
	cl     *cluster.Cluster
	agents *agent.Agents
}

func (n simNodes) BusiestNode(ctx context.Context) (string, error) { return n.cl.BusiestNode(ctx) }

func (n simNodes) LoseNode(ctx context.Context, node, how string) (pods, busy int, err error) {
	// The machine dies: its runner processes stop talking to GitHub at once.
	_, busy = n.agents.LoseNode(node)
	lost, err := n.cl.LoseNode(ctx, node, cluster.NodeLoss(how))
	return len(lost), busy, err
}

func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// queuedJob is a job the workload queued and the conclusion it asked its runner to
// report.
type queuedJob struct {
	id         int64
	conclusion string
}

// queueWorkload queues the scenario's jobs — a burst, Poisson arrivals, or a trace
// replay — and returns them once the last is queued.
func queueWorkload(ctx context.Context, sim *simgithub.Sim, sc Scenario, seed uint64) ([]queuedJob, error) {
	var out []queuedJob
	add := func(jobs ...simgithub.Job) {
		for _, j := range jobs {
			out = append(out, queuedJob{id: j.ID, conclusion: "success"})
		}
	}
	if sc.Trace != nil {
		return replay(ctx, sim, sc)
	}
	tmpl := simgithub.JobSpec{Repo: org + "/app", Labels: sc.jobLabels(), Duration: simgithub.Duration(sc.JobDuration)}
	for left := sc.Burst; left > 0; {
		n := min(left, 256) // GitHub's matrix limit
		run, err := sim.QueueRun(simgithub.RunSpec{Repo: org + "/app", Workflow: "CI", Matrix: n, Template: tmpl})
		if err != nil {
			return nil, fmt.Errorf("queueing the burst: %w", err)
		}
		add(run.Jobs...)
		left -= n
	}
	if sc.Rate <= 0 || sc.Steady <= 0 {
		return out, nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	end := time.Now().Add(sc.Steady)
	next := time.Now()
	for {
		next = next.Add(time.Duration(rng.ExpFloat64() / sc.Rate * float64(time.Second)))
		if next.After(end) {
			return out, nil
		}
		if !fault.SleepUntil(ctx, next) {
			return nil, ctx.Err()
		}
		j, err := sim.QueueJob(tmpl)
		if err != nil {
			return nil, fmt.Errorf("queueing a job: %w", err)
		}
		add(j)
	}
}

// replay queues a trace's jobs at their times, each in its repository of acme and in
// its run (the first job of a run key creates the run).
func replay(ctx context.Context, sim *simgithub.Sim, sc Scenario) ([]queuedJob, error) {
	speed := sc.TraceSpeed
	if speed <= 0 {
		speed = 1
	}
	start := time.Now()
	runs := map[string]int64{}
	var out []queuedJob
	first := sc.Trace.Jobs[0].At
	for _, tj := range sc.Trace.Jobs {
		at := start.Add(time.Duration(float64((tj.At - first).Duration()) / speed))
		if !fault.SleepUntil(ctx, at) {
			return nil, ctx.Err()
		}
		spec := simgithub.JobSpec{
			Repo: org + "/" + tj.RepoName(), Labels: tj.Labels, Name: tj.Name, Workflow: tj.Workflow, Branch: tj.Branch,
			Duration:   simgithub.Duration(time.Duration(float64(tj.Duration.Duration()) / speed)),
			Conclusion: tj.Conclusion,
		}
		key := ""
		if tj.Run != "" {
			key = strings.ToLower(tj.RepoName()) + "\x00" + string(tj.Run)
			spec.RunID = runs[key]
		}
		j, err := sim.QueueJob(spec)
		if err != nil {
			return nil, fmt.Errorf("replaying a job of %s queued at %.3fs: %w", tj.Repo, float64(tj.At), err)
		}
		if key != "" {
			runs[key] = j.RunID
		}
		concl := tj.Conclusion
		if concl == "" {
			concl = "success"
		}
		out = append(out, queuedJob{id: j.ID, conclusion: concl})
	}
	return out, nil
}

// waitJobs waits until every one of the n queued jobs completed, or the deadline.
func waitJobs(ctx context.Context, sim *simgithub.Sim, n int, deadline time.Time) (bool, time.Time) {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		jobs := sim.Jobs()
		done := 0
		var last time.Time
		for _, j := range jobs {
			if j.Status == simgithub.StatusCompleted {
				done++
				if j.DoneAt != nil && j.DoneAt.After(last) {
					last = *j.DoneAt
				}
			}
		}
		if len(jobs) >= n && done == len(jobs) {
			return true, last
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false, time.Time{}
}

// waitDrained waits until no Runner is left in the cluster nor on GitHub: watched,
// then confirmed by a List.
func waitDrained(ctx context.Context, c client.Client, runners *runnerWatch, sim *simgithub.Sim, deadline time.Time) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if len(runners.runners()) == 0 && len(sim.Runners()) == 0 {
			var rs v1alpha1.RunnerList
			if err := c.List(ctx, &rs, client.InNamespace(namespace)); err == nil && len(rs.Items) == 0 {
				return true
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}

func leftovers(ctx context.Context, c client.Client, sim *simgithub.Sim) Leftover {
	var lo Leftover
	managed := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	var rs v1alpha1.RunnerList
	if err := c.List(ctx, &rs, client.InNamespace(namespace)); err == nil {
		lo.Runners = len(rs.Items)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), managed); err == nil {
		lo.Pods = len(pods.Items)
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(namespace), managed); err == nil {
		lo.Secrets = len(secrets.Items)
	}
	lo.GitHubRunners = len(sim.Runners())
	return lo
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// errNotStarted is returned by the controller's Kill when no process runs.
var errNotStarted = errors.New("no controller process is running")
