// Package cluster starts and stops a simulated Kubernetes cluster on one machine: real
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler, with kwok playing the
// kubelets of fake nodes. No container runtime: a pod "runs" when kwok says so. Claims
// of StorageClass gantry-sim-local get per-node local volumes from a provisioner in
// this process (volumes.go). The
// binaries are the ones hack/k8s-bins.sh builds (`make k8s-bins`).
//
// Every process runs in its own process group and is killed with it on Stop, and, on
// Linux, when the process that started it dies.
package cluster

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/config/crd"
	"github.com/gantry-dev/gantry/internal/manager"
)

// Options shape the simulated cluster.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
	// and kwok-stages.yaml.
	BinDir string
	// WorkDir receives kubeconfigs, stage files and the processes' logs.
	WorkDir string
	// Nodes is how many fake nodes to create (default 10), each with NodeCPU cores,
	// NodeMemory and MaxPods pods (defaults 64, 256Gi, 1000).
	Nodes      int
	NodeCPU    string
	NodeMemory string
	MaxPods    int
	// ControllerManagerQPS is kube-controller-manager's --kube-api-qps (its burst twice
	// that); default: its own 20, or 200 with more than 100 nodes. It takes away the taint
	// the API server puts on each new node (node.kubernetes.io/not-ready) once the node is
	// Ready, a few requests per node: at 20 a second 1,000 new nodes waited about 220 s
	// for it (no pod is scheduled on a node meanwhile), at 200 about 50 s. Clusters of
	// that size raise it too.
	ControllerManagerQPS int
	// NodeArchs are the nodes' architectures (kubernetes.io/arch, and the kubelet's
	// reported node info), taken in turn: node i has the i-th modulo their number
	// (default amd64 alone). Every node runs linux.
	NodeArchs []string
	// PodStartDelay is how long kwok takes to make a scheduled pod Running (default 1s).
	PodStartDelay time.Duration
	// NodeMonitorGracePeriod is how long a node may miss its heartbeats before
	// kube-controller-manager marks it NotReady and taints it unreachable (default 40s,
	// whole seconds). kwok's node leases last as long and are renewed every quarter.
	NodeMonitorGracePeriod time.Duration
	// Log receives progress lines.
	Log io.Writer
	// AuditUser, when set, is a user with full rights and a kubeconfig of its own
	// (Cluster.AuditedKubeconfig) whose every request the kube-apiserver records, at
	// Metadata level (who, verb, resource, answer: never a body), in Cluster.AuditLog,
	// with the garbage collector's deletes (CollectorUser). Nobody else's requests are
	// recorded.
	AuditUser string
}

