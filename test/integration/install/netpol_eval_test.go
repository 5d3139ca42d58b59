package install

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// There is no network plugin here, so the rendered NetworkPolicies are judged by
// cyclonus's matcher (github.com/mattfenwick/cyclonus/pkg/matcher), the engine of a
// NetworkPolicy conformance tool that has been checked against real network plugins.
// The newer policy-assistant of sigs.k8s.io/network-policy-api (cyclonus's successor,
// which adds AdminNetworkPolicy) is a module of its own, cmd/policy-assistant, that
// the Go module proxy does not serve; NetworkPolicy's semantics are the same in both.
// This file only translates Gantry's test endpoints into the matcher's traffic.

// endpoint is one end of a connection: a pod (namespace, labels, its namespace's labels,
// named container ports) or an address outside the cluster.
type endpoint struct {
	name      string
	pod       bool
	namespace string
	labels    map[string]string
	nsLabels  map[string]string
	ports     map[string]int32
	ip        netip.Addr
}

func podEndpoint(name, ns string, lbls map[string]string, ip string) endpoint {
	return endpoint{name: name, pod: true, namespace: ns, labels: lbls,
		nsLabels: map[string]string{"kubernetes.io/metadata.name": ns}, ip: netip.MustParseAddr(ip)}
}

func addressEndpoint(name, ip string) endpoint {
	return endpoint{name: name, ip: netip.MustParseAddr(ip)}
}

func (e endpoint) peer() *matcher.TrafficPeer {
	p := &matcher.TrafficPeer{IP: e.ip.String()}
	if e.pod {
		p.Internal = &matcher.InternalPeer{PodLabels: e.labels, NamespaceLabels: e.nsLabels, Namespace: e.namespace}
	}
	return p
}

// allowed says whether from may open a connection to to's port over protocol: the
// source's egress and the destination's ingress both allow it.
func allowed(t *testing.T, policies []networkingv1.NetworkPolicy, from, to endpoint, port int32, protocol corev1.Protocol) bool {
	t.Helper()
	ptrs := make([]*networkingv1.NetworkPolicy, len(policies))
	for i := range policies {
		p := policies[i].DeepCopy()
		if len(p.Spec.PolicyTypes) == 0 {
			// As the API server stores a policy that names no policyTypes (the matcher
			// wants them named): Ingress, and Egress when it has egress rules.
			p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
			if len(p.Spec.Egress) > 0 {
				p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			}
		}
		ptrs[i] = p
	}
	portName := ""
	for name, p := range to.ports {
		if p == port {
			portName = name
		}
	}
	res := matcher.BuildNetworkPolicies(false, ptrs).IsTrafficAllowed(&matcher.Traffic{
		Source: from.peer(), Destination: to.peer(), ResolvedPort: int(port), ResolvedPortName: portName, Protocol: protocol,
	})
	return res.IsAllowed()
}

// selects says whether a label selector matches labels.
func selects(t *testing.T, sel *metav1.LabelSelector, lbls map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("invalid label selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(lbls))
}

type connection struct {
	from, to endpoint
	port     int32
	protocol corev1.Protocol
	want     bool
}

func (c connection) String() string {
	verdict := "refused"
	if c.want {
		verdict = "allowed"
	}
	proto := c.protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return fmt.Sprintf("%s -> %s port %d/%s should be %s", c.from.name, c.to.name, c.port, proto, verdict)
}

func checkConnections(t *testing.T, policies []networkingv1.NetworkPolicy, conns []connection) {
	t.Helper()
	for _, c := range conns {
		proto := c.protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if got := allowed(t, policies, c.from, c.to, c.port, proto); got != c.want {
			t.Errorf("%s, but is not", c)
		}
	}
}

// The adapter's own checks, on hand-written policies: isolation only when selected,
// default deny, ipBlock except, namespace and pod selectors, named ports and ranges —
// so a wrong translation of an endpoint (a named port, a namespace's labels) shows here
// rather than as a policy that seems to hold.
func TestNetworkPolicyMatcher(t *testing.T) {
	web := podEndpoint("web", "app", map[string]string{"app": "web"}, "10.0.0.2")
	web.ports = map[string]int32{"http": 8080}
	db := podEndpoint("db", "app", map[string]string{"app": "db"}, "10.0.0.3")
	other := podEndpoint("other", "tools", map[string]string{"app": "web"}, "10.0.1.2")
	outside := addressEndpoint("outside", "203.0.113.7")
	blocked := addressEndpoint("blocked", "203.0.113.200")
	udp := corev1.ProtocolUDP
	endPort := int32(9100)
	policies := []networkingv1.NetworkPolicy{
		{ // web: ingress from db's namespace-local pods on the named port, and from tools on 9000-9100.
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{
					{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
						Ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromString("http"))}}},
					{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "tools"}}}},
						Ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromInt32(9000)), EndPort: &endPort}}},
				},
			},
		},
		{ // db: egress only to 203.0.113.0/24 but .200, UDP 53.
			ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24", Except: []string{"203.0.113.200/32"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: new(intstr.FromInt32(53))}},
				}},
			},
		},
	}
	checkConnections(t, policies, []connection{
		{from: outside, to: db, port: 5432, want: true}, // db's ingress is not isolated
		{from: db, to: outside, port: 53, protocol: udp, want: true},
		{from: db, to: outside, port: 53, want: false},                // TCP: no port matches
		{from: db, to: blocked, port: 53, protocol: udp, want: false}, // except
		{from: db, to: web, port: 8080, want: false},                  // db's egress allows no pod
		{from: web, to: db, port: 5432, want: true},                   // web's egress is not isolated
		{from: other, to: web, port: 9050, want: true},                // namespace selector, port range
		{from: other, to: web, port: 9101, want: false},
		{from: other, to: web, port: 8080, want: false},    // podSelector alone: web's namespace only
		{from: outside, to: web, port: 8080, want: false},  // default deny once selected
		{from: outside, to: other, port: 8080, want: true}, // not selected: not isolated
	})
	// db reaching web on its named port needs db's egress too: allowed once db's
	// policy is gone.
	checkConnections(t, policies[:1], []connection{{from: db, to: web, port: 8080, want: true}, {from: db, to: web, port: 8081, want: false}})
}
