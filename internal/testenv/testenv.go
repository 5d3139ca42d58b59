// Package testenv runs Gantry's integration tests against a real kube-apiserver and
// etcd through controller-runtime's envtest, with Gantry's CRDs installed and
// kube-controller-manager's garbage collector running, as in a real cluster.
//
// A package starts the control plane once in TestMain:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { testenv.Main(m, &env) }
//
// and each test takes a namespace of its own with env.Namespace(t).
//
// The binaries come from KUBEBUILDER_ASSETS, or else from the cache directory that
// hack/k8s-bins.sh (`make k8s-bins`) builds them into. When they are missing the
// package fails with a message that says how to build them: it never skips.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	gantryv1alpha1 "github.com/gantry-dev/gantry/api/v1alpha1"
)

// Env is a running control plane with Gantry's CRDs installed.
type Env struct {
	// Config reaches the kube-apiserver with full rights.
	Config *rest.Config
	// Client is a direct client: every read goes to the kube-apiserver, never a cache,
	// so assertions see what is really stored.
	Client client.Client
	// Scheme knows the core Kubernetes types and Gantry's.
	Scheme *runtime.Scheme
	// AssetsDir is the directory holding the control-plane binaries.
	AssetsDir string

	env *envtest.Environment
	gc  *GarbageCollector
}

// Main starts the control plane, runs the package's tests, stops the control plane and
// exits. Use it as the body of TestMain.
func Main(m *testing.M, env **Env) {
	e, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Start starts etcd and kube-apiserver, installs the CRDs from config/crd/bases, and
// starts the garbage collector.
func Start() (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := AssetsDir(root)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := gantryv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	AdmitLikeARealCluster(te)
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	// Tests create many objects quickly; the default client limits (5 QPS) would make
	// them wait on the client, not on the server.
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	gc, err := StartGarbageCollector(te, assets)
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, AssetsDir: assets, env: te, gc: gc}, nil
}

// Stop stops the garbage collector and the control plane.
func (e *Env) Stop() error {
	e.gc.Stop()
	return e.env.Stop()
}

var nsCounter atomic.Int64

// Namespace creates a namespace for one test and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(base) > 40 {
		base = base[:40]
	}
	name := fmt.Sprintf("%s-%d", strings.Trim(base, "-"), nsCounter.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// envtest runs no namespace controller, so objects inside are left as they are;
		// deleting the namespace keeps the tests from seeing each other's names.
		_ = e.Client.Delete(ctx, ns)
	})
	if err := CreateDefaultServiceAccount(ctx, e.Client, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// AdmitLikeARealCluster configures te's kube-apiserver with the admission plugins of a
// real cluster: envtest turns the ServiceAccount plugin off, so that pods need no
// ServiceAccount; here it is on, and pods are admitted — given their ServiceAccount
// and its token volume — exactly as a real cluster admits them. A namespace then needs
// its `default` ServiceAccount before a pod can be created in it: Namespace creates it
// (CreateDefaultServiceAccount), as kube-controller-manager would.
func AdmitLikeARealCluster(te *envtest.Environment) {
	te.ControlPlane.GetAPIServer().Configure().Disable("disable-admission-plugins")
}

// CreateDefaultServiceAccount creates the `default` ServiceAccount of namespace ns, as
// kube-controller-manager's ServiceAccount controller does in a real cluster (envtest
// runs no controller-manager). An existing one is left as it is.
func CreateDefaultServiceAccount(ctx context.Context, c client.Client, ns string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default ServiceAccount of namespace %s: %w", ns, err)
	}
	return nil
}

// AssetsDir returns the directory holding etcd, kube-apiserver and
// kube-controller-manager: KUBEBUILDER_ASSETS when set, otherwise the cache directory
// that hack/k8s-bins.sh builds into.
func AssetsDir(root string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "k8s-bins.sh"), "--print").Output()
		if err != nil {
			return "", fmt.Errorf("asking hack/k8s-bins.sh where the Kubernetes binaries are: %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s not found in %s: run `make k8s-bins` to build the control plane from source "+
			"(about 7 minutes the first time, cached afterwards), or point KUBEBUILDER_ASSETS at a directory that has them",
			strings.Join(missing, " and "), dir)
	}
	return dir, nil
}

// RepoRoot finds the repository root: the nearest parent directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack", "k8s-bins.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (a directory with go.mod and hack/k8s-bins.sh) above the working directory")
		}
		dir = parent
	}
}
