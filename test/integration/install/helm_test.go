package install

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/internal/github"
	"github.com/gantry-dev/gantry/internal/manager"
)

// TestHelmLint lints the chart with its defaults and with the other value sets the
// tests render, and wants a value the schema refuses to fail the lint.
func TestHelmLint(t *testing.T) {
	for _, set := range [][]string{
		nil,
		{"--set", "watchNamespaces={team-a,team-b}", "--set", "replicas=2"},
		{"--set", "webhook.ingress.enabled=true", "--set", "webhook.ingress.host=gantry.example.com", "--set", "metrics.serviceMonitor.enabled=true"},
		{"--set", "github.existingSecret=my-github", "--set", "webhook.secret.existingSecret=my-webhook"},
	} {
		args := append([]string{"lint", "--strict", "charts/gantry"}, set...)
		out, stderr, err := run(t, helmBin, args...)
		if err != nil || !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
	}
	out, _, err := run(t, helmBin, "lint", "--strict", "charts/gantry", "--set", "logLevel=loud")
	if err == nil || !strings.Contains(string(out), "logLevel") {
		t.Errorf("helm lint with logLevel=loud: err %v, output %s; want a failure that names logLevel", err, out)
	}
}

func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "charts", "gantry", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml has no appVersion: %v", err)
	}
	return c.AppVersion
}

// rendered is one chart rendering and what the checks need to know about it.
type rendered struct {
	objs     []*unstructured.Unstructured
	release  string // release name; objects are named release-gantry…
	ns       string // release namespace
	watched  []string
	fullname string
}

func (r rendered) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return typed[appsv1.Deployment](t, find(t, r.objs, "Deployment", r.ns, r.fullname))
}

func (r rendered) args(t *testing.T) []string {
	t.Helper()
	d := r.deployment(t)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

func (r rendered) secretData(t *testing.T, ns, name string) map[string][]byte {
	t.Helper()
	return typed[corev1.Secret](t, find(t, r.objs, "Secret", ns, name)).Data
}

func hasArg(args []string, want string) bool { return slices.Contains(args, want) }

func argWithPrefix(args []string, prefix string) (string, bool) {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return a, true
		}
	}
	return "", false
}

