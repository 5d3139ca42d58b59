package install

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/netpol"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// world is the cluster the rendered policies are judged in: a runner pod of each
// namespace that has a runner policy, the controller and another replica of it, an
// ingress controller, Prometheus, cluster DNS, and addresses outside the cluster.
type world struct {
	runners                              []endpoint
	controller, replica                  endpoint
	webhookPort, metricsPort, probesPort int32
	evictionPort                         int32 // 0 without the eviction webhook
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
	w.evictionPort = ports["evict-webhook"]
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
	if w.evictionPort != 0 {
		// The API server calls the eviction webhook from an address the chart cannot
		// know; the port admits any source, and no other port opens with it.
		conns = append(conns,
			connection{from: w.apiServer, to: w.controller, port: w.evictionPort, want: true},
			connection{from: w.elsewhere, to: w.controller, port: w.evictionPort, want: true},
			connection{from: w.apiServer, to: w.controller, port: w.webhookPort, want: false},
			connection{from: w.apiServer, to: w.controller, port: w.metricsPort, want: false},
		)
	}
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

// runnerPolicy follows the rendered Deployment's --runner-network-policy flag to the
// file it names: the volume mounted there, its ConfigMap among the rendered objects,
// the key. It returns the policy as the controller parses it (netpol.Parse).
func runnerPolicy(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment) *networkingv1.NetworkPolicy {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	arg, ok := argWithPrefix(c.Args, "--runner-network-policy=")
	path := strings.TrimPrefix(arg, "--runner-network-policy=")
	if !ok {
		t.Fatalf("the controller has no --runner-network-policy: no runner pod would get a policy; args %q", c.Args)
	}
	var volume, key string
	for _, m := range c.VolumeMounts {
		if dir := strings.TrimSuffix(m.MountPath, "/") + "/"; strings.HasPrefix(path, dir) {
			volume, key = m.Name, strings.TrimPrefix(path, dir)
		}
	}
	var cmName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	if cmName == "" {
		t.Fatalf("--runner-network-policy=%s is on no ConfigMap volume", path)
	}
	cm := typed[corev1.ConfigMap](t, find(t, objs, "ConfigMap", d.Namespace, cmName))
	p, err := netpol.Parse([]byte(cm.Data[key]))
	if err != nil {
		t.Fatalf("ConfigMap %s key %s: %v", cmName, key, err)
	}
	return p
}

// withRunnerPolicies adds the runner policy as the controller applies it in each of the
// namespaces that hold pools.
func withRunnerPolicies(policies []networkingv1.NetworkPolicy, tmpl *networkingv1.NetworkPolicy, poolNamespaces ...string) []networkingv1.NetworkPolicy {
	out := append([]networkingv1.NetworkPolicy(nil), policies...)
	for _, ns := range poolNamespaces {
		pool := testutil.RunnerPool(ns, "linux").Obj()
		out = append(out, *netpol.ForNamespace(tmpl, ns, []v1alpha1.RunnerPool{*pool}))
	}
	return out
}

// A default install (chart and kustomize) fences runner pods in every namespace that
// holds pools, whichever it is: the install renders no runner policy of its own — it
// could not know the namespaces — but hands one to the controller, which puts it beside
// the pools (internal/controller/netpol; TestRBAC's controller shows it there). The
// policies do what docs/security.md says: runner pods reach DNS, GitHub and the
// internet, but not the cloud metadata endpoints, the controller or each other; the
// controller takes webhook deliveries from the cluster's pods but runners and the other
// replicas, and metrics scrapes from the monitoring namespace only.
func TestChartNetworkPolicies(t *testing.T) {
	const ns = "gantry-system"
	render := func(t *testing.T, values map[string]any) ([]networkingv1.NetworkPolicy, *networkingv1.NetworkPolicy, *appsv1.Deployment) {
		objs := mustHelmTemplate(t, "gantry", ns, values)
		policies := networkPolicies(t, objs)
		if got := policyNamespaces(t, policies); len(got) != 0 {
			t.Errorf("the chart rendered runner policies in %q: the controller puts them where pools are", got)
		}
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry"))
		return policies, runnerPolicy(t, objs, d), d
	}
	t.Run("defaults", func(t *testing.T) {
		policies, tmpl, d := render(t, map[string]any{})
		if tmpl.Name != "gantry-runners" {
			t.Errorf("runner policy named %q, want gantry-runners", tmpl.Name)
		}
		// The quickstart's pool lives in ci; another team's in builds.
		pools := []string{"ci", "builds"}
		policies = withRunnerPolicies(policies, tmpl, pools...)
		w := newWorld(t, d, pools)
		w.checkDefaults(t, policies)
		// A pod that is not Gantry's, in a namespace with a runner policy, is not fenced.
		other := podEndpoint("a team's own pod in ci", "ci", map[string]string{"app": "api"}, "10.0.6.2")
		checkConnections(t, policies, []connection{
			{from: other, to: w.metadata4, port: 80, want: true},
			{from: w.ingress, to: other, port: 8080, want: true},
		})
	})
	t.Run("webhook from GitHub's addresses", func(t *testing.T) {
		policies, tmpl, d := render(t, map[string]any{"networkPolicy": map[string]any{"controller": map[string]any{
			"webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "192.30.252.0/22"}}},
		}}})
		policies = withRunnerPolicies(policies, tmpl, "ci")
		w := newWorld(t, d, []string{"ci"})
		checkConnections(t, policies, []connection{
			{from: w.githubHooks, to: w.controller, port: w.webhookPort, want: true},
			{from: w.elsewhere, to: w.controller, port: w.webhookPort, want: false},
			{from: w.ingress, to: w.controller, port: w.webhookPort, want: false},
			{from: w.replica, to: w.controller, port: w.webhookPort, want: true},
			{from: w.runners[0], to: w.controller, port: w.webhookPort, want: false},
			{from: w.githubHooks, to: w.controller, port: w.metricsPort, want: false},
		})
	})
	t.Run("a LoadBalancer as docs/install.md shows", func(t *testing.T) {
		values := docValues(t, "loadbalancer")
		policies, tmpl, d := render(t, values)
		objs := mustHelmTemplate(t, "gantry", ns, values)
		svc := typed[corev1.Service](t, find(t, objs, "Service", ns, "gantry-webhook"))
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			t.Errorf("webhook Service type %q, externalTrafficPolicy %q; want LoadBalancer and Local", svc.Spec.Type, svc.Spec.ExternalTrafficPolicy)
		}
		policies = withRunnerPolicies(policies, tmpl, "ci")
		w := newWorld(t, d, []string{"ci"})
		checkConnections(t, policies, []connection{
			{from: w.githubHooks, to: w.controller, port: w.webhookPort, want: true},
			{from: w.githubHooks, to: w.controller, port: w.metricsPort, want: false},
			{from: w.elsewhere, to: w.controller, port: w.webhookPort, want: false},
			{from: w.runners[0], to: w.controller, port: w.webhookPort, want: false},
			{from: w.replica, to: w.controller, port: w.webhookPort, want: true},
		})
	})
	t.Run("egress narrowed as docs/security.md shows", func(t *testing.T) {
		policies, tmpl, d := render(t, docValues(t, "narrow-egress"))
		policies = withRunnerPolicies(policies, tmpl, "ci")
		w := newWorld(t, d, []string{"ci"})
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
		d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", ns, "gantry"))
		if arg, ok := argWithPrefix(d.Spec.Template.Spec.Containers[0].Args, "--runner-network-policy"); ok {
			t.Errorf("networkPolicy.enabled=false still passes %s", arg)
		}
	})
	t.Run("without the eviction webhook", func(t *testing.T) {
		policies, tmpl, d := render(t, map[string]any{"evictionWebhook": map[string]any{"enabled": false}})
		policies = withRunnerPolicies(policies, tmpl, "ci")
		w := newWorld(t, d, []string{"ci"})
		if w.evictionPort != 0 {
			t.Fatalf("evictionWebhook.enabled=false still renders the container port %d", w.evictionPort)
		}
		w.checkDefaults(t, policies)
		checkConnections(t, policies, []connection{{from: w.apiServer, to: w.controller, port: 9443, want: false}})
	})
}

