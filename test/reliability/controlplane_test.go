package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/testenv"
)

// managerRole is the ClusterRole generated from internal/controller/rbac.go.
const managerRole = "gantry-manager"

// controlPlane is etcd and a kube-apiserver that writes an audit log and enforces
// owner-reference permissions (as OpenShift and hardened clusters do), the gantry
// binary, and a work directory for kubeconfigs and logs.
type controlPlane struct {
	te       *envtest.Environment
	gc       *testenv.GarbageCollector
	cfg      *rest.Config
	c        client.Client
	kube     kubernetes.Interface
	root     string
	dir      string // outside /tmp: the sandboxed controller sees it read-only
	bin      string
	auditLog string
	role     *rbacv1.ClusterRole
	// sandbox says whether controllers run as uid 65532 with a read-only root
	// filesystem and a tmpfs on /tmp (see sandboxArgs); sandboxErr says why not.
	sandbox    bool
	sandboxErr error
}

// auditPolicy records every request at Metadata level: who, which verb on which
// resource, and the answer — never a body.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

func startControlPlane() (*controlPlane, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := testenv.AssetsDir(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(root, "out", "reliability"), 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "out", "reliability"), "run-")
	if err != nil {
		return nil, err
	}
	// The sandboxed controller runs as uid 65532 and must read its binary and kubeconfig.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	p := &controlPlane{root: root, dir: dir, auditLog: filepath.Join(dir, "audit.log")}
	// The runner NetworkPolicy the kustomize install hands the controller, where the
	// sandboxed controller can read it.
	runnerPolicy, err := os.ReadFile(filepath.Join(root, "config", "components", "network-policies", "runners.yaml"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, runnerPolicyFile), runnerPolicy, 0o644); err != nil {
		return nil, err
	}

	// GANTRY_RELIABILITY_BIN names a gantry binary already built (`make reliability`
	// builds bin/gantry first); otherwise ./cmd/gantry is built here.
	if bin := os.Getenv("GANTRY_RELIABILITY_BIN"); bin != "" {
		if p.bin, err = copyBinary(bin, dir); err != nil {
			return nil, err
		}
	} else if p.bin, err = buildGantry(root, dir); err != nil {
		return nil, err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	p.te = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                manager.Scheme(),
	}
	// ServiceAccount admission on, as in a real cluster: runner pods are admitted with
	// whatever ServiceAccount token a real cluster would give them.
	testenv.AdmitLikeARealCluster(p.te)
	args := p.te.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", p.auditLog)
	args.Set("audit-log-format", "json")
	args.Set("audit-log-mode", "blocking")
	args.Set("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	if p.cfg, err = p.te.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	if p.gc, err = testenv.StartGarbageCollector(p.te, assets); err != nil {
		_ = p.te.Stop()
		return nil, err
	}
	p.cfg.QPS, p.cfg.Burst = 500, 1000
	if p.c, err = client.New(p.cfg, client.Options{Scheme: manager.Scheme()}); err != nil {
		_ = p.te.Stop()
		return nil, err
	}
	if p.kube, err = kubernetes.NewForConfig(p.cfg); err != nil {
		_ = p.te.Stop()
		return nil, err
	}
	if p.role, err = loadRole(filepath.Join(root, "config", "rbac", "role.yaml")); err != nil {
		_ = p.te.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.c.Create(ctx, p.role.DeepCopy()); err != nil {
		_ = p.te.Stop()
		return nil, fmt.Errorf("creating ClusterRole %s: %w", managerRole, err)
	}
	p.sandboxErr = checkSandbox(dir)
	p.sandbox = p.sandboxErr == nil
	return p, nil
}

// stop stops the control plane; the work directory (logs, audit log) is kept when a
// test failed, to be read.
func (p *controlPlane) stop(passed bool) error {
	p.gc.Stop()
	err := p.te.Stop()
	if passed && os.Getenv("GANTRY_RELIABILITY_KEEP") == "" {
		_ = os.RemoveAll(p.dir)
	} else {
		fmt.Fprintf(os.Stderr, "reliability: logs and audit log kept in %s\n", p.dir)
	}
	return err
}

