package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

var (
	corev1Pod  = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	crdListGVK = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList")
)

const (
	quickstart      = "docs/quickstart.md#"
	install         = "docs/install.md#"
	operations      = "docs/operations.md#"
	chart           = "charts/gantry/README.md#"
	containerJobs   = "docs/container-jobs.md#"
	demandDoc       = "docs/demand.md#"
	doctorDoc       = "docs/doctor.md#"
	troubleshooting = "docs/troubleshooting.md#"
	examplesDoc     = "examples/README.md#"
)

// docScenarios are the paths a user takes through the docs, each from an empty
// cluster, in the order the docs give them, with the values of the doc they started
// from throughout (the quickstart's image, say, through the CA and the upgrade). The
// blocks run as written, their placeholders filled in; between them the test does
// what the user does on GitHub (a webhook, a job) and checks what the docs promise.
var docScenarios = []docScenario{{
	name: "quickstart with Helm, then the CA, an upgrade, a pool, a workflow, doctor, uninstall",
	steps: []docStep{
		block(quickstart + "helm-install"),
		imageIs("gantry-system", "gantry", docImage),
		block(install + "ca-helm"),
		imageIs("gantry-system", "gantry", docImage),
		caConfigMap("gantry-system", "gantry-github-ca", "ca.crt"),
		crdsFromAnOlderRelease(),
		block(install + "helm-upgrade"),
		settingsKept("gantry-system", "gantry", docImage, "--github-ca-bundle="),
		startController("gantry-system", "gantry"), // trusts the simulator through the bundle alone
		block(quickstart + "app-secret"),
		block(quickstart + "webhook-secret-helm"),
		githubWebhook(quickstart + "webhook-secret-helm"),
		block(quickstart + "pool-file"),
		block(quickstart + "pool-apply"),
		poolReady("ci", "linux-x64"),
		runnerPolicyIn("ci"),
		block(quickstart + "hello-workflow"),
		watchWhile(quickstart+"watch", []string{"POOL", "linux-x64-"},
			workflowGetsRunner(quickstart+"hello-workflow", "ci", "linux-x64")),
		runnerPodAsShown("docs/runnerpool.md#restricted-defaults", "ci", "linux-x64"),
		block(doctorDoc + "doctor"),
		outputHas(doctorDoc+"doctor", "✓  last workflow_job delivery", "takes the job", `"pool"`),
		block(doctorDoc + "doctor-role"),
		block(doctorDoc + "doctor-binding"),
		doctorAsDocumentedUser(),
		block(install + "delete-pools"),
		block(install + "helm-uninstall"),
		nothingLeft("gantry-system"),
	},
}, {
	name: "quickstart with kustomize, then the CA overlay, a pool, an upgrade, uninstall",
	steps: []docStep{
		block(quickstart + "kustomize-install"),
		imageIs("gantry-system", "gantry-controller", docImage),
		block(install + "ca-overlay"),
		block(install + "ca-kustomize"),
		imageIs("gantry-system", "gantry-controller", docImage),
		caConfigMap("gantry-system", "gantry-github-ca", "ca.crt"),
		startController("gantry-system", "gantry-controller"), // trusts the simulator through the bundle alone
		block(quickstart + "app-secret"),
		block(quickstart + "webhook-secret-kustomize"),
		githubWebhook(""),
		block(quickstart + "pool-file"),
		block(quickstart + "pool-apply"),
		poolReady("ci", "linux-x64"),
		runnerPolicyIn("ci"),
		jobGetsRunner("ci"),
		block(install + "kustomize-upgrade"),
		settingsKept("gantry-system", "gantry-controller", docImage, "--github-ca-bundle="),
		restartController("gantry-system", "gantry-controller"),
		poolReady("ci", "linux-x64"),
		block(install + "delete-pools"),
		block(install + "kustomize-uninstall"),
		nothingLeft("gantry-system"),
	},
}, {
	name: "install.md from a checkout with kustomize, then the webhook through an Ingress",
	steps: []docStep{
		block(install + "own-overlay"),
		block(install + "kustomize-install"),
		imageIs("gantry-system", "gantry-controller", docImage),
		block(install + "ingress-overlay"),
		block(install + "ingress-apply"),
		ingressAsDocumented(),
	},
}, {
	name: "chart README: two watched namespaces, the sample pool, upgrade, uninstall",
	steps: []docStep{
		serviceMonitorCRDStep(),
		block(chart + "servicemonitor-crd"),
		block(chart + "values-file"),
		block(chart + "install-values"),
		imageIs("gantry-system", "gantry", docImage),
		startController("gantry-system", "gantry"),
		block(chart + "sample-pool-file"),
		block(chart + "sample-pool"),
		poolReady("ci", "linux-x64"),
		block(chart + "webhook-secret"),
		githubWebhook(chart + "webhook-secret"),
		jobGetsRunner("ci"),
		crdsFromAnOlderRelease(),
		block(chart + "upgrade"),
		settingsKept("gantry-system", "gantry", docImage, "--namespaces=ci,ci-gpu"),
		restartController("gantry-system", "gantry"),
		poolReady("ci", "linux-x64"),
		block(chart + "uninstall"),
		nothingLeft(),
	},
}, {
	name: "install.md: container jobs with a list of namespaces; a credentials Secret left held by an uninstall",
	steps: []docStep{
		block(install + "jobs-namespaces"),
		startController("gantry-system", "gantry"),
		block(chart + "app-secret"),
		block(install + "jobs-netpol"),
		block(install + "jobs-pool"),
		block(install + "jobs-pool-apply"),
		poolReady("ci", "linux-containers"),
		hookRoleBindingIn("ci-jobs"),
		networkPolicyIn("ci-jobs", "gantry-runners"),
		credentialsSecretLeftHeld("ci", "github-app"),
		block(troubleshooting + "secret-finalizer"),
		secretGone("ci", "github-app"),
	},
}, {
	name: "quickstart: a cluster with no public endpoint (scale-set pools, and demand.md's)",
	steps: []docStep{
		block(chart + "install-image"),
		startController("gantry-system", "gantry"),
		block(quickstart + "app-secret"),
		block(quickstart + "scaleset-pool"),
		block(quickstart + "scaleset-apply"),
		scaleSetActive("ci", "gantry-linux"),
		block(quickstart + "scaleset-apply"),
		scaleSetStatusAsShown(quickstart + "scaleset-apply"),
		block(troubleshooting + "scaleset-status"),
		outputHas(troubleshooting+"scaleset-status", `"session":"Active"`, `"type":"ScaleSetSession"`, `"status":"True"`),
		block(quickstart + "scaleset-workflow"),
		workflowGetsRunner(quickstart+"scaleset-workflow", "ci", "gantry-linux"),
		block(demandDoc + "private-pool"),
		block(demandDoc + "private-apply"),
		scaleSetActive("ci", "linux-private"),
		block(demandDoc + "private-workflow"),
		workflowGetsRunner(demandDoc+"private-workflow", "ci", "linux-private"),
		block(containerJobs + "jobs-namespace"),
		namespaceLabeled("ci-jobs", "pod-security.kubernetes.io/enforce", "baseline"),
	},
}, {
	name: "install.md with Helm, the operations upgrade, then uninstalled in the wrong order and recovered",
	steps: []docStep{
		block(install + "helm-install"),
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
		settingsKept("gantry-system", "gantry", docImage, ""),
		restartController("gantry-system", "gantry"),
		uninstallFirst(),
		block(install + "recover-install"),
		imageIs("gantry-system", "gantry", docImage),
		startController("gantry-system", "gantry"),
		block(install + "recover-finish"),
		nothingLeft("gantry-system"),
	},
}, {
	name: "an example applied as examples/README.md says; a release's version set as install.md says",
	steps: []docStep{
		block(quickstart + "kustomize-install"),
		block(quickstart + "app-secret"),
		block(examplesDoc + "apply-example"),
		poolStoredAsWritten("ci", "linux-warm", "examples/warm-pool.yaml"),
		block(install + "set-version"),
		fileHas("charts/gantry/Chart.yaml", "version: 1.2.3", `appVersion: "v1.2.3"`),
		fileHas("config/manager/kustomization.yaml", "newTag: v1.2.3"),
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

// settingsKept: after a documented upgrade the Deployment still has what was set at
// install: the image and, when given, an argument (its prefix).
func settingsKept(ns, name, image, argPrefix string) docStep {
	return action("check the upgrade kept the install's settings (image "+image+", "+argPrefix+"…)", func(t *testing.T, w *docWorld) {
		var d appsv1.Deployment
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			t.Fatal(err)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != image {
			t.Errorf("after the upgrade the image is %q, want %q as set at install", c.Image, image)
		}
		if _, ok := argWithPrefix(c.Args, argPrefix); argPrefix != "" && !ok {
			t.Errorf("after the upgrade the args are %q, want %s… as set before", c.Args, argPrefix)
		}
	})
}

// serviceMonitorCRDStep installs a minimal ServiceMonitor CRD, as the Prometheus Operator
// would: the chart README names the Prometheus Operator as a prerequisite of its
// values, and checks for the CRD in a block of its own.
func serviceMonitorCRDStep() docStep {
	return action("the Prometheus Operator's ServiceMonitor CRD (minimal), a prerequisite the README names", func(t *testing.T, w *docWorld) {
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
		class, host := w.subst["YOUR_INGRESS_CLASS"], w.subst["YOUR_WEBHOOK_HOST"]
		if c := ing.Spec.IngressClassName; c == nil || *c != class {
			t.Errorf("ingressClassName %v, want %s", c, class)
		}
		if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != host {
			t.Errorf("rules %+v, want one for %s", ing.Spec.Rules, host)
		}
		if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName == "" || !slices.Equal(ing.Spec.TLS[0].Hosts, []string{host}) {
			t.Errorf("tls %+v, want a Secret for %s", ing.Spec.TLS, host)
		}
		var d appsv1.Deployment
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: "gantry-system", Name: "gantry-controller"}, &d); err != nil {
			t.Fatal(err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != docImage {
			t.Errorf("the controller's image is %q after the overlay, want the overlay's %s", img, docImage)
		}
	})
}

// workflowGetsRunner queues the jobs of a documented workflow (the block ref, its
// jobs' runs-on as written) in my-org/hello, as GitHub would when it runs, and waits for
// a runner of pool ns/pool: registered on GitHub, a Runner and its pod.
func workflowGetsRunner(ref, ns, pool string) docStep {
	return action("queue the jobs of the workflow "+ref+" in my-org/hello; wait for a runner of "+ns+"/"+pool, func(t *testing.T, w *docWorld) {
		b, ok := w.blocks[ref]
		if !ok {
			t.Fatalf("no doc marks a block %s", ref)
		}
		var wf struct {
			Jobs map[string]struct {
				RunsOn any `json:"runs-on"`
			} `json:"jobs"`
		}
		if err := yaml.Unmarshal([]byte(b.body), &wf); err != nil || len(wf.Jobs) == 0 {
			t.Fatalf("%s is not a workflow with jobs: %v", b.where(), err)
		}
		for name, j := range wf.Jobs {
			var labels []string
			switch v := j.RunsOn.(type) {
			case string:
				labels = []string{v}
			case []any:
				for _, l := range v {
					labels = append(labels, fmt.Sprint(l))
				}
			default:
				t.Fatalf("%s: job %s: runs-on %v is neither a label nor a list", b.where(), name, j.RunsOn)
			}
			t.Logf("%s: job %s runs-on %v", ref, name, labels)
			if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: docRepo, Labels: labels, Name: name}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "a runner of "+ns+"/"+pool+" registered on GitHub, with its Runner and pod", 2*time.Minute, func(ctx context.Context) (bool, string) {
			var runners v1alpha1.RunnerList
			if err := w.cluster.c.List(ctx, &runners, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
				return false, err.Error()
			}
			registered := map[string]bool{}
			for _, r := range w.sim.Runners() {
				registered[r.Name] = true
			}
			for _, r := range runners.Items {
				var pod metav1.PartialObjectMetadata
				pod.SetGroupVersionKind(corev1Pod)
				if registered[r.Name] && w.cluster.c.Get(ctx, client.ObjectKeyFromObject(&r), &pod) == nil {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d Runners of the pool, %d runners registered on GitHub", len(runners.Items), len(registered))
		})
	})
}

// scaleSetActive waits for a scale-set pool's session to be Active: the scale set made
// on GitHub, its session open.
func scaleSetActive(ns, name string) docStep {
	return action("wait for RunnerPool "+ns+"/"+name+"'s scale set and an Active session", func(t *testing.T, w *docWorld) {
		waitFor(t, "pool "+ns+"/"+name+" with an Active scale-set session, Ready", 2*time.Minute, func(ctx context.Context) (bool, string) {
			var p v1alpha1.RunnerPool
			if err := w.cluster.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
				return false, err.Error()
			}
			ss := p.Status.ScaleSet
			return ss != nil && ss.ID != 0 && ss.Session == v1alpha1.SessionActive && meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady),
				fmt.Sprintf("scaleSet %+v, conditions %+v", ss, p.Status.Conditions)
		})
	})
}

// outputHas checks what a block printed.
func outputHas(ref string, want ...string) docStep {
	return action("check what "+ref+" printed", func(t *testing.T, w *docWorld) {
		for _, s := range want {
			if !strings.Contains(w.out[ref], s) {
				t.Errorf("%s printed %q, want it to hold %q", ref, w.out[ref], s)
			}
		}
	})
}

// imageIs checks the controller Deployment's image.
func imageIs(ns, name, image string) docStep {
	return action("check Deployment "+ns+"/"+name+" runs "+image, func(t *testing.T, w *docWorld) {
		var d appsv1.Deployment
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			t.Fatal(err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != image {
			t.Errorf("the controller's image is %q, want %q", img, image)
		}
	})
}

// caConfigMap checks that ConfigMap ns/name holds, under key, the CA file the docs' commands read.
func caConfigMap(ns, name, key string) docStep {
	return action("check ConfigMap "+ns+"/"+name+" holds "+docCAFile+" under "+key, func(t *testing.T, w *docWorld) {
		var cm corev1.ConfigMap
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(w.dir, docCAFile))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(cm.Data[key]) != strings.TrimSpace(string(want)) {
			t.Errorf("ConfigMap %s/%s key %s is not %s", ns, name, key, docCAFile)
		}
	})
}

// namespaceLabeled checks a namespace's label.
func namespaceLabeled(ns, key, value string) docStep {
	return action("check namespace "+ns+" has "+key+"="+value, func(t *testing.T, w *docWorld) {
		var n corev1.Namespace
		if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Name: ns}, &n); err != nil {
			t.Fatal(err)
		}
		if got := n.Labels[key]; got != value {
			t.Errorf("namespace %s: %s=%q, want %q", ns, key, got, value)
		}
	})
}

