package doctor

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestWebhookRuleAdmitsGitHub(t *testing.T) {
	udp := corev1.ProtocolUDP
	end := int32(9100)
	hooks := ipBlock("192.30.252.0/22")
	for _, tc := range []struct {
		name  string
		ports []networkingv1.NetworkPolicyPort
		peers []networkingv1.NetworkPolicyPeer
		want  bool
	}{
		{name: "no peers, no ports: everything", want: true},
		{name: "the cluster's pods only", peers: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}},
		{name: "GitHub's range on 9090", ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromInt32(9090))}}, peers: hooks, want: true},
		{name: "GitHub's range, by port name", ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromString("webhook"))}}, peers: hooks, want: true},
		{name: "GitHub's range on a port range", ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromInt32(9000)), EndPort: &end}}, peers: hooks, want: true},
		{name: "GitHub's range on the metrics port", ports: []networkingv1.NetworkPolicyPort{{Port: new(intstr.FromInt32(8080))}}, peers: hooks},
		{name: "GitHub's range over UDP", ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: new(intstr.FromInt32(9090))}}, peers: hooks},
		{name: "everywhere but GitHub", peers: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0",
			Except: []string{"192.30.252.0/22", "185.199.108.0/22", "140.82.112.0/20", "143.55.64.0/20"}}}}},
		{name: "everywhere", peers: ipBlock("0.0.0.0/0"), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := portsAdmit(tc.ports, 9090, "webhook") && peersAdmitAny(tc.peers, githubHookAddresses)
			if got != tc.want {
				t.Errorf("admits GitHub = %v, want %v", got, tc.want)
			}
		})
	}
}

func ipBlock(cidr string) []networkingv1.NetworkPolicyPeer {
	return []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}}
}
