package run

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// controller runs `gantry controller` as a separate process — again after a kill —
// always with the same flags, ports and log file, and adds up what its processes used.
type controller struct {
	opts       Options
	args       []string
	env        []string
	probeURL   string
	metricsURL string
	logPath    string
	logf       *os.File

	mu   sync.Mutex
	cur  *controllerProcess
	done Controller // processes that exited
	// started counts the processes started; each is pod gantry-controller-N (POD_NAME:
	// the owner of the scale-set sessions it opens), as a restarted pod is a new one.
	started int
	// launched is when the first process was started.
	launched time.Time
}

type controllerProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func newController(opts Options, sc Scenario, kubeconfig, webhookAddr string, eviction evictionWebhook, metricsPort, probePort int) (*controller, error) {
	logPath := filepath.Join(opts.OutDir, "controller.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	resync := sc.ResyncInterval
	if resync <= 0 {
		resync = 30 * time.Second
	}
	args := []string{"controller",
		"--webhook-secret=" + systemNamespace + "/gantry-webhook",
		"--webhook-bind-address=" + webhookAddr,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		"--resync-interval=" + resync.String(),
		"--github-allow-http",
	}
	args = append(args, eviction.args()...)
	if ns := sc.watchedNamespaces(); len(ns) > 0 {
		args = append(args, "--namespaces="+strings.Join(ns, ","))
	}
	if sc.UsageEvents {
		args = append(args, "--usage-events")
	}
	if sc.FailedRunnerRetention > 0 {
		args = append(args, "--failed-runner-retention="+sc.FailedRunnerRetention.String())
	}
	return &controller{
		opts: opts, args: args, logPath: logPath, logf: logf,
		env:        append(append(os.Environ(), "KUBECONFIG="+kubeconfig), opts.GantryEnv...),
		probeURL:   fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort),
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
	}, nil
}

// Start starts a controller process and waits until it is ready.
func (c *controller) Start(ctx context.Context) (int, error) {
	c.mu.Lock()
	if c.cur != nil {
		c.mu.Unlock()
		return 0, fmt.Errorf("a controller is already running (pid %d)", c.cur.cmd.Process.Pid)
	}
	fmt.Fprintf(c.logf, "--- gantry sim: starting the controller at %s\n", time.Now().Format(time.RFC3339Nano))
	bin := c.opts.Gantry
	if c.opts.Controller != "" {
		bin = c.opts.Controller
	}
	cmd := exec.Command(bin, c.args...) //nolint:noctx // stopped by stop() or Kill, with its group
	c.started++
	if c.started == 1 {
		c.launched = time.Now()
	}
	cmd.Env = append(c.env[:len(c.env):len(c.env)], "POD_NAME="+podName(c.started))
	cmd.Stdout, cmd.Stderr = c.logf, c.logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		return 0, fmt.Errorf("starting %s controller: %w", bin, err)
	}
	p := &controllerProcess{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	c.cur = p
	c.mu.Unlock()

	pid := cmd.Process.Pid
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			c.reap(p)
			return 0, fmt.Errorf("the controller exited at start: see %s", c.logPath)
		case <-ctx.Done():
			_, _ = c.Kill(context.Background(), syscall.SIGKILL)
			return 0, ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.probeURL, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return pid, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = c.Kill(context.Background(), syscall.SIGKILL)
	return 0, fmt.Errorf("the controller was not ready within 60s: see %s", c.logPath)
}

// Kill sends sig to the controller's process group and waits until it exited; a
// SIGTERM not obeyed within 10 s is followed by SIGKILL.
func (c *controller) Kill(_ context.Context, sig syscall.Signal) (int, error) {
	c.mu.Lock()
	p := c.cur
	c.mu.Unlock()
	if p == nil {
		return 0, errNotStarted
	}
	pid := p.cmd.Process.Pid
	// Its Kubernetes API calls so far: the counters die with the process.
	calls := scrapeKubeRequests(c.metricsURL)
	c.mu.Lock()
	if c.done.KubeAPIRequests == nil {
		c.done.KubeAPIRequests = map[string]int64{}
	}
	for m, n := range calls {
		c.done.KubeAPIRequests[m] += n
	}
	c.mu.Unlock()
	fmt.Fprintf(c.logf, "--- gantry sim: sending %s to the controller (pid %d) at %s\n", sig, pid, time.Now().Format(time.RFC3339Nano))
	_ = syscall.Kill(-pid, sig)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.exited
	}
	c.reap(p)
	return pid, nil
}

