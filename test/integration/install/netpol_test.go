package install

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// world is the cluster the rendered policies are judged in: a runner pod of each
// namespace that has a runner policy, the controller and another replica of it, an
// ingress controller, Prometheus, cluster DNS, and addresses outside the cluster.
type world struct {
	runners                              []endpoint
	controller, replica                  endpoint
	webhookPort, metricsPort, probesPort int32
	ingress, prometheus, dns             endpoint
	metadata4, metadata6                 endpoint
	nodeLocalDNS, github                 endpoint
	githubHooks, elsewhere               endpoint
	apiServer                            endpoint
}

// runnerLabels are the labels Gantry puts on every runner pod (internal/controller/runner).
func runnerLabels(name string) map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelPool: "linux", v1alpha1.LabelRunner: name,
		"app": "my-template-label",
	}
}

// newWorld builds the world around the rendered Deployment: the controller's labels and
// container ports are the rendered ones.
func newWorld(t *testing.T, d *appsv1.Deployment, runnerNamespaces []string) world {
	t.Helper()
	w := world{
		ingress:      podEndpoint("ingress controller", "ingress-nginx", map[string]string{"app.kubernetes.io/name": "ingress-nginx"}, "10.0.3.2"),
		prometheus:   podEndpoint("prometheus", "monitoring", map[string]string{"app.kubernetes.io/name": "prometheus"}, "10.0.4.2"),
		dns:          podEndpoint("cluster DNS", "kube-system", map[string]string{"k8s-app": "kube-dns"}, "10.0.5.2"),
		metadata4:    addressEndpoint("cloud metadata 169.254.169.254", "169.254.169.254"),
		metadata6:    addressEndpoint("cloud metadata fd00:ec2::254", "fd00:ec2::254"),
		nodeLocalDNS: addressEndpoint("node-local DNS cache 169.254.20.10", "169.254.20.10"),
		github:       addressEndpoint("github.com 140.82.112.3", "140.82.112.3"),
		githubHooks:  addressEndpoint("GitHub's hook sender 192.30.252.40", "192.30.252.40"),
		elsewhere:    addressEndpoint("an address on the internet 203.0.113.9", "203.0.113.9"),
		apiServer:    addressEndpoint("kube-apiserver 172.16.0.10", "172.16.0.10"),
	}
	for i, ns := range runnerNamespaces {
		w.runners = append(w.runners, podEndpoint("runner pod in "+ns, ns, runnerLabels("linux-"+ns), "10.0.1."+string(rune('2'+i))))
	}
	tmpl := d.Spec.Template
	w.controller = podEndpoint("controller", d.Namespace, tmpl.Labels, "10.0.2.2")
	w.replica = podEndpoint("another controller replica", d.Namespace, tmpl.Labels, "10.0.2.3")
	ports := map[string]int32{}
	for _, p := range tmpl.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	w.controller.ports, w.replica.ports = ports, ports
	w.webhookPort, w.metricsPort, w.probesPort = ports["webhook"], ports["metrics"], ports["probes"]
	if w.webhookPort == 0 || w.metricsPort == 0 || w.probesPort == 0 {
		t.Fatalf("the rendered controller lacks a webhook, metrics or probes port: %v", ports)
	}
	return w
}

