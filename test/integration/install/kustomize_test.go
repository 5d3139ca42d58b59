package install

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKustomizeDefault builds config/default, checks what it installs, and applies it to
// the API server with server-side dry-run.
func TestKustomizeDefault(t *testing.T) {
	objs := kustomizeBuild(t, "config/default")
	const ns = "gantry-system"
	for _, o := range objs {
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" || strings.HasPrefix(o.GetKind(), "Cluster") ||
			strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			continue
		}
		if o.GetNamespace() != ns {
			t.Errorf("%s is not in namespace %s", describe(o), ns)
		}
	}
	find(t, objs, "Namespace", "", ns)
	checkCRDs(t, objs)

	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry-controller"))
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"controller", "--leader-elect", "--webhook-secret=gantry-system/gantry-webhook",
		"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--webhook-bind-address=:9090"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if d.Spec.Template.Spec.ServiceAccountName != "gantry-controller" {
		t.Errorf("serviceAccountName = %q, want gantry-controller", d.Spec.Template.Spec.ServiceAccountName)
	}
	checkControllerPod(t, d)
	checkServices(t, objs, d, map[string]string{"gantry-webhook": "webhook", "gantry-metrics": "metrics"})

	// The ClusterRole is the generated one, untouched.
	role := typed[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "gantry-manager"))
	if diff := cmp.Diff(generatedRules(t), role.Rules); diff != "" {
		t.Errorf("config/default's ClusterRole differs from config/rbac/role.yaml (-generated +built):\n%s", diff)
	}

	ensureNamespace(t, ns)
	dryRunApply(t, objs)
}

// TestKustomizeNamespaced builds the config/namespaced overlay: Gantry and its pools in
// ci, no cluster-wide rights, the controller told to watch ci and to read its webhook
// Secret there; and applies it with server-side dry-run.
func TestKustomizeNamespaced(t *testing.T) {
	objs := kustomizeBuild(t, "config/namespaced")
	const ns = "ci"
	if n := len(withoutHookRole(ofKind(objs, "ClusterRole"))) + len(ofKind(objs, "ClusterRoleBinding")); n != 0 {
		t.Errorf("config/namespaced has %d cluster-wide RBAC objects, want none:\n%s", n, inventory(objs))
	}
	for _, o := range objs {
		if isContainerHookFence(o) {
			continue
		}
		if o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition" && o.GetNamespace() != ns {
			t.Errorf("%s is not in namespace %s", describe(o), ns)
		}
	}
	if labels := find(t, objs, "Namespace", "", ns).GetLabels(); labels["pod-security.kubernetes.io/enforce"] != "" {
		t.Errorf("namespace %s, where runner pods run, enforces Pod Security level %q: that is the user's choice", ns, labels["pod-security.kubernetes.io/enforce"])
	}
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry-controller"))
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--namespaces=ci", "--webhook-secret=ci/gantry-webhook"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--webhook-secret=") && a != "--webhook-secret=ci/gantry-webhook" {
			t.Errorf("args %q still name another webhook Secret: %q", args, a)
		}
	}
	find(t, objs, "Role", ns, "gantry-manager")
	find(t, objs, "RoleBinding", ns, "gantry-manager")
	checkControllerPod(t, d)
	checkCRDs(t, objs)
	ensureNamespace(t, ns)
	dryRunApply(t, objs)
}

// checkCRDs: the install carries every CRD in config/crd/bases.
func checkCRDs(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	want := crdNames(t, filepath.Join(root, "config", "crd", "bases"))
	var got []string
	for _, o := range ofKind(objs, "CustomResourceDefinition") {
		got = append(got, o.GetName())
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRDs (-config/crd/bases +installed):\n%s", diff)
	}
}

func crdNames(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s: %v", dir, err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range parseManifests(t, b) {
			names = append(names, o.GetName())
		}
	}
	sort.Strings(names)
	return names
}
