package install

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// docCluster is an empty cluster for one docs scenario: etcd and kube-apiserver
// without Gantry's CRDs (the docs install them), and kube-controller-manager's
// namespace and garbage-collector controllers, so that deleting a namespace or an
// owner works as it does in a real cluster. No kubelet and no scheduler: pods stay
// Pending, and the test runs the controller itself (docs_controller_test.go).
type docCluster struct {
	cfg        *rest.Config
	c          client.Client
	kubeconfig string // the admin's, for the docs' commands
	te         *envtest.Environment
	kcm        *exec.Cmd
	dir        string
}

func startDocCluster(t *testing.T, dir string) *docCluster {
	t.Helper()
	kcmBin := filepath.Join(env.AssetsDir, "kube-controller-manager")
	if _, err := os.Stat(kcmBin); err != nil {
		t.Fatalf("the docs tests need kube-controller-manager beside kube-apiserver in %s (run `make k8s-bins`): %v", env.AssetsDir, err)
	}
	dc := &docCluster{dir: dir, te: &envtest.Environment{BinaryAssetsDirectory: env.AssetsDir, Scheme: env.Scheme}}
	cfg, err := dc.te.Start()
	if err != nil {
		t.Fatalf("starting a control plane for the docs: %v", err)
	}
	t.Cleanup(dc.stop)
	cfg.QPS, cfg.Burst = 500, 1000
	dc.cfg = cfg
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	if dc.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	admin, err := dc.te.AddUser(envtest.User{Name: "docs-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dc.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(dc.kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	dc.kcm = exec.Command(kcmBin, "--kubeconfig="+dc.kubeconfig, "--secure-port=0", "--leader-elect=false", //nolint:noctx // stopped with its process group
		"--controllers=namespace,garbagecollector")
	dc.kcm.Stdout, dc.kcm.Stderr = logf, logf
	dc.kcm.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := dc.kcm.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting kube-controller-manager: %v", err)
	}
	go func() { _ = dc.kcm.Wait(); logf.Close() }()
	return dc
}

func (dc *docCluster) stop() {
	if dc.kcm != nil && dc.kcm.Process != nil {
		_ = syscall.Kill(-dc.kcm.Process.Pid, syscall.SIGKILL)
	}
	_ = dc.te.Stop()
}

// serviceAccountKubeconfig writes a kubeconfig that acts as the ServiceAccount ns/sa
// (the admin's certificate, impersonating it): what the controller's pod would get.
func (dc *docCluster) serviceAccountKubeconfig(t *testing.T, ns, sa string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["docs"] = &clientcmdapi.Cluster{Server: dc.cfg.Host, CertificateAuthorityData: dc.cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: dc.cfg.CertData, ClientKeyData: dc.cfg.KeyData,
		Impersonate:       "system:serviceaccount:" + ns + ":" + sa,
		ImpersonateGroups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	kc.Contexts["docs"] = &clientcmdapi.Context{Cluster: "docs", AuthInfo: "sa"}
	kc.CurrentContext = "docs"
	path := filepath.Join(dc.dir, fmt.Sprintf("kubeconfig-%s-%s", ns, sa))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// copyTree copies the directory src into dst (files and directories only).
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, fi.Mode().Perm())
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for {
		ok, state := cond(ctx)
		if ok {
			return
		}
		last = state
		select {
		case <-ctx.Done():
			t.Fatalf("waited %s for %s; last seen: %s", timeout, what, strings.TrimSpace(last))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
