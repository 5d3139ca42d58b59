package install

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// evictionWebhook is what an install renders for the eviction webhook. secret is nil
// where cert-manager makes it (the kustomize component); secretName names it anyway.
type evictionWebhook struct {
	vwc        *admissionregistrationv1.ValidatingWebhookConfiguration
	secret     *corev1.Secret
	secretName string
	service    *corev1.Service
	deploy     *appsv1.Deployment
}

func renderedEvictionWebhook(t *testing.T, r rendered) evictionWebhook {
	t.Helper()
	return evictionWebhook{
		vwc:        typed[admissionregistrationv1.ValidatingWebhookConfiguration](t, find(t, r.objs, "ValidatingWebhookConfiguration", "", r.fullname+"-eviction")),
		secret:     typed[corev1.Secret](t, find(t, r.objs, "Secret", r.ns, r.fullname+"-eviction-webhook-tls")),
		secretName: r.fullname + "-eviction-webhook-tls",
		service:    typed[corev1.Service](t, find(t, r.objs, "Service", r.ns, r.fullname+"-eviction-webhook")),
		deploy:     r.deployment(t),
	}
}

// check: what checkWebhook checks, and the chart's own certificate: the caBundle trusts
// the CA that signed the Secret's serving certificate for the Service's DNS names, and
// a new certificate rolls the pods.
func (e evictionWebhook) check(t *testing.T) {
	t.Helper()
	e.checkWebhook(t)
	w := e.vwc.Webhooks[0]
	// The CA in caBundle verifies the Secret's serving certificate for the names the
	// API server dials, and the Secret's key is that certificate's.
	if e.secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret %s is of type %q, want %q", e.secret.Name, e.secret.Type, corev1.SecretTypeTLS)
	}
	pair, err := tls.X509KeyPair(e.secret.Data[corev1.TLSCertKey], e.secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatalf("Secret %s holds no certificate and matching key: %v", e.secret.Name, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(w.ClientConfig.CABundle) {
		t.Fatalf("caBundle of %s holds no PEM certificate", w.Name)
	}
	svc := e.service.Name + "." + e.service.Namespace + ".svc"
	for _, name := range []string{svc, svc + ".cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the caBundle does not verify the serving certificate for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: roots}); err == nil {
		t.Errorf("the serving certificate verifies for other.example.com: its names are too wide (%q)", leaf.DNSNames)
	}

	sum := sha256.Sum256([]byte(base64.StdEncoding.EncodeToString(e.secret.Data[corev1.TLSCertKey])))
	if got := e.deploy.Spec.Template.Annotations["checksum/eviction-webhook-cert"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("pod annotation checksum/eviction-webhook-cert = %q, want the checksum of the Secret's certificate", got)
	}
}

// checkWebhook: the API server sends exactly the creations of pods/eviction to
// /evict-runner on the Service's port 443 and goes on without the webhook when it
// cannot be reached (failurePolicy Ignore); the Service and the controller's flags,
// port and certificate mount meet at the same place.
func (e evictionWebhook) checkWebhook(t *testing.T) {
	t.Helper()
	if len(e.vwc.Webhooks) != 1 {
		t.Fatalf("ValidatingWebhookConfiguration %s has %d webhooks, want 1", e.vwc.Name, len(e.vwc.Webhooks))
	}
	w := e.vwc.Webhooks[0]
	scope := admissionregistrationv1.NamespacedScope
	wantRules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"}, Scope: &scope},
	}}
	if diff := cmp.Diff(wantRules, w.Rules); diff != "" {
		t.Errorf("webhook rules (-want +got):\n%s", diff)
	}
	ignore, noneOnDryRun, equivalent := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNoneOnDryRun, admissionregistrationv1.Equivalent
	got := struct {
		Name          string
		Failure       *admissionregistrationv1.FailurePolicyType
		SideEffects   *admissionregistrationv1.SideEffectClass
		Match         *admissionregistrationv1.MatchPolicyType
		Timeout       *int32
		ReviewVersion []string
		URL           *string
		Service       *admissionregistrationv1.ServiceReference
	}{w.Name, w.FailurePolicy, w.SideEffects, w.MatchPolicy, w.TimeoutSeconds, w.AdmissionReviewVersions, w.ClientConfig.URL, w.ClientConfig.Service}
	want := got
	want.Name, want.Failure, want.SideEffects, want.Match, want.Timeout, want.ReviewVersion, want.URL = "evictions.gantry.dev", &ignore, &noneOnDryRun, &equivalent, ptrTo[int32](5), []string{"v1"}, nil
	want.Service = &admissionregistrationv1.ServiceReference{Namespace: e.service.Namespace, Name: e.service.Name, Path: ptrTo("/evict-runner"), Port: ptrTo[int32](443)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhook %s (-want +got):\n%s", w.Name, diff)
	}

	// The Service reaches the controller's eviction port, where the flag binds.
	if e.service.Spec.Type != corev1.ServiceTypeClusterIP || len(e.service.Spec.Ports) != 1 ||
		e.service.Spec.Ports[0].Port != 443 || e.service.Spec.Ports[0].TargetPort.String() != "evict-webhook" {
		t.Errorf("Service %s: type %q ports %+v; want ClusterIP, 443 to port evict-webhook", e.service.Name, e.service.Spec.Type, e.service.Spec.Ports)
	}
	pod := e.deploy.Spec.Template
	if !labels.SelectorFromSet(e.service.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(e.service.Spec.Selector) == 0 {
		t.Errorf("Service %s selects %v, not the controller's pods %v", e.service.Name, e.service.Spec.Selector, pod.Labels)
	}
	c := pod.Spec.Containers[0]
	if !hasArg(c.Args, "--eviction-webhook-bind-address=:9443") {
		t.Errorf("args %q lack --eviction-webhook-bind-address=:9443", c.Args)
	}
	dir, ok := argWithPrefix(c.Args, "--eviction-webhook-cert-dir=")
	dir = strings.TrimPrefix(dir, "--eviction-webhook-cert-dir=")
	var mounted bool
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			mounted = mounted || m.Name == v.Name && m.MountPath == dir && m.ReadOnly && v.Secret != nil && v.Secret.SecretName == e.secretName
		}
	}
	if !ok || !mounted {
		t.Errorf("--eviction-webhook-cert-dir %q is not where Secret %s is mounted read-only (mounts %+v)", dir, e.secretName, c.VolumeMounts)
	}
}

