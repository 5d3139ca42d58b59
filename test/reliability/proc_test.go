package reliability

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// procOptions configure one `gantry controller` process.
type procOptions struct {
	name           string
	kubeconfig     string
	namespace      string // watched, and the Lease's
	leaderElect    bool
	resyncInterval time.Duration
	githubTimeout  time.Duration
	// supervise restarts the process when it exits, as the kubelet restarts a
	// container (restartPolicy Always), after restartDelay.
	supervise bool
}

// restartDelay is how long the supervisor waits before restarting an exited process.
const restartDelay = time.Second

// controllerProc is one controller replica: a real process in its own process group,
// its log in a file, restarted when it exits if supervised.
type controllerProc struct {
	t    *testing.T
	opts procOptions
	// webhookAddr is on 127.0.0.1, fixed across restarts: the Lease advertises it.
	webhookAddr string
	logPath     string

	mu sync.Mutex
	// metricsAddr and probeAddr are on 127.0.0.1, picked again at each start: a port
	// found free may be taken by another process before the controller binds it.
	metricsAddr, probeAddr string
	cmd                    *exec.Cmd
	alive                  bool
	stopped                bool
	starts                 int
	exits                  []string
	done                   chan struct{}
	// lastMetrics is the last /metrics scraped, kept for the secret scan of a process
	// that was killed since.
	lastMetrics []string
}

// startController starts a controller process and waits until it is ready.
func startController(t *testing.T, opts procOptions) *controllerProc {
	t.Helper()
	p := &controllerProc{
		t: t, opts: opts,
		webhookAddr: freeAddr(t),
		logPath:     filepath.Join(cp.dir, fmt.Sprintf("%s-%s.log", sanitize(t.Name()), opts.name)),
		done:        make(chan struct{}),
	}
	if err := p.launch(); err != nil {
		t.Fatalf("starting controller %s: %v", opts.name, err)
	}
	go p.supervise()
	t.Cleanup(p.stop)
	p.waitReady(60 * time.Second)
	return p
}

// runnerPolicyFile is the runner NetworkPolicy's file in the control plane's directory.
const runnerPolicyFile = "runner-network-policy.yaml"

func (p *controllerProc) args(metricsAddr, probeAddr string) []string {
	o := p.opts
	args := []string{
		"controller",
		"--webhook-secret", o.namespace + "/" + webhookSecretName,
		"--webhook-bind-address", p.webhookAddr,
		"--webhook-advertise-address", p.webhookAddr,
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
		"--namespaces", o.namespace,
		"--log-level", "debug",
		fmt.Sprintf("--leader-elect=%t", o.leaderElect),
		"--leader-election-namespace", o.namespace,
		"--github-allow-http",
		"--runner-network-policy", filepath.Join(cp.dir, runnerPolicyFile),
	}
	if o.resyncInterval > 0 {
		args = append(args, "--resync-interval", o.resyncInterval.String())
	}
	if o.githubTimeout > 0 {
		args = append(args, "--github-timeout", o.githubTimeout.String())
	}
	return args
}

func (p *controllerProc) launch() error {
	metricsAddr, err := pickAddr()
	if err != nil {
		return err
	}
	probeAddr, err := pickAddr()
	if err != nil {
		return err
	}
	name, args := cp.bin, p.args(metricsAddr, probeAddr)
	if cp.sandbox {
		name, args = sandboxArgs(cp.bin, args)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Each start is a new pod, with a new name: it names the replica in the scale set
	// sessions it opens, so a restarted replica is told from its dead self.
	p.mu.Lock()
	podName := fmt.Sprintf("%s-%d", p.opts.name, p.starts+1)
	p.mu.Unlock()
	cmd := exec.Command(name, args...) //nolint:noctx // killed by process group, never by a context
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.opts.kubeconfig, "HOME=/tmp", "POD_NAME="+podName)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, killed with the test process if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	p.metricsAddr, p.probeAddr = metricsAddr, probeAddr
	fmt.Fprintf(logf, "### start %d at %s\n", p.starts, time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	p.cmd, p.alive = cmd, true
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.alive = false
		p.exits = append(p.exits, fmt.Sprint(err))
		p.mu.Unlock()
	}()
	return nil
}

