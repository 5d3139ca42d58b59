package install

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

var (
	corev1Pod  = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	crdListGVK = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList")
)

const (
	quickstart = "docs/quickstart.md#"
	install    = "docs/install.md#"
	operations = "docs/operations.md#"
	chart      = "charts/gantry/README.md#"
)

// docScenarios are the paths a user takes through the docs, each from an empty
// cluster to an uninstall that leaves nothing behind. The blocks run as written (with
// the placeholders their markers name substituted); between them the test does what
// the user does on GitHub (a webhook, a job) and checks what the docs promise.
var docScenarios = []docScenario{{
	name: "quickstart with Helm, upgrade, uninstall",
	steps: []docStep{
		block(quickstart + "helm-install"),
		startController("gantry-system", "gantry"),
		block(quickstart + "app-secret"),
		block(quickstart + "webhook-secret-helm"),
		githubWebhook(quickstart + "webhook-secret-helm"),
		block(quickstart + "pool-file"),
		block(quickstart + "pool-apply"),
		poolReady("ci", "linux-x64"),
		runnerPolicyIn("ci"),
		jobGetsRunner("ci"),
		crdsFromAnOlderRelease(),
		block(install + "helm-upgrade"),
		settingsKept("gantry-system", "gantry", "registry.example.com/gantry:v0.1.0"),
		restartController("gantry-system", "gantry"),
		poolReady("ci", "linux-x64"),
		block(install + "delete-pools"),
		block(install + "helm-uninstall"),
		nothingLeft("gantry-system"),
	},
}, {
	name: "quickstart with kustomize, uninstall",
	steps: []docStep{
		block(quickstart + "kustomize-install"),
		startController("gantry-system", "gantry-controller"),
		block(quickstart + "app-secret"),
		block(quickstart + "webhook-secret-kustomize"),
		githubWebhook(""),
		block(quickstart + "pool-file"),
		block(quickstart + "pool-apply"),
		poolReady("ci", "linux-x64"),
		runnerPolicyIn("ci"),
		jobGetsRunner("ci"),
		block(install + "delete-pools"),
		block(install + "kustomize-uninstall"),
		nothingLeft("gantry-system"),
	},
}, {
	name: "quickstart with kustomize, then the webhook through an Ingress",
	steps: []docStep{
		block(quickstart + "kustomize-install"),
		block(install + "ingress-overlay"),
		block(install + "ingress-apply"),
		ingressAsDocumented(),
	},
}, {
	name: "install with kustomize, upgrade, uninstall",
	steps: []docStep{
		block(install + "kustomize-install"),
		startController("gantry-system", "gantry-controller"),
		block(quickstart + "app-secret"),
		block(quickstart + "pool-file"),
		block(quickstart + "pool-apply"),
		poolReady("ci", "linux-x64"),
		block(install + "kustomize-upgrade"),
		restartController("gantry-system", "gantry-controller"),
		poolReady("ci", "linux-x64"),
		block(install + "delete-pools"),
		block(install + "kustomize-uninstall"),
		nothingLeft("gantry-system"),
	},
}, {
	name: "chart README: two watched namespaces, the sample pool, upgrade, uninstall",
	steps: []docStep{
		serviceMonitorCRDStep(),
		block(chart + "values-file"),
		block(chart + "install-values"),
		startController("gantry-system", "gantry"),
		samplePoolOnTheSimulator(),
		block(chart + "sample-pool"),
		poolReady("ci", "linux-x64"),
		block(chart + "webhook-secret"),
		githubWebhook(chart + "webhook-secret"),
		jobGetsRunner("ci"),
		crdsFromAnOlderRelease(),
		block(chart + "upgrade"),
		settingsKept("gantry-system", "gantry", ""),
		restartController("gantry-system", "gantry"),
		poolReady("ci", "linux-x64"),
		block(chart + "uninstall"),
		nothingLeft(),
	},
}, {
	name: "operations upgrade, then uninstalled in the wrong order and recovered",
	steps: []docStep{
		block(chart + "install"),
		startController("gantry-system", "gantry"),
		block(quickstart + "app-secret"),
		block(quickstart + "webhook-secret-helm"),
		githubWebhook(quickstart + "webhook-secret-helm"),
		block(quickstart + "pool-file"),
		block(quickstart + "pool-apply"),
		poolReady("ci", "linux-x64"),
		runnerPolicyIn("ci"),
		jobGetsRunner("ci"),
		crdsFromAnOlderRelease(),
		block(operations + "helm-upgrade-crds"),
		block(operations + "helm-upgrade"),
		restartController("gantry-system", "gantry"),
		uninstallFirst(),
		block(install + "recover-install"),
		startController("gantry-system", "gantry"),
		block(install + "recover-finish"),
		nothingLeft("gantry-system"),
	},
}}

