package doctor

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CheckWebhookExposure is the check of a webhook Service GitHub reaches from outside
// the cluster against the NetworkPolicies of the controller's pods.
const CheckWebhookExposure = "webhook-exposure"

// githubHookAddresses are addresses from each of GitHub's webhook ranges (the hooks list
// of https://api.github.com/meta: 192.30.252.0/22, 185.199.108.0/22, 140.82.112.0/20,
// 143.55.64.0/20), where deliveries come from when GitHub reaches a Service directly.
var githubHookAddresses = []netip.Addr{
	netip.MustParseAddr("192.30.252.1"), netip.MustParseAddr("185.199.108.1"),
	netip.MustParseAddr("140.82.112.1"), netip.MustParseAddr("143.55.64.1"),
}

// webhookServiceLabels select Gantry's webhook Service, as the chart and kustomize
// label it.
var webhookServiceLabels = client.MatchingLabels{"app.kubernetes.io/name": "gantry", "app.kubernetes.io/component": "webhook"}

// webhookExposureChecks looks at each Gantry webhook Service of type LoadBalancer or
// NodePort — GitHub's deliveries then arrive from GitHub's own addresses — and says
// whether the NetworkPolicies that select the controller's pods let those addresses
// reach the webhook port. The default controller policy admits only the cluster's pods
// (an ingress controller or a gateway), so such deliveries are dropped, and GitHub only
// records a timeout. A Service doctor may not read is skipped, not a problem.
func webhookExposureChecks(ctx context.Context, o Options) []Check {
	var svcs corev1.ServiceList
	opts := []client.ListOption{webhookServiceLabels}
	if o.ControllerNamespace != "" {
		opts = append(opts, client.InNamespace(o.ControllerNamespace))
	}
	if err := o.Kube.List(ctx, &svcs, opts...); err != nil {
		return []Check{{Name: CheckWebhookExposure, Status: Skipped, Message: "cannot list the webhook Services: " + err.Error()}}
	}
	sort.Slice(svcs.Items, func(i, j int) bool {
		return svcs.Items[i].Namespace+"/"+svcs.Items[i].Name < svcs.Items[j].Namespace+"/"+svcs.Items[j].Name
	})
	var out []Check
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && svc.Spec.Type != corev1.ServiceTypeNodePort {
			continue
		}
		out = append(out, webhookExposureCheck(ctx, o, svc))
	}
	return out
}

func webhookExposureCheck(ctx context.Context, o Options, svc *corev1.Service) Check {
	name := svc.Namespace + "/" + svc.Name
	c := Check{Name: CheckWebhookExposure}
	var policies networkingv1.NetworkPolicyList
	if err := o.Kube.List(ctx, &policies, client.InNamespace(svc.Namespace)); err != nil {
		c.Status, c.Message = Skipped, fmt.Sprintf("Service %s is a %s, but its namespace's NetworkPolicies cannot be read: %v", name, svc.Spec.Type, err)
		if apierrors.IsForbidden(err) {
			c.Message = fmt.Sprintf("Service %s is a %s, but doctor may not list NetworkPolicies in %s", name, svc.Spec.Type, svc.Namespace)
		}
		return c
	}
	podLabels, port, portName := webhookBackend(ctx, o, svc)
	var isolating []string
	admitted := false
	for i := range policies.Items {
		p := &policies.Items[i]
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(podLabels)) || !isolatesIngress(p) {
			continue
		}
		isolating = append(isolating, p.Name)
		for _, r := range p.Spec.Ingress {
			if portsAdmit(r.Ports, port, portName) && peersAdmitAny(r.From, githubHookAddresses) {
				admitted = true
			}
		}
	}
	switch {
	case len(isolating) == 0:
		c.Status, c.Message = OK, fmt.Sprintf("Service %s is a %s and no NetworkPolicy restricts the controller's ingress", name, svc.Spec.Type)
	case admitted:
		c.Status, c.Message = OK, fmt.Sprintf("Service %s is a %s and NetworkPolicy %s admits GitHub's hook addresses on port %d", name, svc.Spec.Type, strings.Join(isolating, ", "), port)
	default:
		c.Status, c.Result = Problem, FindingWebhookBlockedByNetworkPolicy
		c.Message = fmt.Sprintf("Service %s is a %s, so GitHub's deliveries come from outside the cluster, and NetworkPolicy %s admits none of GitHub's hook addresses on the webhook port %d: they are dropped, and GitHub records a timeout",
			name, svc.Spec.Type, strings.Join(isolating, ", "), port)
		c.Fix = "admit GitHub's hook ranges (https://api.github.com/meta, hooks) as ipBlocks: chart value networkPolicy.controller.webhookFrom, with webhook.service.externalTrafficPolicy: Local so their address is kept (docs/install.md#exposing-the-webhook)"
	}
	return c
}

// webhookBackend returns the labels of the pods behind the Service (a pod's, else the
// Service's selector) and the webhook port they listen on, by number and by name.
func webhookBackend(ctx context.Context, o Options, svc *corev1.Service) (map[string]string, int32, string) {
	podLabels := svc.Spec.Selector
	target := intstr.FromInt32(9090)
	if len(svc.Spec.Ports) > 0 {
		target = svc.Spec.Ports[0].TargetPort
		for _, p := range svc.Spec.Ports {
			if p.Name == "webhook" {
				target = p.TargetPort
			}
		}
	}
	port, portName := target.IntVal, ""
	if target.Type == intstr.String {
		port, portName = 9090, target.StrVal // the controller's webhook port, unless a pod says
	}
	var pods corev1.PodList
	if len(svc.Spec.Selector) > 0 && o.Kube.List(ctx, &pods, client.InNamespace(svc.Namespace), client.MatchingLabels(svc.Spec.Selector)) == nil && len(pods.Items) > 0 {
		pod := pods.Items[0]
		podLabels = pod.Labels
		for _, ctr := range pod.Spec.Containers {
			for _, cp := range ctr.Ports {
				if (portName != "" && cp.Name == portName) || (portName == "" && cp.ContainerPort == port) {
					port, portName = cp.ContainerPort, cp.Name
				}
			}
		}
	}
	return podLabels, port, portName
}

func isolatesIngress(p *networkingv1.NetworkPolicy) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return true // the API server's default: Ingress
	}
	for _, t := range p.Spec.PolicyTypes {
		if t == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

// portsAdmit says whether a rule's ports take TCP to port (named portName on the pod).
func portsAdmit(ports []networkingv1.NetworkPolicyPort, port int32, portName string) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String:
			if portName != "" && p.Port.StrVal == portName {
				return true
			}
		case p.EndPort != nil:
			if port >= p.Port.IntVal && port <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == port:
			return true
		}
	}
	return false
}

// peersAdmitAny says whether a rule's peers admit any of the addresses, from outside
// the cluster: no peers, or an ipBlock holding one of them (outside its excepts).
// Namespace and pod selectors only ever match pods.
func peersAdmitAny(peers []networkingv1.NetworkPolicyPeer, addrs []netip.Addr) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock == nil {
			continue
		}
		cidr, err := netip.ParsePrefix(p.IPBlock.CIDR)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if cidr.Contains(a) && !excepted(p.IPBlock.Except, a) {
				return true
			}
		}
	}
	return false
}

func excepted(except []string, a netip.Addr) bool {
	for _, e := range except {
		if pre, err := netip.ParsePrefix(e); err == nil && pre.Contains(a) {
			return true
		}
	}
	return false
}