// TestHelmEvictionWebhook renders the eviction webhook with the namespaces it sees by
// default, with a list of watched namespaces and with a selector of the user's; and
// none of it when it is turned off. Each rendering is applied with server-side dry-run.
func TestHelmEvictionWebhook(t *testing.T) {
	const release = "ci"
	meta := func(name string) labels.Set { return labels.Set{"kubernetes.io/metadata.name": name} }
	for _, tc := range []struct {
		name    string
		watched int
		values  func(watched []string) map[string]any
		// namespaces whose evictions the webhook must and must not see, by their labels.
		sees, ignores func(watched []string) []labels.Set
	}{{
		name:   "every namespace watched",
		values: func([]string) map[string]any { return map[string]any{} },
		sees:   func([]string) []labels.Set { return []labels.Set{meta("ci"), meta("kube-system"), {}} },
	}, {
		name:    "a list of watched namespaces",
		watched: 2,
		values:  func(w []string) map[string]any { return map[string]any{"watchNamespaces": w} },
		sees:    func(w []string) []labels.Set { return []labels.Set{meta(w[0]), meta(w[1])} },
		ignores: func([]string) []labels.Set { return []labels.Set{meta("kube-system"), meta("other"), {}} },
	}, {
		name:    "a selector of the user's",
		watched: 1,
		values: func(w []string) map[string]any {
			return map[string]any{"watchNamespaces": w, "evictionWebhook": map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"ci.example.com/runners": "true"}}}}
		},
		sees:    func([]string) []labels.Set { return []labels.Set{{"ci.example.com/runners": "true"}} },
		ignores: func(w []string) []labels.Set { return []labels.Set{meta(w[0])} },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			watched := namespaces(t, tc.watched)
			objs := mustHelmTemplate(t, release, ns, tc.values(watched))
			r := rendered{objs: objs, release: release, ns: ns, watched: watched, fullname: release + "-gantry"}
			e := renderedEvictionWebhook(t, r)
			e.check(t)
			sel, err := metav1.LabelSelectorAsSelector(e.vwc.Webhooks[0].NamespaceSelector)
			if err != nil {
				t.Fatalf("namespaceSelector %+v: %v", e.vwc.Webhooks[0].NamespaceSelector, err)
			}
			for _, l := range tc.sees(watched) {
				if !sel.Matches(l) {
					t.Errorf("namespaceSelector %q does not select a namespace labeled %v", sel, l)
				}
			}
			if tc.ignores != nil {
				for _, l := range tc.ignores(watched) {
					if sel.Matches(l) {
						t.Errorf("namespaceSelector %q selects a namespace labeled %v", sel, l)
					}
				}
			}
			// A second rendering (an install elsewhere) has a certificate of its own,
			// and its pods roll.
			again := renderedEvictionWebhook(t, rendered{objs: mustHelmTemplate(t, release, ns, tc.values(watched)), ns: ns, fullname: r.fullname})
			if string(again.secret.Data[corev1.TLSCertKey]) == string(e.secret.Data[corev1.TLSCertKey]) {
				t.Errorf("two fresh renderings generated the same serving certificate")
			}
			dryRunApply(t, objs)
		})
	}
	t.Run("off", func(t *testing.T) {
		ns := env.Namespace(t)
		objs := mustHelmTemplate(t, release, ns, map[string]any{"evictionWebhook": map[string]any{"enabled": false}})
		for _, o := range objs {
			if strings.Contains(o.GetName(), "eviction") || o.GetKind() == "ValidatingWebhookConfiguration" {
				t.Errorf("evictionWebhook.enabled=false rendered %s", describe(o))
			}
		}
		r := rendered{objs: objs, release: release, ns: ns, fullname: release + "-gantry"}
		d := r.deployment(t)
		if a, ok := argWithPrefix(r.args(t), "--eviction-webhook"); ok {
			t.Errorf("evictionWebhook.enabled=false still passes %s", a)
		}
		if _, ok := d.Spec.Template.Annotations["checksum/eviction-webhook-cert"]; ok {
			t.Errorf("evictionWebhook.enabled=false still annotates the pods with a certificate checksum: %v", d.Spec.Template.Annotations)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				t.Errorf("evictionWebhook.enabled=false still mounts Secret %s", v.Secret.SecretName)
			}
		}
		checkControllerPod(t, d)
		dryRunApply(t, objs)
	})
}