func (o *Options) defaults() {
	if o.Nodes == 0 {
		o.Nodes = 10
	}
	if o.NodeCPU == "" {
		o.NodeCPU = "64"
	}
	if o.NodeMemory == "" {
		o.NodeMemory = "256Gi"
	}
	if o.MaxPods == 0 {
		o.MaxPods = 1000
	}
	if len(o.NodeArchs) == 0 {
		o.NodeArchs = []string{"amd64"}
	}
	if o.ControllerManagerQPS == 0 && o.Nodes > 100 {
		o.ControllerManagerQPS = 200
	}
	if o.PodStartDelay == 0 {
		o.PodStartDelay = time.Second
	}
	if o.NodeMonitorGracePeriod < time.Second {
		o.NodeMonitorGracePeriod = 40 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// Cluster is a running simulated cluster.
type Cluster struct {
	// Config reaches the kube-apiserver with full rights.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file for the same, for other processes.
	Kubeconfig string
	// Client is a direct client.
	Client client.Client
	// AuditedKubeconfig is Options.AuditUser's kubeconfig, and AuditLog the file its
	// requests are recorded in (both empty without an AuditUser).
	AuditedKubeconfig string
	AuditLog          string

	opts  Options
	env   *envtest.Environment
	procs []*exec.Cmd
	// apiLog is the kube-apiserver's log file, closed once it has stopped.
	apiLog *os.File
	// stopProvisioner stops the volume provisioner and waits for it.
	stopProvisioner func()
}

// Start starts the cluster and waits until its nodes are Ready.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts.defaults()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make k8s-bins` (or hack/k8s-bins.sh) to build the control plane", b, opts.BinDir)
		}
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, err
	}
	crds, err := loadCRDs()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts}
	fmt.Fprintln(opts.Log, "Starting etcd and kube-apiserver")
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: opts.BinDir,
		CRDs:                  crds,
		Scheme:                manager.Scheme(),
	}
	// Admit pods as a real cluster does: envtest turns the ServiceAccount admission
	// plugin off; here a pod gets its ServiceAccount and, unless it opts out, the
	// ServiceAccount's token, and kube-controller-manager creates each namespace's
	// default ServiceAccount.
	c.env.ControlPlane.GetAPIServer().Configure().Disable("disable-admission-plugins")
	if opts.AuditUser != "" {
		if err := c.configureAudit(opts.AuditUser); err != nil {
			return nil, err
		}
	}
	// Its log sits beside the other components'. At -v=1 it says when it cut a watcher
	// that fell behind ("Forcing … watcher close due to unresponsiveness"), which a
	// burst on a small machine does; the log stays small (about 100 KB a burst run).
	c.env.ControlPlane.GetAPIServer().Configure().Set("v", "1")
	apiLog, err := os.Create(c.APIServerLog())
	if err != nil {
		return nil, err
	}
	c.apiLog = apiLog
	c.env.ControlPlane.GetAPIServer().Out, c.env.ControlPlane.GetAPIServer().Err = apiLog, apiLog
	cfg, err := c.env.Start()
	if err != nil {
		_ = apiLog.Close()
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	c.Config = cfg
	ok := false
	defer func() {
		if !ok {
			_ = c.Stop()
		}
	}()
	if c.Client, err = client.New(cfg, client.Options{Scheme: manager.Scheme()}); err != nil {
		return nil, err
	}
	admin, err := c.env.AddUser(envtest.User{Name: "gantry-sim-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("creating an admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(opts.WorkDir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	if opts.AuditUser != "" {
		if err := c.writeAuditedKubeconfig(opts.AuditUser); err != nil {
			return nil, err
		}
	}
	stages := filepath.Join(opts.WorkDir, "kwok-stages.yaml")
	if err := writeStages(filepath.Join(opts.BinDir, "kwok-stages.yaml"), stages, opts.PodStartDelay); err != nil {
		return nil, err
	}

	// The key the API server signs ServiceAccount tokens with (envtest writes it next
	// to its serving certificate): kube-controller-manager's token controller signs
	// with it too.
	saKey := filepath.Join(c.env.ControlPlane.APIServer.CertDir, "sa-signer.key")
	if _, err := os.Stat(saKey); err != nil {
		return nil, fmt.Errorf("finding the API server's ServiceAccount signing key: %w", err)
	}

	fmt.Fprintln(opts.Log, "Starting kube-controller-manager, kube-scheduler and kwok")
	var kcmQPS []string
	if opts.ControllerManagerQPS > 0 {
		kcmQPS = []string{fmt.Sprintf("--kube-api-qps=%d", opts.ControllerManagerQPS), fmt.Sprintf("--kube-api-burst=%d", 2*opts.ControllerManagerQPS)}
	}
	for _, p := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", append([]string{
			"--kubeconfig=" + c.Kubeconfig, "--secure-port=0", "--leader-elect=false",
			// Every controller, the ServiceAccount and token controllers included:
			// pods are admitted with their ServiceAccount as in a real cluster.
			"--controllers=*", "--service-account-private-key-file=" + saKey,
			// Each controller as its own ServiceAccount, as kubeadm and managed
			// clusters run it: the audit log tells the garbage collector's requests
			// (CollectorUser) from the other controllers'.
			"--use-service-account-credentials=true",
			fmt.Sprintf("--node-monitor-grace-period=%ds", graceSeconds(opts.NodeMonitorGracePeriod)),
		}, kcmQPS...)},
		{"kube-scheduler", []string{"--kubeconfig=" + c.Kubeconfig, "--secure-port=0", "--leader-elect=false"}},
		{"kwok", []string{
			"--kubeconfig=" + c.Kubeconfig, "--config=" + stages,
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-ip=10.255.0.1", "--cidr=10.0.0.0/16",
			fmt.Sprintf("--node-lease-duration-seconds=%d", graceSeconds(opts.NodeMonitorGracePeriod)),
		}},
	} {
		if err := c.startProcess(p.name, p.args); err != nil {
			return nil, err
		}
	}
	if err := c.createNodes(ctx); err != nil {
		return nil, err
	}
	if err := c.createStorageClass(ctx); err != nil {
		return nil, err
	}
	pctx, stopProvisioner := context.WithCancel(context.Background())
	provisioned := make(chan struct{})
	go func() { c.provision(pctx, opts.Log); close(provisioned) }()
	c.stopProvisioner = func() { stopProvisioner(); <-provisioned }
	if err := WaitForDefaultServiceAccount(ctx, c.Client, "default"); err != nil {
		return nil, fmt.Errorf("%w: see kube-controller-manager.log in %s", err, opts.WorkDir)
	}
	ok = true
	return c, nil
}

