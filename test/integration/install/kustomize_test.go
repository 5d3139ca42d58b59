package install

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// TestKustomizeEvictionWebhookComponent builds config/default with the eviction webhook
// component: the same webhook as the chart's, its certificate from cert-manager (the
// Certificate names the Service's DNS names and the Secret the controller mounts, and
// the CA is injected from it), and the API server admitted to the port. The core
// objects are applied with server-side dry-run; cert-manager's kinds are not served
// by the test API server.
func TestKustomizeEvictionWebhookComponent(t *testing.T) {
	objs := kustomizeOverlay(t, "resources: [../../config/default]\ncomponents: [../../config/components/eviction-webhook]\n")
	const ns = "gantry-system"
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry-controller"))
	e := evictionWebhook{
		vwc:        typed[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(t, objs, "ValidatingWebhookConfiguration", "", "gantry-eviction")),
		secretName: "gantry-eviction-webhook-tls",
		service:    typed[corev1.Service](t, find(t, objs, "Service", ns, "gantry-eviction-webhook")),
		deploy:     d,
	}
	e.checkWebhook(t)
	checkControllerPod(t, d)

	cert := find(t, objs, "Certificate", ns, "gantry-eviction-webhook")
	if got := e.vwc.Annotations["cert-manager.io/inject-ca-from"]; got != ns+"/"+cert.GetName() {
		t.Errorf("cert-manager.io/inject-ca-from = %q, want %s/%s", got, ns, cert.GetName())
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	svc := e.service.Name + "." + ns + ".svc"
	if diff := cmp.Diff([]string{svc, svc + ".cluster.local"}, dnsNames); secretName != e.secretName || diff != "" {
		t.Errorf("Certificate %s stores Secret %q (want %q), DNS names (-want +got):\n%s", cert.GetName(), secretName, e.secretName, diff)
	}
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	find(t, objs, "Issuer", ns, issuer)

	pools := []string{"ci"}
	w := newWorld(t, d, pools)
	if w.evictionPort != 9443 {
		t.Fatalf("the controller's eviction webhook port is %d, want 9443", w.evictionPort)
	}
	w.checkDefaults(t, withRunnerPolicies(networkPolicies(t, objs), runnerPolicy(t, objs, d), pools...))

	var core []*unstructured.Unstructured
	for _, o := range objs {
		if !strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			core = append(core, o)
		}
	}
	ensureNamespace(t, ns)
	dryRunApply(t, core)
}