// TestHelmEvictionWebhookKeepsItsCertificate: an upgrade (a rendering that can look up
// the cluster, as `helm upgrade` does) reuses the certificate the install stored, so
// the caBundle, the Secret and the pods do not change with every upgrade.
func TestHelmEvictionWebhookKeepsItsCertificate(t *testing.T) {
	const release = "ci"
	ns := env.Namespace(t)
	first := renderedEvictionWebhook(t, rendered{objs: mustHelmTemplate(t, release, ns, map[string]any{}), ns: ns, fullname: release + "-gantry"})
	stored := first.secret.DeepCopy()
	stored.TypeMeta = metav1.TypeMeta{}
	stored.ResourceVersion = ""
	// As `helm install` leaves it: helm takes over only objects of its own release.
	stored.Annotations = map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns}
	if err := env.Client.Create(ctx(t), stored); err != nil {
		t.Fatal(err)
	}
	upgrade := mustHelmTemplate(t, release, ns, map[string]any{}, "--dry-run=server", "--kubeconfig", adminKubeconfig(t))
	again := renderedEvictionWebhook(t, rendered{objs: upgrade, ns: ns, fullname: release + "-gantry"})
	again.check(t)
	if diff := cmp.Diff(first.secret.Data, again.secret.Data); diff != "" {
		t.Errorf("the upgrade made a new certificate (-installed +upgraded):\n%s", diff)
	}
	if a, b := first.deploy.Spec.Template.Annotations, again.deploy.Spec.Template.Annotations; a["checksum/eviction-webhook-cert"] != b["checksum/eviction-webhook-cert"] {
		t.Errorf("the upgrade changed the pods' certificate checksum: %q → %q", a["checksum/eviction-webhook-cert"], b["checksum/eviction-webhook-cert"])
	}
}

// adminKubeconfig writes a kubeconfig of the test API server's admin, for helm.
func adminKubeconfig(t *testing.T) string {
	t.Helper()
	c := env.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
