package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// install is one way of installing Gantry that the docs describe.
type install struct {
	// column is its header in the rights table; title its name in the list of objects.
	column, title string
	render        func(r *renderer) ([]*unstructured.Unstructured, error)
}

// The namespaces a namespaced chart install watches in the docs' examples.
var watched = []string{"ci", "ci-gpu"}

func namespacedValues(extra ...string) []string {
	return append([]string{"--set", "watchNamespaces={" + strings.Join(watched, ",") + "}"}, extra...)
}

// namespacedChart is the index in installs of the chart with watchNamespaces.
const namespacedChart = 2

// installs are the installs the docs describe, in the order of the rights table.
var installs = []install{
	{
		column: "`config/default`",
		title:  "`kubectl apply --server-side -k config/default`",
		render: func(r *renderer) ([]*unstructured.Unstructured, error) { return r.kustomize("config/default") },
	},
	{
		column: "chart (every namespace: the default)",
		title:  "`helm install gantry charts/gantry -n gantry-system` (every namespace: `watchNamespaces: []`, the default)",
		render: func(r *renderer) ([]*unstructured.Unstructured, error) { return r.helm() },
	},
	{
		column: "chart, `watchNamespaces: [" + strings.Join(watched, ", ") + "]`",
		title:  "the same with `watchNamespaces: [" + strings.Join(watched, ", ") + "]`",
		render: func(r *renderer) ([]*unstructured.Unstructured, error) { return r.helm(namespacedValues()...) },
	},
	{
		column: "`config/namespaced`",
		title:  "`kubectl apply --server-side -k config/namespaced`",
		render: func(r *renderer) ([]*unstructured.Unstructured, error) { return r.kustomize("config/namespaced") },
	},
}

// renderer runs the pinned helm and kustomize in the repository.
type renderer struct {
	root string
	home string // helm's cache and configuration, apart from the user's
}

func newRenderer(root string) *renderer {
	home, err := os.MkdirTemp("", "installdocs-")
	if err != nil {
		home = os.TempDir()
	}
	return &renderer{root: root, home: home}
}

func (r *renderer) close() { _ = os.RemoveAll(r.home) }

// tool runs `go tool -modfile=hack/helm/go.mod NAME ARGS…` in the repository's root.
func (r *renderer) tool(name string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", append([]string{"tool", "-modfile=hack/helm/go.mod", name}, args...)...) //nolint:noctx // a generator run by make
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(r.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(r.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(r.home, "data"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// helm renders the chart as release gantry in gantry-system, CRDs included (helm
// install creates them).
func (r *renderer) helm(extra ...string) ([]*unstructured.Unstructured, error) {
	out, err := r.tool("helm", append([]string{"template", "gantry", "charts/gantry", "--namespace", "gantry-system", "--include-crds"}, extra...)...)
	if err != nil {
		return nil, err
	}
	return parseManifests(out)
}

func (r *renderer) kustomize(dir string) ([]*unstructured.Unstructured, error) {
	out, err := r.tool("kustomize", "build", dir)
	if err != nil {
		return nil, err
	}
	return parseManifests(out)
}

// parseManifests splits a multi-document YAML stream into objects, dropping empty
// documents.
func parseManifests(b []byte) ([]*unstructured.Unstructured, error) {
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
}