// reap adds an exited process's resource use to the total.
func (c *controller) reap(p *controllerProcess) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == p {
		c.cur = nil
	}
	c.done.Processes++
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.done.CPUSeconds += tv(ru.Utime) + tv(ru.Stime)
		c.done.PeakRSSBytes = max(c.done.PeakRSSBytes, ru.Maxrss*1024) // Linux: KiB
	}
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// podName is the pod name of the n-th controller process.
func podName(n int) string { return fmt.Sprintf("gantry-controller-%d", n) }

// owner is the name the running (or last) controller process opens sessions as.
func (c *controller) owner() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return podName(c.started)
}

// launchedAt is when the first controller process was started.
func (c *controller) launchedAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.launched
}

// pid is the running controller's pid, 0 while none runs.
func (c *controller) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return 0
	}
	return c.cur.cmd.Process.Pid
}

// sofar is what the controller's processes used so far, the running one's included:
// its CPU time and peak resident memory (VmHWM) from /proc, its Kubernetes API requests
// from its metrics. stop's figures at a moment of the run, the controller still running.
func (c *controller) sofar() Controller {
	c.mu.Lock()
	out := c.done
	out.KubeAPIRequests = maps.Clone(c.done.KubeAPIRequests)
	p := c.cur
	c.mu.Unlock()
	if p == nil {
		return out
	}
	pid := p.cmd.Process.Pid
	out.Processes++
	if cpu, err := procCPUSeconds(pid); err == nil {
		out.CPUSeconds += cpu
	}
	out.PeakRSSBytes = max(out.PeakRSSBytes, procStatusBytes(pid, "VmHWM:"))
	if calls := scrapeKubeRequests(c.metricsURL); calls != nil {
		if out.KubeAPIRequests == nil {
			out.KubeAPIRequests = map[string]int64{}
		}
		for m, n := range calls {
			out.KubeAPIRequests[m] += n
		}
	}
	return out
}

// stop stops the running controller (SIGTERM, then SIGKILL), closes the log and
// returns what all the controller's processes used.
func (c *controller) stop() Controller {
	_, _ = c.Kill(context.Background(), syscall.SIGTERM)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.logf != nil {
		c.logf.Close()
		c.logf = nil
	}
	return c.done
}

// scrapeKubeRequests reads the controller's rest_client_requests_total (client-go's
// requests to the kube-apiserver, watches included) from its metrics endpoint, summed
// by method; nil if the endpoint does not answer.
func scrapeKubeRequests(url string) map[string]int64 {
	text, err := scrapeMetrics(url)
	if err != nil {
		return nil
	}
	return parseKubeRequests(text)
}

// scrapeGauge reads an unlabeled metric (go_goroutines) from the controller's metrics
// endpoint.
func scrapeGauge(url, name string) (float64, error) {
	text, err := scrapeMetrics(url)
	if err != nil {
		return 0, err
	}
	v, ok := parseGauge(text, name)
	if !ok {
		return 0, fmt.Errorf("the controller's metrics have no %s", name)
	}
	return v, nil
}

// scrapeMetrics reads the controller's metrics, in Prometheus text.
func scrapeMetrics(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading the controller's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reading the controller's metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("reading the controller's metrics: %w", err)
	}
	return string(body), nil
}

// parseGauge reads the value of the unlabeled metric name in Prometheus text.
func parseGauge(text, name string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil
	}
	return 0, false
}

// parseKubeRequests sums rest_client_requests_total by method in Prometheus text.
func parseKubeRequests(text string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "rest_client_requests_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		method := ""
		for _, kv := range strings.Split(labels, ",") {
			if v, ok := strings.CutPrefix(kv, `method="`); ok {
				method = strings.TrimSuffix(v, `"`)
			}
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if method == "" || err != nil {
			continue
		}
		out[method] += int64(n)
	}
	return out
}