// The kustomize bases carry the same policies: config/default (the controller's in
// gantry-system, the runner policy in a ConfigMap the controller reads) and
// config/namespaced (everything in ci).
func TestKustomizeNetworkPolicies(t *testing.T) {
	for _, tc := range []struct{ dir, ns string }{{"config/default", "gantry-system"}, {"config/namespaced", "ci"}} {
		t.Run(tc.dir, func(t *testing.T) {
			objs := kustomizeBuild(t, tc.dir)
			policies := networkPolicies(t, objs)
			if got := policyNamespaces(t, policies); len(got) != 0 {
				t.Errorf("runner policies built in %q: the controller puts them where pools are", got)
			}
			d := typed[appsv1.Deployment](t, find(t, objs, "Deployment", tc.ns, "gantry-controller"))
			pools := []string{"ci", "builds"}
			newWorld(t, d, pools).checkDefaults(t, withRunnerPolicies(policies, runnerPolicy(t, objs, d), pools...))
		})
	}
}

var docValuesBlock = regexp.MustCompile("(?s)<!-- values: ([a-z-]+) -->\\s*```yaml\\n(.*?)\\s*```")

// docValues returns the chart values of the block marked `<!-- values: NAME -->` in
// docs/security.md or docs/install.md.
func docValues(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, doc := range []string{"docs/security.md", "docs/install.md"} {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docValuesBlock.FindAllSubmatch(b, -1) {
			if string(m[1]) != name {
				continue
			}
			var v map[string]any
			// The block may sit indented in a list item.
			if err := yaml.Unmarshal([]byte(dedent(string(m[2]))), &v); err != nil {
				t.Fatalf("%s's %s values: %v", doc, name, err)
			}
			return v
		}
	}
	t.Fatalf("no doc has a values block marked <!-- values: %s -->", name)
	return nil
}

// dedent removes the indentation of a block's first line from every line.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	ind := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
	for i, l := range lines {
		if len(l) >= ind && strings.TrimSpace(l[:ind]) == "" {
			lines[i] = l[ind:]
		}
	}
	return strings.Join(lines, "\n")
}
