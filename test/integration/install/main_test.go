// Package install tests how Gantry is installed: the Helm chart (charts/gantry) and
// the kustomize bases (config/default, config/namespaced). helm and kustomize are the
// versions pinned in hack/helm/go.mod, built from the Go module proxy; the rendered
// manifests are applied with server-side dry-run to a real kube-apiserver, their RBAC is
// compared with the generated config/rbac/role.yaml, and the controller is run with
// exactly the chart's rights.
//
// Without helm or kustomize (no module proxy, no Go toolchain) the package fails with a
// message that says so: it never skips.
package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/internal/testenv"
)

var (
	env  *testenv.Env
	root string
	// helmBin and kustomizeBin are the pinned tools, built once by TestMain.
	helmBin, kustomizeBin string
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.UseDevMode(false), zap.Level(zapcore.ErrorLevel)))
	var err error
	if root, err = testenv.RepoRoot(); err != nil {
		fmt.Fprintf(os.Stderr, "install: %v\n", err)
		os.Exit(1)
	}
	// Built before the tests start, so that building them (minutes on a cold cache)
	// does not count against the test timeout.
	if helmBin, err = buildTool("helm"); err == nil {
		kustomizeBin, err = buildTool("kustomize")
	}
	if err == nil {
		// Kept in out/ (ignored by git), where the next run overwrites them.
		toolsDir := filepath.Join(root, "out", "docs-tools")
		if err = os.MkdirAll(toolsDir, 0o755); err == nil {
			err = buildDocTools(toolsDir)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "install: %v\n", err)
		os.Exit(1)
	}
	testenv.Main(m, &env)
}

// buildTool builds a tool pinned in hack/helm/go.mod (into Go's build cache, where a
// second run finds it) and returns its path.
func buildTool(name string) (string, error) { return buildPinnedTool("hack/helm/go.mod", name) }

// buildPinnedTool builds a tool pinned in modfile and returns its path.
func buildPinnedTool(modfile, name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "tool", "-modfile="+modfile, "-n", name)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building %s from %s failed: the install tests need it and do not skip "+
			"(it is built through the Go module proxy; check GOPROXY and the network): %v\n%s", name, modfile, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	path := strings.TrimSpace(lines[len(lines)-1])
	if fi, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("`go tool -n %s` printed %q, which is not a built binary: %w", name, path, err)
	} else if fi.IsDir() {
		return "", fmt.Errorf("`go tool -n %s` printed %q, a directory, not a built binary", name, path)
	}
	return path, nil
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// run runs a tool from the repository root. Its output is returned, never logged: a
// rendered chart can hold credentials.
func run(t *testing.T, bin string, args ...string) (stdout []byte, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(ctx(t), bin, args...)
	cmd.Dir = root
	home := t.TempDir()
	// helm keeps caches and configuration under these; keep them out of $HOME.
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	return out, errb.String(), err
}

// helmTemplate renders the chart as release `release` in namespace ns with values.
func helmTemplate(t *testing.T, release, ns string, values map[string]any, extra ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	// helm splits --values on commas, which t.TempDir's name can hold.
	dir, err := os.MkdirTemp("", "gantry-values-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	vf := filepath.Join(dir, "values.yaml")
	b, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vf, b, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"template", release, "charts/gantry", "--namespace", ns, "--values", vf}, extra...)
	out, stderr, err := run(t, helmBin, args...)
	if err != nil {
		return nil, fmt.Errorf("helm template: %w: %s", err, stderr)
	}
	return parseManifests(t, out), nil
}

func mustHelmTemplate(t *testing.T, release, ns string, values map[string]any, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := helmTemplate(t, release, ns, values, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, stderr, err := run(t, kustomizeBin, "build", dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v: %s", dir, err, stderr)
	}
	return parseManifests(t, out)
}

// kustomizeOverlay writes an overlay of the given kustomization.yaml into out/ (ignored
// by git: kustomize takes only relative paths to other kustomizations, so the overlay
// lives in the repository, two levels down) and builds it.
func kustomizeOverlay(t *testing.T, kustomization string) []*unstructured.Unstructured {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "out"), "overlay-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomizeBuild(t, dir)
}

// parseManifests splits a multi-document YAML stream into objects; empty documents
// (a template that rendered nothing) are dropped.
func parseManifests(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("splitting the rendered YAML: %v", err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("a rendered document is not YAML: %v", err)
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "{}" || s == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("a rendered document is not a Kubernetes object: %v", err)
		}
		objs = append(objs, u)
	}
}

func describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// inventory lists the objects by kind and name only: what a failure may print.
func inventory(objs []*unstructured.Unstructured) string {
	var s []string
	for _, o := range objs {
		s = append(s, describe(o))
	}
	sort.Strings(s)
	return strings.Join(s, "\n")
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// find returns the one object of kind, namespace and name, failing otherwise.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s was rendered; rendered:\n%s", kind, ns, name, inventory(objs))
	return nil
}

// typed converts a rendered object into its Go type.
func typed[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &v); err != nil {
		t.Fatalf("%s does not convert to %T: %v", describe(o), v, err)
	}
	return &v
}

// namespaces creates n namespaces for the test (deleted when it ends).
func namespaces(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		out = append(out, env.Namespace(t))
	}
	return out
}

// ensureNamespace creates a fixed-name namespace the kustomize bases use, once.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := env.Client.Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

var serviceMonitorCRD sync.Once

// installServiceMonitorCRD installs a minimal ServiceMonitor CRD
// (monitoring.coreos.com/v1) so that the chart's ServiceMonitor can be applied: envtest
// has no Prometheus Operator. Its schema keeps every field, so the API server checks
// the object's kind, version and metadata, not its spec; the chart tests check the
// spec's fields against the metrics Service.
func installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	var err error
	serviceMonitorCRD.Do(func() {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{
					Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList",
				},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptrTo(true),
					}},
				}},
			},
		}
		_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	})
	if err != nil {
		t.Fatalf("installing the minimal ServiceMonitor CRD: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// dryRunApply applies every object with server-side apply in dry-run mode: the API
// server validates and admits each one as it would at install, and stores nothing.
// Namespaced objects need their namespace to exist.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	apply(t, objs, client.DryRunAll)
}

func apply(t *testing.T, objs []*unstructured.Unstructured, opts ...client.ApplyOption) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatal("nothing to apply")
	}
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, client.FieldOwner("gantry-install-test"), client.ForceOwnership)
	for _, o := range objs {
		if err := c.Apply(ctx(t), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...); err != nil {
			t.Errorf("the API server refuses %s: %v", describe(o), err)
		}
	}
}

// isContainerHookFence reports whether o is one of the cluster-scoped objects of
// Kubernetes mode every install ships: the gantry-container-hook ClusterRole, which
// grants nothing until the controller binds it to a pool's ServiceAccount in one
// namespace, and the admission policy and its binding, which only take rights away.
func isContainerHookFence(o *unstructured.Unstructured) bool {
	switch o.GetKind() {
	case "ClusterRole", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		return o.GetName() == "gantry-container-hook"
	}
	return false
}

// withoutHookRole drops the gantry-container-hook ClusterRole from objs.
func withoutHookRole(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !isContainerHookFence(o) {
			out = append(out, o)
		}
	}
	return out
}
