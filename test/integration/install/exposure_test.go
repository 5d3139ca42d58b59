package install

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var httpRouteCRD sync.Once

// installHTTPRouteCRD installs a minimal HTTPRoute CRD (gateway.networking.k8s.io/v1)
// so that rendered routes can be applied: envtest has no Gateway API. Its schema keeps
// every field; the tests check the route's fields themselves.
func installHTTPRouteCRD(t *testing.T) {
	t.Helper()
	var err error
	httpRouteCRD.Do(func() {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "httproutes.gateway.networking.k8s.io",
				// As the Gateway API's own CRDs carry: the group is a protected one.
				Annotations: map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/2466"}},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "gateway.networking.k8s.io",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "httproutes", Singular: "httproute", Kind: "HTTPRoute", ListKind: "HTTPRouteList"},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}}}},
			},
		}
		_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	})
	if err != nil {
		t.Fatalf("installing the minimal HTTPRoute CRD: %v", err)
	}
}

// checkHTTPRoute: the route attaches to parents, serves hostnames, and sends exactly
// /webhook to the webhook Service's port.
func checkHTTPRoute(t *testing.T, objs []*unstructured.Unstructured, ns, name, service string, parents []any, hostnames []string) {
	t.Helper()
	route := find(t, objs, "HTTPRoute", ns, name)
	if route.GetAPIVersion() != "gateway.networking.k8s.io/v1" {
		t.Errorf("HTTPRoute apiVersion %s, want gateway.networking.k8s.io/v1", route.GetAPIVersion())
	}
	gotParents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	if diff := cmp.Diff(parents, gotParents); diff != "" {
		t.Errorf("HTTPRoute parentRefs (-want +got):\n%s", diff)
	}
	gotHosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	if diff := cmp.Diff(hostnames, gotHosts); diff != "" {
		t.Errorf("HTTPRoute hostnames (-want +got):\n%s", diff)
	}
	svc := typed[corev1.Service](t, find(t, objs, "Service", ns, service))
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	want := []any{map[string]any{
		"matches":     []any{map[string]any{"path": map[string]any{"type": "Exact", "value": "/webhook"}}},
		"backendRefs": []any{map[string]any{"name": service, "port": int64(svc.Spec.Ports[0].Port)}},
	}}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("HTTPRoute rules (-want +got):\n%s", diff)
	}
}

// TestHelmHTTPRoute renders the chart's Gateway API route and applies it with
// server-side dry-run; without parentRefs the render fails with a message.
func TestHelmHTTPRoute(t *testing.T) {
	installHTTPRouteCRD(t)
	ns := env.Namespace(t)
	parents := []any{map[string]any{"name": "public", "namespace": "gateway-system", "sectionName": "https"}}
	objs := mustHelmTemplate(t, "ci", ns, map[string]any{"webhook": map[string]any{"httpRoute": map[string]any{
		"enabled": true, "parentRefs": parents, "hostnames": []any{"gantry.example.com"},
	}}})
	checkHTTPRoute(t, objs, ns, "ci-gantry-webhook", "ci-gantry-webhook", parents, []string{"gantry.example.com"})
	dryRunApply(t, objs)

	_, err := helmTemplate(t, "ci", ns, map[string]any{"webhook": map[string]any{"httpRoute": map[string]any{"enabled": true}}})
	if err == nil || !strings.Contains(err.Error(), "webhook.httpRoute.parentRefs is required") {
		t.Errorf("helm template with a route and no parentRefs: %v; want a failure naming webhook.httpRoute.parentRefs", err)
	}
}

// TestKustomizeWebhookComponents builds overlays of config/default with the
// webhook-ingress and webhook-httproute components, as docs/install.md shows, and
// applies them with server-side dry-run.
func TestKustomizeWebhookComponents(t *testing.T) {
	installHTTPRouteCRD(t)
	ensureNamespace(t, "gantry-system")
	for _, c := range []struct{ component, patch string }{
		{"webhook-ingress", "{kind: Ingress, name: gantry-webhook}\n    patch: |\n      - {op: replace, path: /spec/rules/0/host, value: ci.example.org}"},
		{"webhook-httproute", "{kind: HTTPRoute, name: gantry-webhook}\n    patch: |\n      - {op: replace, path: /spec/hostnames, value: [ci.example.org]}"},
	} {
		t.Run(c.component, func(t *testing.T) {
			objs := kustomizeOverlay(t, fmt.Sprintf("resources: [../../config/default]\ncomponents: [../../config/components/%s]\npatches:\n  - target: %s\n", c.component, c.patch))
			switch c.component {
			case "webhook-ingress":
				ing := typed[networkingv1.Ingress](t, find(t, objs, "Ingress", "gantry-system", "gantry-webhook"))
				if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != "ci.example.org" || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
					t.Fatalf("Ingress rules %+v, want one for ci.example.org with one path", ing.Spec.Rules)
				}
				p := ing.Spec.Rules[0].HTTP.Paths[0]
				svc := typed[corev1.Service](t, find(t, objs, "Service", "gantry-system", p.Backend.Service.Name))
				if p.Path != "/webhook" || svc.Name != "gantry-webhook" || p.Backend.Service.Port.Name != svc.Spec.Ports[0].Name {
					t.Errorf("the Ingress sends %s to %s port %q, want /webhook to gantry-webhook's port %q", p.Path, svc.Name, p.Backend.Service.Port.Name, svc.Spec.Ports[0].Name)
				}
			case "webhook-httproute":
				checkHTTPRoute(t, objs, "gantry-system", "gantry-webhook", "gantry-webhook",
					[]any{map[string]any{"name": "public", "namespace": "gateway-system"}}, []string{"ci.example.org"})
			}
			dryRunApply(t, objs)
		})
	}
}
