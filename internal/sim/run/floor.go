package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// floorWorkers is how many jobs the oracle serves at once: the runners the controller
// reconciles at once (`gantry controller --runner-concurrency`, default 64).
const floorWorkers = 64

// floorPodPrefix starts the names of the oracle's Secrets and pods.
const floorPodPrefix = "floor-"

// floorEnv is what the oracle needs of the world.
type floorEnv struct {
	// cfg and kubeconfig reach the kube-apiserver as an administrator the audit log
	// ignores: cfg in this process, kubeconfig in the oracle's.
	cfg        *rest.Config
	kubeconfig string
	// gantry is the gantry executable the oracle runs as (`gantry sim oracle`), with
	// gantryEnv added to its environment.
	gantry    string
	gantryEnv []string
	// logDir holds the oracle's log, oracle.log.
	logDir string
	sim    *simgithub.Sim
	simURL string
	pool   *v1alpha1.RunnerPool
	agents interface{ Events() []agent.Event }
}

// floorEnv is the oracle's view of the world: its one pool (Scenario.hasFloor).
func (w *world) floorEnv(opts Options) floorEnv {
	return floorEnv{cfg: w.cl.Config, kubeconfig: w.cl.Kubeconfig, gantry: opts.Gantry, gantryEnv: opts.GantryEnv, logDir: opts.OutDir,
		sim: w.sim, simURL: w.simURL, pool: w.pools[0], agents: w.agents}
}

// floorRun is what the oracle's run left for the report.
type floorRun struct {
	start          time.Time
	end            time.Time
	jobs           []simgithub.Job
	events         []agent.Event
	finished       bool
	clusterDrained bool
	errors         int
	firstErr       error
	cleanedUp      bool
	// cpuSeconds is the oracle process's CPU time, start-up included; 0 if it did not
	// run to its end.
	cpuSeconds float64
	// load is the 1-minute load average when the oracle started and when it ended.
	load [2]float64
}

// runFloor runs the oracle: the workload again (same seed), served by the least any
// controller must do — for each job, the moment it is queued, one generate-jitconfig
// call, a Secret and a Pod shaped as Gantry's (same agents take the jobs) — by
// floorWorkers workers, in a process of its own whose CPU time is the floor of the
// controller's. It waits for the jobs, then deletes the oracle's Secrets and pods.
// Run it with the controller stopped: nothing else may answer the jobs.
func runFloor(ctx context.Context, env floorEnv, wl workload, seed uint64, timeout time.Duration, out io.Writer) (floorRun, error) {
	kube, err := client.New(env.cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return floorRun{}, err
	}
	var fr floorRun
	fr.clusterDrained = clusterEmpty(ctx, kube, env.pool.Namespace)
	skip, evFrom := len(env.sim.Jobs()), len(env.agents.Events())
	fmt.Fprintf(out, "Floor: the same workload served by an oracle (%d workers, no controller)\n", floorWorkers)

	proc, err := startOracle(env)
	if err != nil {
		return fr, err
	}
	// The oracle exits once its input has ended and it has served every job, long
	// before the jobs are done. One that fails (it could not read the pool or its
	// credentials) serves nothing: stop there rather than wait out the scenario's
	// timeout.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-proc.exited:
			if !proc.cmd.ProcessState.Success() {
				stop()
			}
		case <-wctx.Done():
		}
	}()
	feed := newJobFeed()
	fed := make(chan error, 1)
	go func() { fed <- feedOracle(wctx, feed, proc.stdin) }()
	fr.start, fr.load[0] = time.Now(), loadAvg()[0]
	queued, qerr := queueWorkload(wctx, env.sim, wl, seed, feed.add)
	feed.close()
	if qerr == nil {
		fr.jobs, fr.finished, _ = waitJobs(wctx, env.sim, skip, len(queued), fr.start.Add(timeout))
	}
	fr.end, fr.load[1] = time.Now(), loadAvg()[0]
	ferr := <-fed
	res, cpu, perr := proc.wait(30 * time.Second)
	switch {
	case perr != nil:
		qerr = perr // the oracle's own failure explains the rest
	case ferr != nil && qerr == nil:
		qerr = ferr
	}
	fr.cpuSeconds = cpu
	for _, e := range env.agents.Events()[evFrom:] {
		if strings.HasPrefix(e.Pod, floorPodPrefix) {
			fr.events = append(fr.events, e)
		}
	}
	fr.errors = res.Errors
	if res.Error != "" {
		fr.firstErr = errors.New(res.Error)
	}
	fr.cleanedUp = cleanUpFloor(ctx, kube, env.pool.Namespace, 2*time.Minute)
	fmt.Fprintf(out, "Floor: %d jobs in %.1fs (finished %v, %d errors, oracle CPU %.2fs)\n",
		len(fr.jobs), fr.end.Sub(fr.start).Seconds(), fr.finished, fr.errors, fr.cpuSeconds)
	return fr, qerr
}

