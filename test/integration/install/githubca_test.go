package install

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const testCAPEM = "-----BEGIN CERTIFICATE-----\nMIIBdTCCARugAwIBAgIBATAKBggqhkjOPQQDAjAZMRcwFQYDVQQDEw5HYW50cnkg\n-----END CERTIFICATE-----\n"

// checkCABundle checks that the controller reads the CA bundle from ConfigMap cm.
func checkCABundle(t *testing.T, d *appsv1.Deployment, cm, key string) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	if want := "--github-ca-bundle=/etc/gantry/github-ca/" + key; !slices.Contains(c.Args, want) {
		t.Errorf("args %q lack %q", c.Args, want)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "github-ca" && m.MountPath == "/etc/gantry/github-ca" && m.ReadOnly
	})
	if !mounted {
		t.Errorf("volume mounts %+v lack github-ca read-only at /etc/gantry/github-ca", c.VolumeMounts)
	}
	found := slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == "github-ca" && v.ConfigMap != nil && v.ConfigMap.Name == cm
	})
	if !found {
		t.Errorf("volumes %+v lack github-ca from ConfigMap %s", d.Spec.Template.Spec.Volumes, cm)
	}
}

// The chart's githubCABundle: inline PEM (the chart creates the ConfigMap) or an
// existing ConfigMap; unset, no flag and no volume.
func TestHelmGitHubCABundle(t *testing.T) {
	const ns = "gantry-ca"
	objs := mustHelmTemplate(t, "g", ns, map[string]any{"githubCABundle": map[string]any{"pem": testCAPEM}})
	checkCABundle(t, typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "g-gantry")), "g-gantry-github-ca", "ca.crt")
	cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", ns, "g-gantry-github-ca"))
	if cm.Data["ca.crt"] != testCAPEM {
		t.Errorf("ConfigMap data = %q, want the PEM given", cm.Data)
	}

	objs = mustHelmTemplate(t, "g", ns, map[string]any{"githubCABundle": map[string]any{"configMap": "corp-ca", "key": "bundle.pem"}})
	checkCABundle(t, typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "g-gantry")), "corp-ca", "bundle.pem")
	for _, cm := range ofKind(objs, "ConfigMap") {
		if strings.Contains(cm.GetName(), "github-ca") {
			t.Errorf("the chart created a ConfigMap for an existing one: %s", describe(cm))
		}
	}

	d := typed[appsv1.Deployment](t, find(t, mustHelmTemplate(t, "g", ns, nil), "Deployment", ns, "g-gantry"))
	if _, ok := argWithPrefix(d.Spec.Template.Spec.Containers[0].Args, "--github-ca-bundle"); ok {
		t.Errorf("without githubCABundle the controller got --github-ca-bundle: %q", d.Spec.Template.Spec.Containers[0].Args)
	}
}

// config/components/github-ca used from an overlay, as its comment shows.
func TestKustomizeGitHubCAComponent(t *testing.T) {
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"resources: [" + rel("config/default") + "]\ncomponents: [" + rel("config/components/github-ca") + "]\n" +
		"configMapGenerator:\n  - name: gantry-github-ca\n    namespace: gantry-system\n    files: [ca.crt]\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte(testCAPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := kustomizeBuild(t, dir)
	// The generated one, and no other of the CA's (the install's own ConfigMaps, such
	// as the runner NetworkPolicy's, are not this component's).
	var cms []*unstructured.Unstructured
	for _, cm := range ofKind(objs, "ConfigMap") {
		if strings.HasPrefix(cm.GetName(), "gantry-github-ca") {
			cms = append(cms, cm)
		}
	}
	if len(cms) != 1 {
		t.Fatalf("want one CA ConfigMap, got %s", inventory(ofKind(objs, "ConfigMap")))
	}
	d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "gantry-system", "gantry-controller"))
	// kustomize renames the generated ConfigMap with a content hash and the volume with it.
	checkCABundle(t, d, cms[0].GetName(), "ca.crt")
	ensureNamespace(t, "gantry-system")
	dryRunApply(t, objs)
}