// crdsFromAnOlderRelease makes the installed CRDs differ from the chart's, as after
// an upgrade of the checkout: the server-side apply that follows must take fields over
// from Helm's field manager. It proves the point first: without --force-conflicts the
// API server refuses.
func crdsFromAnOlderRelease() docStep {
	return action("make the installed CRDs an older release's (Helm owns a printer column the new chart changes)", func(t *testing.T, w *docWorld) {
		ctx := context.Background()
		var crd apiextensionsv1.CustomResourceDefinition
		if err := w.cluster.c.Get(ctx, client.ObjectKey{Name: "runnerpools.gantry.dev"}, &crd); err != nil {
			t.Fatal(err)
		}
		managers := map[string]bool{}
		for _, m := range crd.ManagedFields {
			managers[m.Manager] = true
		}
		if !managers["helm"] {
			t.Logf("the RunnerPool CRD's field managers are %v", managers)
		}
		// Helm, as the installer of an older chart, applies a CRD with one printer
		// column less.
		old := crd.DeepCopy()
		old.ManagedFields, old.ResourceVersion, old.UID, old.CreationTimestamp, old.Generation = nil, "", "", metav1.Time{}, 0
		old.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		cols := old.Spec.Versions[0].AdditionalPrinterColumns
		old.Spec.Versions[0].AdditionalPrinterColumns = cols[:len(cols)-1]
		old.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
		if err != nil {
			t.Fatal(err)
		}
		delete(u, "status")
		ac := client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u})
		if err := w.cluster.c.Apply(ctx, ac, client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("re-applying the CRD as an older release: %v", err)
		}
		_, stderr, err := w.shell(t, "kubectl apply --server-side -f charts/gantry/crds/")
		if err == nil || !strings.Contains(stderr, "conflict") {
			t.Fatalf("kubectl apply --server-side without --force-conflicts over a Helm install: err %v, stderr %s; want the conflict the docs warn of", err, stderr)
		}
		t.Logf("as documented, without --force-conflicts: %s", firstLine(stderr))
	})
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// settingsKept: after the documented upgrade the Deployment still has what was set at
// install (image, when given, and the watched namespaces).
func settingsKept(ns, name, image string) docStep {
	return action("check the upgrade kept the install's settings", func(t *testing.T, w *docWorld) {
		var d appsv1.Deployment
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if image != "" && c.Image != image {
			t.Errorf("after the upgrade the image is %q, want %q as set at install", c.Image, image)
		}
		if w.out[chart+"install-values"] != "" || strings.Contains(strings.Join(c.Args, " "), "--namespaces") {
			if !hasArg(c.Args, "--namespaces=ci,ci-gpu") {
				t.Errorf("after the upgrade the args are %q, want --namespaces=ci,ci-gpu as installed", c.Args)
			}
		}
	})
}

// serviceMonitorCRDStep installs a minimal ServiceMonitor CRD, as the Prometheus Operator
// would: the chart README's values enable a ServiceMonitor.
func serviceMonitorCRDStep() docStep {
	return action("install the Prometheus Operator's ServiceMonitor CRD (minimal), which the README's values need", func(t *testing.T, w *docWorld) {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList"},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}}}},
			},
		}
		if _, err := envtest.InstallCRDs(w.cluster.cfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}); err != nil {
			t.Fatal(err)
		}
	})
}

// samplePoolOnTheSimulator points the working copy of config/samples at the
// simulator: the sample names https://github.com/my-org.
func samplePoolOnTheSimulator() docStep {
	return action("point the working copy of config/samples/gantry_v1alpha1_runnerpool.yaml at the simulator", func(t *testing.T, w *docWorld) {
		w.replaceInFile(t, "config/samples/gantry_v1alpha1_runnerpool.yaml", "https://github.com/my-org", w.subst["https://github.com/my-org"])
	})
}

// uninstallFirst is the mistake the docs warn of: the controller goes before the
// pools, then the CRDs are deleted, which leaves Runners with a finalizer nobody
// removes.
func uninstallFirst() docStep {
	return action("uninstall in the wrong order: helm uninstall, then delete the CRDs without waiting", func(t *testing.T, w *docWorld) {
		for _, cmd := range []string{"helm uninstall gantry -n gantry-system", "kubectl delete -f charts/gantry/crds/ --wait=false"} {
			if _, stderr, err := w.shell(t, cmd); err != nil {
				t.Fatalf("%s: %v: %s", cmd, err, stderr)
			}
		}
		// The Runner is stuck: deleted, its finalizer still there, the CRD waiting.
		waitFor(t, "the Runner deleted but held by its finalizer", time.Minute, func(ctx context.Context) (bool, string) {
			var runners v1alpha1.RunnerList
			if err := w.cluster.c.List(ctx, &runners, client.InNamespace("ci")); err != nil {
				return false, err.Error()
			}
			return len(runners.Items) == 1 && runners.Items[0].DeletionTimestamp != nil && len(runners.Items[0].Finalizers) > 0, "runners not yet deleted"
		})
		var crd apiextensionsv1.CustomResourceDefinition
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Name: "runners.gantry.dev"}, &crd); err != nil || crd.DeletionTimestamp == nil {
			t.Fatalf("the Runner CRD should be stuck deleting: %v", err)
		}
	})
}

// ingressAsDocumented checks what install.md's Ingress overlay promises on top of the
// quickstart's: the Ingress with the host, the class and TLS for it, and the
// controller still on the quickstart's image.
func ingressAsDocumented() docStep {
	return action("check the Ingress (host, class, TLS) and the controller's image", func(t *testing.T, w *docWorld) {
		var ing networkingv1.Ingress
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: "gantry-system", Name: "gantry-webhook"}, &ing); err != nil {
			t.Fatalf("the overlay made no Ingress gantry-system/gantry-webhook: %v", err)
		}
		if c := ing.Spec.IngressClassName; c == nil || *c != "nginx" {
			t.Errorf("ingressClassName %v, want nginx", c)
		}
		if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "gantry.example.com" {
			t.Errorf("rules %+v, want one for gantry.example.com", ing.Spec.Rules)
		}
		if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName == "" || !slices.Equal(ing.Spec.TLS[0].Hosts, []string{"gantry.example.com"}) {
			t.Errorf("tls %+v, want a Secret for gantry.example.com", ing.Spec.TLS)
		}
		var d appsv1.Deployment
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: "gantry-system", Name: "gantry-controller"}, &d); err != nil {
			t.Fatal(err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/gantry:v0.1.0" {
			t.Errorf("the controller's image is %q after the overlay, want the quickstart's registry.example.com/gantry:v0.1.0", img)
		}
	})
}