// checkDefaults: what docs/security.md promises of the default policies.
func (w world) checkDefaults(t *testing.T, policies []networkingv1.NetworkPolicy) {
	t.Helper()
	udp := corev1.ProtocolUDP
	var conns []connection
	for _, r := range w.runners {
		conns = append(conns,
			connection{from: r, to: w.metadata4, port: 80, want: false},
			connection{from: r, to: w.metadata6, port: 80, want: false},
			connection{from: r, to: w.controller, port: w.webhookPort, want: false},
			connection{from: r, to: w.controller, port: w.metricsPort, want: false},
			connection{from: r, to: w.controller, port: w.probesPort, want: false},
			connection{from: r, to: w.github, port: 443, want: true},
			connection{from: r, to: w.elsewhere, port: 443, want: true},
			connection{from: r, to: w.dns, port: 53, protocol: udp, want: true},
			connection{from: r, to: w.dns, port: 53, want: true},
			connection{from: r, to: w.nodeLocalDNS, port: 53, protocol: udp, want: true},
			connection{from: r, to: w.apiServer, port: 443, want: true},
			connection{from: w.ingress, to: r, port: 8080, want: false},
			connection{from: w.controller, to: r, port: 8080, want: false},
			connection{from: w.elsewhere, to: r, port: 22, want: false},
		)
		for _, other := range w.runners {
			conns = append(conns, connection{from: r, to: other, port: 8080, want: false})
		}
	}
	conns = append(conns,
		connection{from: w.ingress, to: w.controller, port: w.webhookPort, want: true},
		connection{from: w.ingress, to: w.controller, port: w.metricsPort, want: false},
		connection{from: w.replica, to: w.controller, port: w.webhookPort, want: true},
		connection{from: w.prometheus, to: w.controller, port: w.metricsPort, want: true},
		connection{from: w.prometheus, to: w.controller, port: w.probesPort, want: false},
		connection{from: w.githubHooks, to: w.controller, port: w.webhookPort, want: false},
		connection{from: w.controller, to: w.apiServer, port: 443, want: true},
		connection{from: w.controller, to: w.github, port: 443, want: true},
	)
	checkConnections(t, policies, conns)
}

func networkPolicies(t *testing.T, objs []*unstructured.Unstructured) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, o := range ofKind(objs, "NetworkPolicy") {
		out = append(out, *typed[networkingv1.NetworkPolicy](t, o))
	}
	return out
}

// policyNamespaces lists the namespaces holding a policy that selects runner pods.
func policyNamespaces(t *testing.T, policies []networkingv1.NetworkPolicy) []string {
	t.Helper()
	var out []string
	for _, p := range policies {
		if selects(t, &p.Spec.PodSelector, runnerLabels("x")) {
			out = append(out, p.Namespace)
		}
	}
	return out
}

// The chart renders the NetworkPolicies by default, and they do what docs/security.md
// says: runner pods reach DNS, GitHub and the internet, but not the cloud metadata
// endpoints, the controller or each other; the controller takes webhook deliveries from
// the cluster's pods but runners and the other replicas, and metrics scrapes from the
// monitoring namespace only.
func TestChartNetworkPolicies(t *testing.T) {
	const ns = "gantry-system"
	t.Run("defaults", func(t *testing.T) {
		objs := mustHelmTemplate(t, "gantry", ns, map[string]any{})
		policies := networkPolicies(t, objs)
		if got := policyNamespaces(t, policies); len(got) != 1 || got[0] != ns {
			t.Fatalf("runner policies rendered in %q, want in %s (the release namespace, where the credentials Secret goes)", got, ns)
		}
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry"))
		newWorld(t, d, []string{ns}).checkDefaults(t, policies)
	})
	t.Run("watched namespaces", func(t *testing.T) {
		watched := []string{"ci", "builds"}
		objs := mustHelmTemplate(t, "gantry", ns, map[string]any{"watchNamespaces": watched})
		policies := networkPolicies(t, objs)
		if got := policyNamespaces(t, policies); len(got) != 2 || got[0] != "ci" || got[1] != "builds" {
			t.Fatalf("runner policies rendered in %q, want in %q", got, watched)
		}
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry"))
		w := newWorld(t, d, watched)
		w.checkDefaults(t, policies)
		// A pod that is not Gantry's, in a namespace with a runner policy, is not fenced.
		other := podEndpoint("a team's own pod in ci", "ci", map[string]string{"app": "api"}, "10.0.6.2")
		checkConnections(t, policies, []connection{
			{from: other, to: w.metadata4, port: 80, want: true},
			{from: w.ingress, to: other, port: 8080, want: true},
		})
	})
	t.Run("webhook from GitHub's addresses", func(t *testing.T) {
		objs := mustHelmTemplate(t, "gantry", ns, map[string]any{"networkPolicy": map[string]any{"controller": map[string]any{
			"webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "192.30.252.0/22"}}},
		}}})
		policies := networkPolicies(t, objs)
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry"))
		w := newWorld(t, d, []string{ns})
		checkConnections(t, policies, []connection{
			{from: w.githubHooks, to: w.controller, port: w.webhookPort, want: true},
			{from: w.elsewhere, to: w.controller, port: w.webhookPort, want: false},
			{from: w.ingress, to: w.controller, port: w.webhookPort, want: false},
			{from: w.replica, to: w.controller, port: w.webhookPort, want: true},
			{from: w.runners[0], to: w.controller, port: w.webhookPort, want: false},
			{from: w.githubHooks, to: w.controller, port: w.metricsPort, want: false},
		})
	})
	t.Run("egress narrowed as docs/security.md shows", func(t *testing.T) {
		objs := mustHelmTemplate(t, "gantry", ns, docValues(t, "narrow-egress"))
		policies := networkPolicies(t, objs)
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry"))
		w := newWorld(t, d, []string{ns})
		r := w.runners[0]
		udp := corev1.ProtocolUDP
		checkConnections(t, policies, []connection{
			{from: r, to: w.github, port: 443, want: true},
			{from: r, to: w.dns, port: 53, protocol: udp, want: true},
			{from: r, to: w.dns, port: 53, want: true},
			{from: r, to: w.elsewhere, port: 443, want: false},
			{from: r, to: w.metadata4, port: 80, want: false},
			{from: r, to: w.metadata6, port: 80, want: false},
			{from: r, to: w.controller, port: w.webhookPort, want: false},
			{from: r, to: w.github, port: 22, want: false},
		})
	})
	t.Run("disabled", func(t *testing.T) {
		objs := mustHelmTemplate(t, "gantry", ns, map[string]any{"networkPolicy": map[string]any{"enabled": false}})
		if n := len(ofKind(objs, "NetworkPolicy")); n != 0 {
			t.Errorf("networkPolicy.enabled=false rendered %d NetworkPolicies", n)
		}
	})
}