// oracleProcess is a running `gantry sim oracle`.
type oracleProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout bytes.Buffer
	log    *os.File
	exited chan struct{}
}

func startOracle(env floorEnv) (*oracleProcess, error) {
	log, err := os.Create(filepath.Join(env.logDir, "oracle.log"))
	if err != nil {
		return nil, err
	}
	p := &oracleProcess{log: log, exited: make(chan struct{})}
	p.cmd = exec.Command(env.gantry, "sim", "oracle", //nolint:noctx // stopped by wait, with its group
		"--kubeconfig", env.kubeconfig, "--github-url", env.simURL,
		"--pool", env.pool.Namespace+"/"+env.pool.Name, "--workers", strconv.Itoa(floorWorkers))
	p.cmd.Env = append(os.Environ(), env.gantryEnv...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, log
	p.cmd.SysProcAttr = procAttr()
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		log.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting the oracle (%s sim oracle): %w", env.gantry, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	return p, nil
}

// wait waits up to timeout for the oracle, whose input is closed, to exit (then kills
// its group) and returns what it said and its CPU time.
func (p *oracleProcess) wait(timeout time.Duration) (OracleResult, float64, error) {
	defer p.log.Close()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		return OracleResult{}, 0, fmt.Errorf("the oracle did not exit within %s of its last job: see %s", timeout, p.log.Name())
	}
	if !p.cmd.ProcessState.Success() {
		return OracleResult{}, 0, fmt.Errorf("the oracle failed (%s): see %s", p.cmd.ProcessState, p.log.Name())
	}
	var res OracleResult
	if err := json.Unmarshal(p.stdout.Bytes(), &res); err != nil {
		return OracleResult{}, 0, fmt.Errorf("reading the oracle's result %q: %w", p.stdout.String(), err)
	}
	var cpu float64
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = tv(ru.Utime) + tv(ru.Stime)
	}
	return res, cpu, nil
}

// feedOracle writes the feed's jobs to the oracle, one id a line, as they come, and
// closes its input once the feed is closed and empty.
func feedOracle(ctx context.Context, feed *jobFeed, w io.WriteCloser) error {
	defer w.Close()
	for {
		j, ok := feed.next(ctx)
		if !ok {
			return ctx.Err()
		}
		if _, err := fmt.Fprintf(w, "%d\n", j.id); err != nil {
			return fmt.Errorf("handing job %d to the oracle: %w", j.id, err)
		}
	}
}

// clusterEmpty reports whether namespace ns holds no runner pod or Secret.
func clusterEmpty(ctx context.Context, kube client.Client, ns string) bool {
	managed := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	var pods corev1.PodList
	var secrets corev1.SecretList
	if err := kube.List(ctx, &pods, client.InNamespace(ns), managed); err != nil {
		return false
	}
	if err := kube.List(ctx, &secrets, client.InNamespace(ns), managed); err != nil {
		return false
	}
	return len(pods.Items) == 0 && len(secrets.Items) == 0
}

// cleanUpFloor deletes the oracle's pods and Secrets in namespace and waits until
// they are gone.
func cleanUpFloor(ctx context.Context, kube client.Client, namespace string, timeout time.Duration) bool {
	ns := client.InNamespace(namespace)
	managed := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	_ = kube.DeleteAllOf(ctx, &corev1.Pod{}, ns, managed)
	_ = kube.DeleteAllOf(ctx, &corev1.Secret{}, ns, managed)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if clusterEmpty(ctx, kube, namespace) {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}

// jobFeed hands queued jobs to the oracle's workers the moment they are queued,
// however many are waiting.
type jobFeed struct {
	mu     sync.Mutex
	ready  chan struct{} // closed and replaced when a job is added or the feed closed
	queue  []queuedJob
	closed bool
}

func newJobFeed() *jobFeed { return &jobFeed{ready: make(chan struct{})} }

func (f *jobFeed) add(j queuedJob) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.queue = append(f.queue, j)
	close(f.ready)
	f.ready = make(chan struct{})
}

func (f *jobFeed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.ready)
	}
}

// next takes the next job; false once the feed is closed and empty, or ctx done.
func (f *jobFeed) next(ctx context.Context) (queuedJob, bool) {
	for {
		f.mu.Lock()
		if len(f.queue) > 0 {
			j := f.queue[0]
			f.queue = f.queue[1:]
			f.mu.Unlock()
			return j, true
		}
		if f.closed {
			f.mu.Unlock()
			return queuedJob{}, false
		}
		ready := f.ready
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return queuedJob{}, false
		case <-ready:
		}
	}
}
