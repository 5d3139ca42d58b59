package install

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// There is no network plugin here, so the rendered NetworkPolicies are judged by this
// small evaluator of their semantics, as the Kubernetes documentation states them:
//
//   - A pod is isolated for a direction when a policy in its namespace selects it
//     (podSelector) and lists that direction in policyTypes (default: Ingress, plus
//     Egress when the policy has egress rules). An isolated pod's connection in that
//     direction is allowed only when a rule of one of those policies matches it; a pod
//     no policy isolates allows everything.
//   - A connection needs both ends: the source's egress and the destination's ingress.
//     An address outside the cluster has no policy of its own.
//   - A rule matches when one of its peers matches the other end (no peers: any end)
//     and one of its ports matches the destination port (no ports: any port).
//   - A peer is an ipBlock (the address is in cidr and in no except), or a
//     namespaceSelector and/or podSelector (a podSelector alone means the policy's own
//     namespace; both must match when both are set). Pods have addresses too, so an
//     ipBlock can match a pod.
//   - A port has a protocol (default TCP) and a number, a name of the destination
//     pod's container port, or no port (every port); endPort makes a range.

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

// allowed says whether from may open a connection to to's port over protocol.
func allowed(t *testing.T, policies []networkingv1.NetworkPolicy, from, to endpoint, port int32, protocol corev1.Protocol) bool {
	t.Helper()
	return directionAllows(t, policies, from, to, to, port, protocol, networkingv1.PolicyTypeEgress) &&
		directionAllows(t, policies, to, from, to, port, protocol, networkingv1.PolicyTypeIngress)
}

// directionAllows evaluates the policies of self for one direction; peer is the other
// end, dest the destination (for named ports).
func directionAllows(t *testing.T, policies []networkingv1.NetworkPolicy, self, peer, dest endpoint, port int32, protocol corev1.Protocol, dir networkingv1.PolicyType) bool {
	t.Helper()
	if !self.pod {
		return true
	}
	isolated := false
	for _, p := range policies {
		if p.Namespace != self.namespace || !selects(t, &p.Spec.PodSelector, self.labels) || !hasType(&p, dir) {
			continue
		}
		isolated = true
		if dir == networkingv1.PolicyTypeIngress {
			for _, r := range p.Spec.Ingress {
				if peersMatch(t, p.Namespace, r.From, peer) && portsMatch(r.Ports, dest, port, protocol) {
					return true
				}
			}
		} else {
			for _, r := range p.Spec.Egress {
				if peersMatch(t, p.Namespace, r.To, peer) && portsMatch(r.Ports, dest, port, protocol) {
					return true
				}
			}
		}
	}
	return !isolated
}

func hasType(p *networkingv1.NetworkPolicy, dir networkingv1.PolicyType) bool {
	types := p.Spec.PolicyTypes
	if len(types) == 0 {
		types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(p.Spec.Egress) > 0 {
			types = append(types, networkingv1.PolicyTypeEgress)
		}
	}
	for _, d := range types {
		if d == dir {
			return true
		}
	}
	return false
}

func selects(t *testing.T, sel *metav1.LabelSelector, lbls map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("invalid label selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(lbls))
}

func peersMatch(t *testing.T, policyNS string, peers []networkingv1.NetworkPolicyPeer, e endpoint) bool {
	t.Helper()
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if peerMatches(t, policyNS, p, e) {
			return true
		}
	}
	return false
}

func peerMatches(t *testing.T, policyNS string, p networkingv1.NetworkPolicyPeer, e endpoint) bool {
	t.Helper()
	if p.IPBlock != nil {
		cidr, err := netip.ParsePrefix(p.IPBlock.CIDR)
		if err != nil {
			t.Fatalf("ipBlock cidr %q: %v", p.IPBlock.CIDR, err)
		}
		if !cidr.Contains(e.ip) {
			return false
		}
		for _, x := range p.IPBlock.Except {
			ex, err := netip.ParsePrefix(x)
			if err != nil {
				t.Fatalf("ipBlock except %q: %v", x, err)
			}
			if ex.Contains(e.ip) {
				return false
			}
		}
		return true
	}
	if !e.pod {
		return false
	}
	switch {
	case p.NamespaceSelector == nil && p.PodSelector == nil:
		t.Fatalf("a peer with neither ipBlock, namespaceSelector nor podSelector: %+v", p)
		return false
	case p.NamespaceSelector == nil:
		return e.namespace == policyNS && selects(t, p.PodSelector, e.labels)
	case p.PodSelector == nil:
		return selects(t, p.NamespaceSelector, e.nsLabels)
	default:
		return selects(t, p.NamespaceSelector, e.nsLabels) && selects(t, p.PodSelector, e.labels)
	}
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, dest endpoint, port int32, protocol corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != protocol {
			continue
		}
		if p.Port == nil {
			return true
		}
		var n int32
		if p.Port.Type == intstr.String {
			named, ok := dest.ports[p.Port.StrVal]
			if !ok {
				continue
			}
			n = named
		} else {
			n = p.Port.IntVal
		}
		if port == n || (p.EndPort != nil && p.Port.Type == intstr.Int && port >= n && port <= *p.EndPort) {
			return true
		}
	}
	return false
}

// connection is one connection a test expects allowed or refused.
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

// The evaluator's own checks, on hand-written policies: isolation only when selected,
// default deny, ipBlock except, namespace and pod selectors, named ports and ranges.
func TestNetworkPolicyEvaluator(t *testing.T) {
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