// supervise restarts the process after it exits, unless the test stopped it.
func (p *controllerProc) supervise() {
	defer close(p.done)
	for {
		p.mu.Lock()
		cmd := p.cmd
		p.mu.Unlock()
		for {
			p.mu.Lock()
			alive, stopped := p.alive && p.cmd == cmd, p.stopped
			p.mu.Unlock()
			if stopped {
				return
			}
			if !alive {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !p.opts.supervise {
			return
		}
		time.Sleep(restartDelay)
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		if err := p.launch(); err != nil {
			p.t.Errorf("restarting controller %s: %v", p.opts.name, err)
			return
		}
	}
}

// kill sends SIGKILL to the process group, as a node crash or `kill -9` would.
// A supervised process is restarted after restartDelay.
func (p *controllerProc) kill() {
	p.scrapeQuietly()
	p.mu.Lock()
	cmd, alive := p.cmd, p.alive
	p.mu.Unlock()
	if alive {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	p.waitExited(cmd)
}

func (p *controllerProc) waitExited(cmd *exec.Cmd) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		gone := !p.alive || p.cmd != cmd
		p.mu.Unlock()
		if gone {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Errorf("controller %s did not exit", p.opts.name)
}

// stop ends the process for good: SIGTERM, then SIGKILL after 10 s.
func (p *controllerProc) stop() {
	p.scrapeQuietly()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	cmd, alive := p.cmd, p.alive
	p.mu.Unlock()
	if alive {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			p.mu.Lock()
			alive = p.alive
			p.mu.Unlock()
			if !alive {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Whatever is left of the group goes too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
}

func (p *controllerProc) isAlive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.alive
}

// startCount is how many times the process was started.
func (p *controllerProc) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

func (p *controllerProc) waitReady(timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.get("http://"+p.addrs().probe+"/readyz") == http.StatusOK {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("controller %s not ready after %s; log %s:\n%s", p.opts.name, timeout, p.logPath, redact(tail(p.logPath, 30)))
}

func (p *controllerProc) get(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// metrics scrapes /metrics; "" when the process does not answer.
func (p *controllerProc) metrics() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addrs().metrics+"/metrics", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	p.mu.Lock()
	p.lastMetrics = append(p.lastMetrics, string(b))
	if len(p.lastMetrics) > 4 {
		p.lastMetrics = p.lastMetrics[len(p.lastMetrics)-4:]
	}
	p.mu.Unlock()
	return string(b)
}

func (p *controllerProc) scrapeQuietly() { _ = p.metrics() }

// scrapes returns the metrics scraped so far (the latest few).
func (p *controllerProc) scrapes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lastMetrics...)
}

// isLeader reads controller-runtime's leader_election_master_status.
func (p *controllerProc) isLeader() bool {
	return metricValue(p.metrics(), "leader_election_master_status", map[string]string{"name": leaseName}) == 1
}

// logLines returns the process's log, every start.
func (p *controllerProc) logLines() []string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// sandboxState reads, from /proc, the user the process runs as and whether its root
// filesystem is mounted read-only: the proof that the sandbox applies to it.
func (p *controllerProc) sandboxState() (uid string, rootReadOnly bool, err error) {
	p.mu.Lock()
	cmd, alive := p.cmd, p.alive
	p.mu.Unlock()
	if !alive {
		return "", false, fmt.Errorf("controller %s is not running", p.opts.name)
	}
	pid := cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", false, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			uid = f[1]
		}
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", pid))
	if err != nil {
		return "", false, err
	}
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[1] == "/" {
			rootReadOnly = strings.HasPrefix(f[3], "ro,") || f[3] == "ro"
		}
	}
	return uid, rootReadOnly, nil
}

// addrs are the metrics and probe addresses of the current (or last) start.
func (p *controllerProc) addrs() struct{ metrics, probe string } {
	p.mu.Lock()
	defer p.mu.Unlock()
	return struct{ metrics, probe string }{p.metricsAddr, p.probeAddr}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := pickAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// pickAddr is an address on 127.0.0.1 whose port was free a moment ago.
func pickAddr() (string, error) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func sanitize(s string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(s)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