func (c *Cluster) startProcess(name string, args []string) error {
	logf, err := os.Create(filepath.Join(c.opts.WorkDir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.opts.BinDir, name), args...) //nolint:noctx // stopped by Stop, with its group
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	go func() { _ = cmd.Wait(); logf.Close() }()
	return nil
}

func graceSeconds(d time.Duration) int { return max(1, int(d.Round(time.Second)/time.Second)) }

// NodeName is the name of the i-th fake node.
func NodeName(i int) string { return "kwok-node-" + strconv.Itoa(i) }

// nodeCreators is how many nodes are created at once.
const nodeCreators = 16

// createNodes creates the fake nodes — as a kubelet registers its node: labels for the
// OS, architecture and hostname, capacity, node info — and waits until kwok has made
// them all Ready and kube-controller-manager has lifted the not-ready taint it puts on a
// new node (pods without its toleration are not scheduled there until then). Thousands of nodes are created nodeCreators at a time, and their
// readiness polled once a second rather than ten times.
func (c *Cluster) createNodes(ctx context.Context) error {
	fmt.Fprintf(c.opts.Log, "Creating %d fake nodes\n", c.opts.Nodes)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(c.opts.NodeCPU),
		corev1.ResourceMemory: resource.MustParse(c.opts.NodeMemory),
		corev1.ResourcePods:   resource.MustParse(strconv.Itoa(c.opts.MaxPods)),
	}
	next := make(chan int)
	errs := make(chan error, nodeCreators)
	for range nodeCreators {
		go func() {
			var err error
			for i := range next {
				if err == nil {
					err = c.Client.Create(ctx, c.node(i, capacity))
				}
			}
			errs <- err
		}()
	}
	for i := range c.opts.Nodes {
		next <- i
	}
	close(next)
	for range nodeCreators {
		if err := <-errs; err != nil {
			return fmt.Errorf("creating the fake nodes: %w", err)
		}
	}
	poll, wait := 100*time.Millisecond, 60*time.Second
	if c.opts.Nodes > 100 {
		poll, wait = time.Second, 60*time.Second+time.Duration(c.opts.Nodes)*50*time.Millisecond
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		var nodes corev1.NodeList
		if err := c.Client.List(ctx, &nodes); err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes.Items {
			if nodeReady(&n) && !taintedNotReady(&n) {
				ready++
			}
		}
		if ready == c.opts.Nodes {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
	return fmt.Errorf("the fake nodes did not become Ready within %s: see kwok.log in %s", wait, c.opts.WorkDir)
}

// node is the i-th fake node, as its kubelet would register it.
func (c *Cluster) node(i int, capacity corev1.ResourceList) *corev1.Node {
	arch := c.opts.NodeArchs[i%len(c.opts.NodeArchs)]
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName(i),
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"type": "kwok", corev1.LabelOSStable: "linux", corev1.LabelArchStable: arch,
				corev1.LabelHostname: NodeName(i)},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: arch}},
	}
}

// WaitForDefaultServiceAccount waits until kube-controller-manager has created the
// `default` ServiceAccount of namespace ns: until then the API server refuses pods in it
// (ServiceAccount admission), as a real cluster does for a moment after a namespace is
// made.
func WaitForDefaultServiceAccount(ctx context.Context, c client.Client, ns string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading the default ServiceAccount of namespace %s: %w", ns, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s has no default ServiceAccount after 60s: is kube-controller-manager's ServiceAccount controller running?", ns)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// APIServerLog is the kube-apiserver's log file.
func (c *Cluster) APIServerLog() string { return filepath.Join(c.opts.WorkDir, "kube-apiserver.log") }

// Stop stops the volume provisioner, kills the processes (whole groups) and stops the
// control plane.
func (c *Cluster) Stop() error {
	if c.stopProvisioner != nil {
		c.stopProvisioner()
		c.stopProvisioner = nil
	}
	for _, p := range c.procs {
		if p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		}
	}
	c.procs = nil
	var err error
	if c.env != nil {
		err = c.env.Stop()
	}
	if c.apiLog != nil {
		_ = c.apiLog.Close()
	}
	return err
}

func loadCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	err := fs.WalkDir(crd.Bases, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := crd.Bases.ReadFile(path)
		if err != nil {
			return err
		}
		var obj apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, &obj)
		return nil
	})
	return out, err
}