func testPrivateKey(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

// TestHelmTemplate renders the chart with several value sets, checks what each renders,
// and applies the result (CRDs included) to the API server with server-side dry-run.
func TestHelmTemplate(t *testing.T) {
	installServiceMonitorCRD(t)
	appVersion := chartAppVersion(t)
	const testToken = "ghp_notarealtokenforthechartteststoo000"

	tests := []struct {
		name    string
		watched int // namespaces to create and watch
		values  func(watched []string) map[string]any
		check   func(t *testing.T, r rendered)
	}{{
		name:   "defaults",
		values: func([]string) map[string]any { return map[string]any{} },
		check: func(t *testing.T, r rendered) {
			d := r.deployment(t)
			c := d.Spec.Template.Spec.Containers[0]
			if want := "ghcr.io/gantry-dev/gantry:" + appVersion; c.Image != want {
				t.Errorf("image = %q, want %q (the chart's appVersion)", c.Image, want)
			}
			if *d.Spec.Replicas != 1 {
				t.Errorf("replicas = %d, want 1", *d.Spec.Replicas)
			}
			args := c.Args
			for _, want := range []string{"controller", "--leader-elect=true", "--leader-election-namespace=" + r.ns,
				"--webhook-secret=" + r.ns + "/" + r.fullname + "-webhook", "--metrics-bind-address=:8080",
				"--health-probe-bind-address=:8081", "--webhook-bind-address=:9090", "--log-level=info", "--log-format=json"} {
				if !hasArg(args, want) {
					t.Errorf("args %q lack %q", args, want)
				}
			}
			if a, ok := argWithPrefix(args, "--namespaces"); ok {
				t.Errorf("every namespace is watched by default, yet the args have %q", a)
			}
			checkControllerPod(t, d)
			if len(withoutHookRole(ofKind(r.objs, "ClusterRole"))) != 1 || len(ofKind(r.objs, "ClusterRoleBinding")) != 1 {
				t.Errorf("watching every namespace wants one ClusterRole and its binding; rendered:\n%s", inventory(r.objs))
			}
			hook := r.secretData(t, r.ns, r.fullname+"-webhook")[manager.WebhookSecretKey]
			if !regexp.MustCompile(`^[A-Za-z0-9]{40}$`).Match(hook) {
				t.Errorf("the generated webhook secret is not 40 random letters and digits (%d bytes)", len(hook))
			}
			for _, kind := range []string{"Ingress", "ServiceMonitor", "PodDisruptionBudget"} {
				if n := len(ofKind(r.objs, kind)); n != 0 {
					t.Errorf("%d %s rendered by default, want none", n, kind)
				}
			}
			for _, s := range ofKind(r.objs, "Secret") {
				// The webhook secret, and the eviction webhook's serving certificate.
				if s.GetName() != r.fullname+"-webhook" && s.GetName() != r.fullname+"-eviction-webhook-tls" {
					t.Errorf("%s rendered without GitHub credentials in the values", describe(s))
				}
			}
			if n := len(ofKind(r.objs, "CustomResourceDefinition")); n != 2 {
				t.Errorf("--include-crds rendered %d CRDs, want RunnerPool's and Runner's", n)
			}
			checkServices(t, r.objs, d, map[string]string{r.fullname + "-webhook": "webhook", r.fullname + "-metrics": "metrics"})
		},
	}, {
		name:    "namespaced watch with a GitHub App",
		watched: 2,
		values: func(w []string) map[string]any {
			return map[string]any{
				"watchNamespaces": w,
				"github":          map[string]any{"app": map[string]any{"appID": 12345, "installationID": "678", "privateKey": testPrivateKey(t)}},
				"webhook":         map[string]any{"secret": map[string]any{"value": "a-test-webhook-secret"}},
			}
		},
		check: func(t *testing.T, r rendered) {
			args := r.args(t)
			if want := "--namespaces=" + strings.Join(r.watched, ","); !hasArg(args, want) {
				t.Errorf("args %q lack %q", args, want)
			}
			if n := len(withoutHookRole(ofKind(r.objs, "ClusterRole"))) + len(ofKind(r.objs, "ClusterRoleBinding")); n != 0 {
				t.Errorf("a namespaced install rendered %d cluster-wide RBAC objects, want none:\n%s", n, inventory(r.objs))
			}
			for _, ns := range r.watched {
				find(t, r.objs, "Role", ns, r.fullname+"-manager")
				rb := typed[rbacv1.RoleBinding](t, find(t, r.objs, "RoleBinding", ns, r.fullname+"-manager"))
				want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.fullname, Namespace: r.ns}}
				if diff := cmp.Diff(want, rb.Subjects); diff != "" {
					t.Errorf("RoleBinding in %s subjects (-want +got):\n%s", ns, diff)
				}
				// The credentials Secret lands where the RunnerPools are, and the
				// controller's own parser reads it as GitHub App credentials.
				creds, err := github.ParseCredentials(r.secretData(t, ns, "github-app"))
				if err != nil {
					t.Errorf("the chart's credentials Secret in %s does not parse: %v", ns, err)
				} else if !creds.IsApp() || creds.App.AppID != 12345 || creds.App.InstallationID != 678 {
					t.Errorf("the chart's credentials Secret in %s holds %s, want GitHub App 12345 installation 678", ns, creds)
				}
			}
			if got := string(r.secretData(t, r.ns, r.fullname+"-webhook")[manager.WebhookSecretKey]); got != "a-test-webhook-secret" {
				t.Errorf("the webhook Secret does not hold webhook.secret.value (%d bytes)", len(got))
			}
		},
	}, {
		name: "token credentials in a listed namespace",
		values: func([]string) map[string]any {
			return map[string]any{"github": map[string]any{"token": testToken, "secretName": "github-token", "secretNamespaces": []any{"ci-tokens"}}}
		},
		check: func(t *testing.T, r rendered) {
			ensureNamespace(t, "ci-tokens")
			creds, err := github.ParseCredentials(r.secretData(t, "ci-tokens", "github-token"))
			if err != nil || creds.IsApp() || creds.Token != testToken {
				t.Errorf("the token Secret parses as %s (%v), want the personal access token", creds, err)
			}
		},
	}, {
		name:    "existing secrets",
		watched: 1,
		values: func(w []string) map[string]any {
			return map[string]any{
				"watchNamespaces": w,
				"github":          map[string]any{"existingSecret": "my-github"},
				"webhook":         map[string]any{"secret": map[string]any{"existingSecret": "my-webhook"}},
			}
		},
		check: func(t *testing.T, r rendered) {
			// Only the eviction webhook's serving certificate, which the chart generates.
			if n := len(ofKind(r.objs, "Secret")); n != 1 || find(t, r.objs, "Secret", r.ns, r.fullname+"-eviction-webhook-tls") == nil {
				t.Errorf("%d Secrets rendered with existing Secrets named, want only the eviction webhook's certificate:\n%s", n, inventory(r.objs))
			}
			if want := "--webhook-secret=" + r.ns + "/my-webhook"; !hasArg(r.args(t), want) {
				t.Errorf("args %q lack %q", r.args(t), want)
			}
			role := typed[rbacv1.Role](t, find(t, r.objs, "Role", r.ns, r.fullname+"-leader-election"))
			var names []string
			for _, rule := range role.Rules {
				if slices.Contains(rule.Resources, "secrets") {
					names = append(names, rule.ResourceNames...)
					if len(rule.ResourceNames) == 0 {
						t.Errorf("the release namespace's Role reads every Secret: %+v", rule)
					}
				}
			}
			if diff := cmp.Diff([]string{"my-webhook"}, names); diff != "" {
				t.Errorf("Secrets readable in the release namespace (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "ingress and ServiceMonitor",
		values: func([]string) map[string]any {
			return map[string]any{
				"webhook": map[string]any{"ingress": map[string]any{
					"enabled": true, "className": "nginx", "host": "gantry.example.com",
					"tls": []any{map[string]any{"secretName": "gantry-tls", "hosts": []any{"gantry.example.com"}}},
				}},
				"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}},
			}
		},
		check: func(t *testing.T, r rendered) {
			ing := typed[networkingv1.Ingress](t, find(t, r.objs, "Ingress", r.ns, r.fullname+"-webhook"))
			if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" {
				t.Errorf("ingressClassName = %v, want nginx", ing.Spec.IngressClassName)
			}
			if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "gantry.example.com" || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
				t.Fatalf("Ingress rules %+v, want one rule for gantry.example.com with one path", ing.Spec.Rules)
			}
			p := ing.Spec.Rules[0].HTTP.Paths[0]
			svc := typed[corev1.Service](t, find(t, r.objs, "Service", r.ns, p.Backend.Service.Name))
			if p.Path != "/webhook" || svc.Name != r.fullname+"-webhook" || p.Backend.Service.Port.Name != svc.Spec.Ports[0].Name {
				t.Errorf("the Ingress sends %s to %s port %q, want /webhook to the webhook Service's port %q",
					p.Path, svc.Name, p.Backend.Service.Port.Name, svc.Spec.Ports[0].Name)
			}
			if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != "gantry-tls" {
				t.Errorf("Ingress TLS %+v, want gantry-tls", ing.Spec.TLS)
			}

			sm := find(t, r.objs, "ServiceMonitor", r.ns, r.fullname)
			if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetLabels()["release"] != "prometheus" {
				t.Errorf("ServiceMonitor %s labels %v, want monitoring.coreos.com/v1 with release=prometheus", sm.GetAPIVersion(), sm.GetLabels())
			}
			sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			metrics := typed[corev1.Service](t, find(t, r.objs, "Service", r.ns, r.fullname+"-metrics"))
			webhook := typed[corev1.Service](t, find(t, r.objs, "Service", r.ns, r.fullname+"-webhook"))
			if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(metrics.Labels)) || labels.SelectorFromSet(sel).Matches(labels.Set(webhook.Labels)) {
				t.Errorf("the ServiceMonitor selects %v: want the metrics Service %v and not the webhook Service %v", sel, metrics.Labels, webhook.Labels)
			}
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(endpoints) != 1 {
				t.Fatalf("ServiceMonitor endpoints %v, want one", endpoints)
			}
			ep, _ := endpoints[0].(map[string]any)
			if ep["port"] != metrics.Spec.Ports[0].Name || ep["path"] != "/metrics" {
				t.Errorf("ServiceMonitor endpoint %v, want port %q path /metrics", ep, metrics.Spec.Ports[0].Name)
			}
			matchNames, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
			if diff := cmp.Diff([]string{r.ns}, matchNames); diff != "" {
				t.Errorf("ServiceMonitor namespaceSelector (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "two replicas",
		values: func([]string) map[string]any {
			return map[string]any{"replicas": 2, "leaderElection": map[string]any{"enabled": false}}
		},
		check: func(t *testing.T, r rendered) {
			d := r.deployment(t)
			if *d.Spec.Replicas != 2 {
				t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
			}
			if !hasArg(r.args(t), "--leader-elect=true") {
				t.Errorf("two replicas without leader election would both act; args %q", r.args(t))
			}
			pdb := typed[policyv1.PodDisruptionBudget](t, find(t, r.objs, "PodDisruptionBudget", r.ns, r.fullname))
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget minAvailable = %v, want 1", pdb.Spec.MinAvailable)
			}
			if !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("the PodDisruptionBudget selects %v, not the controller's pods %v", pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
		},
	}, {
		name: "one replica without leader election, a pinned image, debug text logs",
		values: func([]string) map[string]any {
			return map[string]any{
				"leaderElection": map[string]any{"enabled": false},
				"image": map[string]any{"repository": "registry.example.com/gantry", "tag": "v9.9.9",
					"digest": "sha256:" + strings.Repeat("ab", 32), "pullPolicy": "Always"},
				"logLevel": "debug", "logFormat": "text", "extraArgs": []any{"--concurrency=32"},
				"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
				"tolerations":  []any{map[string]any{"key": "ci", "operator": "Exists", "effect": "NoSchedule"}},
			}
		},
		check: func(t *testing.T, r rendered) {
			d := r.deployment(t)
			c := d.Spec.Template.Spec.Containers[0]
			if want := "registry.example.com/gantry:v9.9.9@sha256:" + strings.Repeat("ab", 32); c.Image != want || c.ImagePullPolicy != corev1.PullAlways {
				t.Errorf("image %q pull %q, want %q Always", c.Image, c.ImagePullPolicy, want)
			}
			for _, want := range []string{"--leader-elect=false", "--log-level=debug", "--log-format=text", "--concurrency=32"} {
				if !hasArg(c.Args, want) {
					t.Errorf("args %q lack %q", c.Args, want)
				}
			}
			if d.Spec.Template.Spec.NodeSelector["kubernetes.io/os"] != "linux" || len(d.Spec.Template.Spec.Tolerations) != 1 {
				t.Errorf("nodeSelector %v tolerations %v, want the values'", d.Spec.Template.Spec.NodeSelector, d.Spec.Template.Spec.Tolerations)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			watched := namespaces(t, tt.watched)
			const release = "ci"
			objs := mustHelmTemplate(t, release, ns, tt.values(watched), "--include-crds")
			r := rendered{objs: objs, release: release, ns: ns, watched: watched, fullname: release + "-gantry"}
			tt.check(t, r)
			hook, _ := argWithPrefix(r.args(t), "--webhook-secret="+ns+"/")
			checkRBAC(t, objs, rbacScope{releaseNS: ns, sa: r.fullname, watched: watched, leasesOnlyAtHome: true,
				webhook: strings.TrimPrefix(hook, "--webhook-secret="+ns+"/")})
			dryRunApply(t, objs)
		})
	}
}

// TestHelmTemplateRefusesBadValues: values that cannot work fail the render with a
// message that says what to fix.
func TestHelmTemplateRefusesBadValues(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"token and app", map[string]any{"github": map[string]any{"token": "x", "app": map[string]any{"appID": 1}}}, "either app"},
		{"half an app", map[string]any{"github": map[string]any{"app": map[string]any{"appID": 1, "installationID": 2}}}, "needs all of appID, installationID and privateKey"},
		{"existing and new credentials", map[string]any{"github": map[string]any{"existingSecret": "mine", "token": "x"}}, "leave app and token empty"},
		{"credentials with every namespace watched and nowhere to put them", map[string]any{"github": map[string]any{"token": "x"}}, "list the namespaces of the RunnerPools"},
		{"ingress without a host", map[string]any{"webhook": map[string]any{"ingress": map[string]any{"enabled": true}}}, "webhook.ingress.host is required"},
		{"unknown log format", map[string]any{"logFormat": "xml"}, "logFormat"},
		{"misspelled top-level key", map[string]any{"watchNamespace": []any{"a"}}, "watchNamespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := helmTemplate(t, "ci", "gantry-system", tt.values)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("helm template: %v; want a failure saying %q", err, tt.want)
			}
		})
	}
}