// The kustomize bases carry the same policies: config/default (the runner policy in
// gantry-system, and runners.yaml applied to a pool's namespace as the component says),
// and config/namespaced (everything in ci).
func TestKustomizeNetworkPolicies(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		objs := kustomizeBuild(t, "config/default")
		policies := networkPolicies(t, objs)
		// `kubectl apply -n ci -f config/components/network-policies/runners.yaml`.
		b, err := os.ReadFile(filepath.Join(root, "config", "components", "network-policies", "runners.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var extra networkingv1.NetworkPolicy
		if err := yaml.UnmarshalStrict(b, &extra); err != nil {
			t.Fatal(err)
		}
		if extra.Namespace != "" {
			t.Fatalf("runners.yaml names namespace %q: it must take the one `kubectl apply -n` gives", extra.Namespace)
		}
		extra.Namespace = "ci"
		policies = append(policies, extra)
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "gantry-system", "gantry-controller"))
		newWorld(t, d, []string{"gantry-system", "ci"}).checkDefaults(t, policies)
	})
	t.Run("namespaced", func(t *testing.T) {
		objs := kustomizeBuild(t, "config/namespaced")
		policies := networkPolicies(t, objs)
		if got := policyNamespaces(t, policies); len(got) != 1 || got[0] != "ci" {
			t.Fatalf("runner policies built in %q, want in ci", got)
		}
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", "ci", "gantry-controller"))
		newWorld(t, d, []string{"ci"}).checkDefaults(t, policies)
	})
}

var docValuesBlock = regexp.MustCompile("(?s)<!-- values: ([a-z-]+) -->\\s*```yaml\\n(.*?)```")

// docValues returns the chart values of docs/security.md's block marked
// `<!-- values: NAME -->`.
func docValues(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range docValuesBlock.FindAllSubmatch(b, -1) {
		if string(m[1]) != name {
			continue
		}
		var v map[string]any
		if err := yaml.Unmarshal(m[2], &v); err != nil {
			t.Fatalf("docs/security.md's %s values: %v", name, err)
		}
		return v
	}
	t.Fatalf("docs/security.md has no values block marked <!-- values: %s -->", name)
	return nil
}