// buildGantry builds ./cmd/gantry. Under -race (`make test`) the controller is built
// with the race detector too — it shares the test build's compiled packages, and a
// data race in the controller under faults fails the scenario that met it.
func buildGantry(root, dir string) (string, error) {
	bin := filepath.Join(dir, "gantry")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building ./cmd/gantry: %w", err)
	}
	cmd := exec.CommandContext(ctx, gobin, append(args, "./cmd/gantry")...)
	cmd.Dir = root
	if !raceEnabled {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building ./cmd/gantry: %w\n%s", err, out)
	}
	return bin, nil
}

// copyBinary copies bin into dir, where the sandboxed controller can read it.
func copyBinary(bin, dir string) (string, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("GANTRY_RELIABILITY_BIN: %w", err)
	}
	out := filepath.Join(dir, "gantry")
	return out, os.WriteFile(out, b, 0o755)
}

func loadRole(path string) (*rbacv1.ClusterRole, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(manager.Scheme())
	obj, _, err := codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	role, ok := obj.(*rbacv1.ClusterRole)
	if !ok || role.Name != managerRole {
		return nil, fmt.Errorf("%s is not ClusterRole %s", path, managerRole)
	}
	return role, nil
}

// writeKubeconfig writes a kubeconfig reaching server (the API server, or a proxy in
// front of it) with the admin's client certificate, impersonating user in groups when
// user is set.
func (p *controlPlane) writeKubeconfig(path, server, user string, groups []string) error {
	if server == "" {
		server = p.cfg.Host
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: p.cfg.CertData, ClientKeyData: p.cfg.KeyData,
		Impersonate: user, ImpersonateGroups: groups,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "user"}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o644)
}

// sandboxArgs wraps a command so that it runs the way the controller's Deployment runs
// it: as uid/gid 65532, on a read-only root filesystem, with an empty writable /tmp.
// Any write outside /tmp fails with EROFS. The controller is killed if the test process
// dies (changing the uid clears the parent-death signal; setpriv sets it again).
func sandboxArgs(bin string, args []string) (string, []string) {
	script := `mount -o remount,bind,ro / && mount -t tmpfs -o size=64m,mode=1777 tmpfs /tmp && ` +
		`exec setpriv --reuid=65532 --regid=65532 --clear-groups --inh-caps=-all --pdeathsig=SIGKILL "$0" "$@"`
	return "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, bin}, args...)
}

// checkSandbox proves the sandbox works before it is trusted: a write to the root
// filesystem must fail, a write to /tmp must succeed, and the user must be 65532.
func checkSandbox(dir string) error {
	for _, tool := range []string{"unshare", "setpriv", "mount", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found", tool)
		}
	}
	// A directory uid 65532 may write to: only the read-only mount can stop it.
	open := filepath.Join(dir, "sandbox-probe")
	if err := os.Mkdir(open, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(open, 0o777); err != nil {
		return err
	}
	defer os.RemoveAll(open)
	probe := filepath.Join(open, "file")
	name, args := sandboxArgs("sh", []string{"-c", `id -u; touch /tmp/ok && echo tmp-writable; touch "$1" 2>&1 && echo root-writable; exit 0`, "sh", probe})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("unshare/mount/setpriv failed (%w): %s", err, strings.TrimSpace(string(out)))
	}
	got := string(out)
	if _, err := os.Stat(probe); err == nil {
		_ = os.Remove(probe)
		return errors.New("the sandbox let uid 65532 write to the root filesystem")
	}
	if !strings.HasPrefix(got, "65532\n") || !strings.Contains(got, "tmp-writable") || strings.Contains(got, "root-writable") ||
		!strings.Contains(got, "Read-only file system") {
		return fmt.Errorf("the sandbox does not behave as expected: %q", got)
	}
	return nil
}
