package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestDocsWorkflowsPassActionlint runs the actionlint pinned in hack/actionlint/go.mod
// on every workflow the docs show (a yaml block with top-level jobs) and every workflow
// file under examples/, as a repository would hold them in .github/workflows. A
// self-hosted runner label is known when a pool the docs or examples define offers it
// (its labels, or a scale-set pool's scale set name): actionlint's config lists those.
func TestDocsWorkflowsPassActionlint(t *testing.T) {
	dir := t.TempDir()
	wfDir := filepath.Join(dir, ".github", "workflows")
	if err := os.MkdirAll(wfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var files []string
	labels := []string{}
	addPool := func(doc map[string]any) {
		if doc["kind"] != "RunnerPool" {
			return
		}
		spec, _ := doc["spec"].(map[string]any)
		for _, l := range asStrings(spec["labels"]) {
			if !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
		if demand, _ := spec["demand"].(map[string]any); demand["source"] == "ScaleSet" {
			name, _ := demand["scaleSetName"].(string)
			if name == "" {
				meta, _ := doc["metadata"].(map[string]any)
				name, _ = meta["name"].(string)
			}
			labels = append(labels, name)
		}
	}
	for _, b := range allDocBlocks(t) {
		if b.lang != "yaml" {
			continue
		}
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(b.body), &doc); err != nil {
			continue // a fragment or several documents: no workflow
		}
		addPool(doc)
		if _, ok := doc["jobs"]; !ok {
			continue
		}
		name := fmt.Sprintf("%s-%d.yaml", strings.NewReplacer("/", "-", ".md", "").Replace(b.file), b.line)
		if err := os.WriteFile(filepath.Join(wfDir, name), []byte(b.body), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.Join(".github", "workflows", name))
		t.Logf("%s: a workflow → %s", b.where(), name)
	}
	examples, err := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range examples {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range strings.Split(string(b), "\n---\n") {
			var doc map[string]any
			if yaml.Unmarshal([]byte(part), &doc) != nil {
				continue
			}
			addPool(doc)
			if _, ok := doc["jobs"]; ok {
				name := "examples-" + filepath.Base(f)
				if err := os.WriteFile(filepath.Join(wfDir, name), []byte(part), 0o644); err != nil {
					t.Fatal(err)
				}
				files = append(files, filepath.Join(".github", "workflows", name))
			}
		}
	}
	if len(files) < 3 {
		t.Fatalf("found %d workflows in the docs and examples: the search is wrong", len(files))
	}
	slices.Sort(labels)
	cfg, err := yaml.Marshal(map[string]any{"self-hosted-runner": map[string]any{"labels": labels}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, ".github", "actionlint.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("self-hosted labels the documented pools offer: %v", labels)

	actionlint, err := buildPinnedTool("hack/actionlint/go.mod", "actionlint")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// No shellcheck or pyflakes: the same result on every machine.
	cmd := exec.CommandContext(ctx, actionlint, append([]string{"-no-color", "-shellcheck=", "-pyflakes=", "-config-file", cfgPath}, files...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("actionlint refuses a documented workflow (%v):\n%s", err, out.String())
	}
}

func asStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
