package install

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kubernetesAPI is the OpenAPI (v2) description Kubernetes' API server publishes, as
// the release holds it (api/openapi-spec/swagger.json of module k8s.io/kubernetes):
// every served kind, by its group, version and kind, and every field of each.
type kubernetesAPI struct {
	defs  map[string]apiSchema
	byGVK map[string]string // "group/version/Kind" → definition
}

type apiSchema struct {
	Ref                  string               `json:"$ref"`
	Properties           map[string]apiSchema `json:"properties"`
	Items                *apiSchema           `json:"items"`
	AdditionalProperties json.RawMessage      `json:"additionalProperties"`
	GVK                  []struct {
		Group, Version, Kind string
	} `json:"x-kubernetes-group-version-kind"`
}

// loadKubernetesAPI reads the API of Kubernetes 1.minor from module k8s.io/kubernetes
// v1.minor.0, through the Go module proxy (the module cache after the first run).
func loadKubernetesAPI(t *testing.T, minor int) *kubernetesAPI {
	t.Helper()
	ref := fmt.Sprintf("k8s.io/kubernetes@v1.%d.0", minor)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", ref).Output()
	if err != nil {
		t.Fatalf("go mod download %s (the API of Kubernetes 1.%d; the test needs the Go module proxy and does not skip): %v", ref, minor, err)
	}
	var dl struct{ Dir, Error string }
	if err := json.Unmarshal(b, &dl); err != nil || dl.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", ref, err, dl.Error)
	}
	raw, err := os.ReadFile(filepath.Join(dl.Dir, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Definitions map[string]apiSchema `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("%s's swagger.json: %v", ref, err)
	}
	api := &kubernetesAPI{defs: spec.Definitions, byGVK: map[string]string{}}
	for name, d := range spec.Definitions {
		for _, g := range d.GVK {
			api.byGVK[g.Group+"/"+g.Version+"/"+g.Kind] = name
		}
	}
	if len(api.byGVK) < 100 {
		t.Fatalf("%s's swagger.json names %d kinds: reading it went wrong", ref, len(api.byGVK))
	}
	return api
}

// check reports the fields of obj that its kind does not have in this API, or that the
// kind itself is not served.
func (a *kubernetesAPI) check(obj map[string]any) []string {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	def, ok := a.byGVK[group+"/"+version+"/"+kind]
	if !ok {
		return []string{fmt.Sprintf("%s %s is not served", apiVersion, kind)}
	}
	var problems []string
	a.walk(kind, obj, apiSchema{Ref: "#/definitions/" + def}, &problems)
	return problems
}

func (a *kubernetesAPI) walk(path string, v any, s apiSchema, problems *[]string) {
	for s.Ref != "" {
		s = a.defs[strings.TrimPrefix(s.Ref, "#/definitions/")]
	}
	switch v := v.(type) {
	case map[string]any:
		if len(s.Properties) > 0 {
			for k, sub := range v {
				ps, ok := s.Properties[k]
				if !ok {
					*problems = append(*problems, path+"."+k+": no such field")
					continue
				}
				a.walk(path+"."+k, sub, ps, problems)
			}
			return
		}
		var elem apiSchema
		if len(s.AdditionalProperties) > 0 && json.Unmarshal(s.AdditionalProperties, &elem) == nil {
			for k, sub := range v {
				a.walk(path+"["+k+"]", sub, elem, problems)
			}
		}
	case []any:
		if s.Items != nil {
			for i, sub := range v {
				a.walk(fmt.Sprintf("%s[%d]", path, i), sub, *s.Items, problems)
			}
		}
	}
}

// notKubernetes are the API groups the installs can render that Kubernetes itself does
// not serve: their CRDs come with Gantry or with the add-on the value turns on.
var notKubernetes = map[string]string{
	"gantry.dev":                "Gantry's own CRDs",
	"monitoring.coreos.com":     "the Prometheus Operator (metrics.serviceMonitor.enabled)",
	"gateway.networking.k8s.io": "the Gateway API's CRDs (webhook.httpRoute.enabled)",
}

// everyOption renders every install the docs describe with every option on: what an
// install can ask of the API server.
func everyOption(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	values := map[string]any{
		"replicas": 2,
		"webhook": map[string]any{
			"ingress":   map[string]any{"enabled": true, "host": "gantry.example.com", "tls": []any{map[string]any{"secretName": "t", "hosts": []any{"gantry.example.com"}}}},
			"httpRoute": map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public"}}},
		},
		"metrics":        map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		"githubCABundle": map[string]any{"pem": "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"},
		"github":         map[string]any{"token": "ghp_notarealtoken0000000000000000000000", "secretNamespaces": []any{"ci"}},
	}
	namespaced := map[string]any{"watchNamespaces": []any{"ci", "ci-gpu"}}
	for k, v := range values {
		if k != "github" {
			namespaced[k] = v
		}
	}
	// kustomize takes only relative paths to other kustomizations: the overlay lives in
	// out/ (ignored by git).
	if err := os.MkdirAll(filepath.Join(root, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	overlay, err := os.MkdirTemp(filepath.Join(root, "out"), "kubeversion-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(overlay) })
	rel := func(p ...string) string {
		r, err := filepath.Rel(overlay, filepath.Join(append([]string{root}, p...)...))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kust := fmt.Sprintf("resources: [%s]\ncomponents: [%s, %s, %s]\n", rel("config", "default"),
		rel("config", "components", "webhook-ingress"), rel("config", "components", "webhook-httproute"), rel("config", "components", "github-ca"))
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string][]*unstructured.Unstructured{
		"the chart, every option":             mustHelmTemplate(t, "gantry", "gantry-system", values, "--include-crds"),
		"the chart, every option, namespaced": mustHelmTemplate(t, "gantry", "gantry-system", namespaced, "--include-crds"),
		"config/default with every component": kustomizeBuild(t, overlay),
		"config/namespaced":                   kustomizeBuild(t, "config/namespaced"),
	}
}

// TestRenderedAPIsServedAtMinimumKubernetes: every object the chart and the kustomize
// bases render, with every option on, is of a stable (GA) API that Kubernetes at
// Chart.yaml's minimum version serves, and has no field that version's API does not
// know. It reads that version's API from its release (the API server's OpenAPI), so it
// catches a new kind, a newer API version or a newer field the moment one is rendered.
// What it cannot see: a field that exists at that version behind a feature gate that is
// off by default (alpha), and which CEL functions the CRDs' rules call.
func TestRenderedAPIsServedAtMinimumKubernetes(t *testing.T) {
	minor := minimumKubernetes(t)
	api := loadKubernetesAPI(t, minor)
	checked := 0
	for install, objs := range everyOption(t) {
		for _, o := range objs {
			group, version, _ := strings.Cut(o.GetAPIVersion(), "/")
			if why, ok := notKubernetes[group]; ok {
				t.Logf("%s: %s %s: %s, not Kubernetes", install, o.GetAPIVersion(), o.GetKind(), why)
				continue
			}
			if !strings.Contains(o.GetAPIVersion(), "/") {
				version = o.GetAPIVersion()
			}
			if strings.Contains(version, "alpha") || strings.Contains(version, "beta") {
				t.Errorf("%s renders %s %s: a beta or alpha API, which Kubernetes 1.%d need not serve", install, o.GetAPIVersion(), describe(o), minor)
				continue
			}
			if problems := api.check(o.Object); len(problems) > 0 {
				t.Errorf("%s renders %s (%s), which Kubernetes 1.%d does not serve as written: %s — raise Chart.yaml's kubeVersion, or render it only where served",
					install, describe(o), o.GetAPIVersion(), minor, strings.Join(problems, "; "))
				continue
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d objects against Kubernetes 1.%d: the rendering is wrong", checked, minor)
	}
	t.Logf("%d rendered objects are served, field by field, by Kubernetes 1.%d", checked, minor)
}

// TestAPICheckCatchesNewerAPIs: the check above refuses what Kubernetes 1.29 does not
// serve — the admission policy of admissionregistration.k8s.io/v1, GA in 1.30, which
// the chart renders — and a field the kind does not have.
func TestAPICheckCatchesNewerAPIs(t *testing.T) {
	old := loadKubernetesAPI(t, 29)
	policy := map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": "x"}, "spec": map[string]any{"failurePolicy": "Fail"}}
	if p := old.check(policy); len(p) == 0 {
		t.Error("Kubernetes 1.29's API serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy: the check could not have caught the 1.29 claim")
	}
	cur := loadKubernetesAPI(t, minimumKubernetes(t))
	if p := cur.check(policy); len(p) != 0 {
		t.Errorf("the minimum version's API refuses the admission policy: %v", p)
	}
	pdb := map[string]any{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
		"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "b"}}, "spec": map[string]any{"minAvailable": 1, "noSuchField": true}}
	if p := cur.check(pdb); len(p) != 1 || !strings.Contains(p[0], "spec.noSuchField") {
		t.Errorf("a PodDisruptionBudget with spec.noSuchField: %v; want that field named", p)
	}
}
