package install

import (
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// fragmentBase is the RunnerPool a `<!-- manifest: RunnerPool spec -->` block is applied
// in: what every pool needs and the fragment may not show. The fragment's fields win.
func fragmentBase() map[string]any {
	return map[string]any{
		"github": map[string]any{"url": "https://github.com/my-org", "credentialsSecretRef": map[string]any{"name": "github-app"}},
		"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest", "command": []any{"/home/runner/run.sh"}},
		}}},
	}
}

// merge lays over onto base: maps merge key by key, anything else is replaced.
func merge(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = merge(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// TestDocManifests applies every block of the docs marked `<!-- manifest -->` or
// `<!-- manifest: RunnerPool spec -->` to the test control plane, as `kubectl apply
// --server-side --dry-run=server` with strict field validation would: the API server
// (with Gantry's CRDs and their validation rules) must accept it as written. A
// manifest's namespace is replaced by the test's own.
func TestDocManifests(t *testing.T) {
	n := 0
	for _, bl := range allDocBlocks(t) {
		if bl.marker != "manifest" {
			continue
		}
		n++
		// A subtest's name is part of its namespace's: letters, digits and dashes.
		name := strings.TrimSuffix(filepath.Base(bl.file), ".md") + "-" + strconv.Itoa(bl.line)
		t.Run(name, func(t *testing.T) {
			var doc map[string]any
			if err := yaml.UnmarshalStrict([]byte(bl.body), &doc); err != nil {
				t.Fatalf("%s is not YAML: %v", bl.where(), err)
			}
			if bl.id == "RunnerPool spec" {
				spec := doc
				if s, ok := doc["spec"].(map[string]any); ok && len(doc) == 1 {
					spec = s
				}
				doc = map[string]any{
					"apiVersion": "gantry.dev/v1alpha1", "kind": "RunnerPool",
					"metadata": map[string]any{"name": "doc-fragment"},
					"spec":     merge(fragmentBase(), spec),
				}
			}
			u := &unstructured.Unstructured{Object: doc}
			if u.GetAPIVersion() == "" || u.GetKind() == "" {
				t.Fatalf("%s has no apiVersion or kind: mark it <!-- manifest: RunnerPool spec --> if it is part of a pool", bl.where())
			}
			u.SetNamespace(env.Namespace(t))
			if err := env.Client.Create(ctx(t), u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
				t.Errorf("%s (%s %s) was refused: %v", bl.where(), u.GetKind(), u.GetName(), err)
			}
		})
	}
	if n == 0 {
		t.Fatal("no doc block is marked <!-- manifest -->")
	}
}