// checkControllerPod: the controller runs as the image's nonroot user, read-only, with
// no privilege and no capability, with probes and ports where the flags put them (the
// eviction webhook's too, when it is on), and knows its pod IP (a standby forwards
// webhook deliveries to the leader's).
func checkControllerPod(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ps := d.Spec.Template.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v, want runAsNonRoot and seccomp RuntimeDefault", ps)
	}
	c := d.Spec.Template.Spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v, want a read-only root, no privilege escalation, ALL capabilities dropped", sc)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	want := map[string]int32{"webhook": 9090, "metrics": 8080, "probes": 8081}
	if slices.Contains(c.Args, "--eviction-webhook-bind-address=:9443") {
		want["evict-webhook"] = 9443
	}
	if diff := cmp.Diff(want, ports); diff != "" {
		t.Errorf("container ports (-want +got):\n%s", diff)
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "probes" {
			t.Errorf("probe %+v, want GET %s on port probes (8081)", probe, want)
		}
	}
	podIP := false
	for _, e := range c.Env {
		podIP = podIP || e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
	}
	if !podIP {
		t.Errorf("env %+v has no POD_IP from status.podIP", c.Env)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v, want CPU and memory requests and a memory limit", c.Resources)
	}
}

// checkServices: the webhook and metrics Services (names: Service → port) reach the
// controller's named ports.
func checkServices(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment, services map[string]string) {
	t.Helper()
	for name, port := range services {
		svc := typed[corev1.Service](t, find(t, objs, "Service", d.Namespace, name))
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != port {
			t.Errorf("Service %s ports %+v, want one targeting port %q", name, svc.Spec.Ports, port)
		}
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service %s selects %v, not the controller's pods %v", name, svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
}
