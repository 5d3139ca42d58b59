package run

import (
	"context"

	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

const (
	namespace       = "ci"
	systemNamespace = "gantry-system"
	poolName        = "linux"
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
	// Out receives progress and the live view.
	Out io.Writer
	// Seed makes Poisson arrivals reproducible.
	Seed uint64
}

// Run runs a scenario end to end and returns its report (also written to OutDir).
func Run(ctx context.Context, sc Scenario, opts Options) (*Report, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
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

	// The cluster.
	say("Scenario %s: %s", sc.Name, sc.Description)
	cl, err := cluster.Start(ctx, cluster.Options{
		BinDir: opts.BinDir, WorkDir: filepath.Join(opts.OutDir, "cluster"),
		Nodes: sc.Nodes, PodStartDelay: sc.PodStartDelay, Log: opts.Out,
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
		URL:            simURL,
		PATs:           []simgithub.PAT{{Token: simToken, Login: "gantry-sim", Scopes: []string{"repo", "admin:org", "manage_runners:org", "admin:org_hook"}}},
		RateLimits:     sc.RateLimits,
		WebhookWorkers: 16,
	})
	defer sim.Close()
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	if _, err := sim.CreateOrg(simgithub.OrgSpec{Login: "acme"}); err != nil {
		return nil, err
	}
	if _, err := sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "app"}); err != nil {
		return nil, err
	}
	say("GitHub simulator on %s", simURL)

	// The controller, as a separate process, exactly as it runs in a cluster.
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	webhookAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	if _, err := sim.CreateHook(simgithub.HookSpec{Org: "acme", URL: "http://" + webhookAddr + "/webhook", Secret: hookSecret, Events: []string{"workflow_job"}}); err != nil {
		return nil, err
	}
	if err := setupNamespaces(ctx, cl.Client, simURL, sc); err != nil {
		return nil, err
	}
	ctrlProc, err := startController(ctx, opts, cl.Kubeconfig, webhookAddr, ports[1], ports[2])
	if err != nil {
		return nil, err
	}
	defer ctrlProc.stop()
	say("Gantry controller running (pid %d, logs in %s)", ctrlProc.cmd.Process.Pid, ctrlProc.logPath)

	// Agents, the sampler, the workload.
	agents, err := agent.New(cl.Config, namespace)
	if err != nil {
		return nil, err
	}
	actx, stopAgents := context.WithCancel(ctx)
	agentsDone := make(chan struct{})
	go func() { _ = agents.Run(actx); close(agentsDone) }()
	defer func() { stopAgents(); <-agentsDone }()

	smp := newSampler(cl.Client, sim, ctrlProc.cmd.Process.Pid, opts.Out)
	sctx, stopSampler := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() { smp.run(sctx); close(samplerDone) }()

	start := time.Now()
	if err := queueWorkload(ctx, sim, sc, opts.Seed); err != nil {
		stopSampler()
		<-samplerDone
		return nil, err
	}
	finished, lastDone := waitJobs(ctx, sim, sc, start.Add(sc.Timeout))
	drainStart := time.Now()
	drained := waitDrained(ctx, cl.Client, sim, drainStart.Add(2*time.Minute))
	drainedAt := time.Now()
	stopSampler()
	<-samplerDone

	cpu, peak := ctrlProc.usage()
	rep := buildReport(sc, start, reportInputs{
		jobs: sim.Jobs(), events: agents.Events(), calls: sim.CallCounts(),
		samples: smp.samples(), finished: finished, lastJobDone: lastDone,
		drained: drained, drainedAt: drainedAt, cpuSeconds: cpu, peakRSS: peak,
	})
	rep.Leftover = leftovers(ctx, cl.Client, sim)
	for _, e := range agents.Errors() {
		rep.AgentErrors = append(rep.AgentErrors, e.Error())
	}
	if err := rep.write(opts.OutDir); err != nil {
		return rep, err
	}
	return rep, nil
}