// watchWhile runs a block that watches until interrupted (kubectl get -w) while the
// steps run, then interrupts it, as a user would with Ctrl-C, and checks that it showed
// each of want.
func watchWhile(ref string, want []string, steps ...docStep) docStep {
	st := action("run "+ref+" (it watches) while: "+stepsWhat(steps), func(t *testing.T, w *docWorld) {
		b, ok := w.blocks[ref]
		if !ok {
			t.Fatalf("no doc marks a block %s", ref)
		}
		body := w.substitute(t, b)
		t.Logf("%s (in the background):\n%s", ref, indent(body))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", body)
		cmd.Dir = w.dir
		cmd.Env = w.shellEnv()
		var out, stderr syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for _, st := range steps {
			t.Logf("test: %s", st.what)
			st.act(t, w)
		}
		waitFor(t, ref+" showing "+strings.Join(want, ", "), 30*time.Second, func(context.Context) (bool, string) {
			for _, s := range want {
				if !strings.Contains(out.String(), s) {
					return false, fmt.Sprintf("not yet %s; stdout so far:\n%s\nstderr so far:\n%s", s, out.String(), stderr.String())
				}
			}
			return true, ""
		})
		cancel()
		_ = cmd.Wait()
		if stderr.Len() > 0 {
			t.Logf("%s stderr: %s", ref, stderr.String())
		}
		w.out[ref] = out.String()
		t.Logf("%s showed:\n%s", ref, indent(out.String()))
	})
	st.runs = []string{ref}
	return st
}