func setupNamespaces(ctx context.Context, c client.Client, simURL string, sc Scenario) error {
	for _, ns := range []string{namespace, systemNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "gantry-webhook"},
			Data: map[string][]byte{manager.WebhookSecretKey: []byte(hookSecret)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "github-creds"},
			Data: map[string][]byte{"github_token": []byte(simToken)}},
		&v1alpha1.RunnerPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: poolName},
			Spec: v1alpha1.RunnerPoolSpec{
				GitHub: v1alpha1.GitHubSpec{URL: simURL + "/acme", CredentialsSecretRef: v1alpha1.SecretReference{Name: "github-creds"}},
				Labels: []string{"linux", "x64"}, MinIdle: sc.MinIdle, MaxRunners: sc.MaxRunners, RegistrationMode: sc.Mode,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: v1alpha1.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:latest",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
				}}}},
			},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

type controllerProcess struct {
	cmd     *exec.Cmd
	logPath string
	logf    *os.File
	exited  chan struct{}
}

func startController(ctx context.Context, opts Options, kubeconfig, webhookAddr string, metricsPort, probePort int) (*controllerProcess, error) {
	logPath := filepath.Join(opts.OutDir, "controller.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(opts.Gantry, "controller", //nolint:noctx // stopped by stop(), with its group
		"--webhook-secret="+systemNamespace+"/gantry-webhook",
		"--webhook-bind-address="+webhookAddr,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		"--namespaces="+namespace,
		"--resync-interval=30s",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s controller: %w", opts.Gantry, err)
	}
	p := &controllerProcess{cmd: cmd, logPath: logPath, logf: logf, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("the controller exited at start: see %s", logPath)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("the controller was not ready within 60s: see %s", logPath)
}

// usage reads the controller's CPU seconds and peak resident memory from /proc.
func (p *controllerProcess) usage() (cpuSeconds float64, peakRSS int64) {
	pid := p.cmd.Process.Pid
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// After the parenthesised command name: utime and stime are fields 14 and 15
		// of the line, in clock ticks of 1/100 s.
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 <= len(s) {
			if f := strings.Fields(s[i+2:]); len(f) > 12 {
				ut, err1 := strconv.ParseFloat(f[11], 64)
				st, err2 := strconv.ParseFloat(f[12], 64)
				if err1 == nil && err2 == nil {
					cpuSeconds = (ut + st) / 100
				}
			}
		}
	}
	return cpuSeconds, procStatusBytes(pid, "VmHWM:")
}

// procStatusBytes reads a "kB" field of /proc/PID/status, in bytes; 0 if absent.
func procStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

func (p *controllerProcess) stop() {
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	}
	p.logf.Close()
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

func queueWorkload(ctx context.Context, sim *simgithub.Sim, sc Scenario, seed uint64) error {
	tmpl := simgithub.JobSpec{Repo: "acme/app", Labels: []string{"self-hosted", "linux", "x64"}, Duration: simgithub.Duration(sc.JobDuration)}
	for left := sc.Burst; left > 0; {
		n := min(left, 256) // GitHub's matrix limit
		if _, err := sim.QueueRun(simgithub.RunSpec{Repo: "acme/app", Workflow: "CI", Matrix: n, Template: tmpl}); err != nil {
			return fmt.Errorf("queueing the burst: %w", err)
		}
		left -= n
	}
	if sc.Rate <= 0 || sc.Steady <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	end := time.Now().Add(sc.Steady)
	for time.Now().Before(end) {
		wait := time.Duration(rng.ExpFloat64() / sc.Rate * float64(time.Second))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if _, err := sim.QueueJob(tmpl); err != nil {
			return fmt.Errorf("queueing a job: %w", err)
		}
	}
	return nil
}

// waitJobs waits until every queued job completed, or the deadline.
func waitJobs(ctx context.Context, sim *simgithub.Sim, sc Scenario, deadline time.Time) (bool, time.Time) {
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
		if len(jobs) >= sc.Jobs() && done == len(jobs) {
			return true, last
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false, time.Time{}
}

// waitDrained waits until no Runner is left in the cluster nor on GitHub.
func waitDrained(ctx context.Context, c client.Client, sim *simgithub.Sim, deadline time.Time) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var rs v1alpha1.RunnerList
		if err := c.List(ctx, &rs, client.InNamespace(namespace)); err == nil && len(rs.Items) == 0 && len(sim.Runners()) == 0 {
			return true
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