func stepsWhat(steps []docStep) string {
	var w []string
	for _, s := range steps {
		w = append(w, s.what)
	}
	return strings.Join(w, "; ")
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// runnerPodAsShown compares a runner pod of pool ns/pool, whose template says nothing
// about security, with the security settings the block ref shows: the pod's
// securityContext, and every container's and init container's.
func runnerPodAsShown(ref, ns, pool string) docStep {
	st := action("compare a runner pod of "+ns+"/"+pool+" with "+ref, func(t *testing.T, w *docWorld) {
		b, ok := w.blocks[ref]
		if !ok {
			t.Fatalf("no doc marks a block %s", ref)
		}
		var shown corev1.Pod
		if err := yaml.Unmarshal([]byte(b.body), &shown); err != nil || shown.Spec.SecurityContext == nil || len(shown.Spec.Containers) != 1 {
			t.Fatalf("%s: want a pod securityContext and one container's: %v", b.where(), err)
		}
		var pods corev1.PodList
		if err := w.cluster.c.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil || len(pods.Items) == 0 {
			t.Fatalf("no runner pod of %s/%s: %v", ns, pool, err)
		}
		pod := pods.Items[0]
		if diff := cmp.Diff(shown.Spec.SecurityContext, pod.Spec.SecurityContext); diff != "" {
			t.Errorf("%s: pod securityContext (-shown +runner pod %s):\n%s", b.where(), pod.Name, diff)
		}
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			if diff := cmp.Diff(shown.Spec.Containers[0].SecurityContext, c.SecurityContext); diff != "" {
				t.Errorf("%s: container %s securityContext (-shown +runner pod %s):\n%s", b.where(), c.Name, pod.Name, diff)
			}
		}
	})
	st.runs = []string{ref}
	return st
}
