package install

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestChartCRDsAreCurrent: charts/gantry/crds holds exactly config/crd/bases, byte for
// byte. `make generate` refreshes the copies.
func TestChartCRDsAreCurrent(t *testing.T) {
	src := filepath.Join(root, "config", "crd", "bases")
	dst := filepath.Join(root, "charts", "gantry", "crds")
	list := func(dir string) []string {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range files {
			names = append(names, filepath.Base(f))
		}
		sort.Strings(names)
		return names
	}
	want, got := list(src), list(dst)
	if len(want) == 0 {
		t.Fatalf("no CRDs in %s", src)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("charts/gantry/crds holds other files than config/crd/bases: run `make generate` (-want +got):\n%s", diff)
	}
	for _, name := range want {
		a, errA := os.ReadFile(filepath.Join(src, name))
		b, errB := os.ReadFile(filepath.Join(dst, name))
		if errA != nil || errB != nil {
			t.Fatalf("reading %s: %v %v", name, errA, errB)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("charts/gantry/crds/%s differs from config/crd/bases/%s: run `make generate`", name, name)
		}
	}
}

// TestChartReadmeDocumentsEveryValue: each leaf of values.yaml (maps and lists that
// default to empty count as leaves) appears in the README's values table.
func TestChartReadmeDocumentsEveryValue(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "gantry", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "charts", "gantry", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		// resources and the security contexts are documented as a whole.
		if !ok || len(m) == 0 || prefix == "resources" || strings.HasSuffix(prefix, "ecurityContext") {
			keys = append(keys, prefix)
			return
		}
		for k, sub := range m {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, sub)
		}
	}
	walk("", values)
	sort.Strings(keys)
	if len(keys) < 20 {
		t.Fatalf("values.yaml has only %d keys: the walk is wrong", len(keys))
	}
	for _, k := range keys {
		if !bytes.Contains(readme, []byte("| `"+k+"` |")) {
			t.Errorf("charts/gantry/README.md's values table has no row for `%s`", k)
		}
	}
}

// The chart README's object names: release gantry gives gantry and gantry-webhook; a
// release name that contains "gantry" is used as it is; any other gets -gantry.
func TestChartObjectNamesAsTheReadmeSays(t *testing.T) {
	for _, tc := range []struct{ release, deployment, webhook string }{
		{"gantry", "gantry", "gantry-webhook"},
		{"ci-gantry", "ci-gantry", "ci-gantry-webhook"},
		{"ci", "ci-gantry", "ci-gantry-webhook"},
	} {
		objs := mustHelmTemplate(t, tc.release, "gantry-system", map[string]any{})
		find(t, objs, "Deployment", "gantry-system", tc.deployment)
		find(t, objs, "Service", "gantry-system", tc.webhook)
	}
}

// The chart (version, appVersion, so image.tag's default) and config/manager (newTag)
// name one version, the one the release workflow checks its tag against: a tagged
// release's defaults pull its own image.
func TestReleaseVersionIsConsistent(t *testing.T) {
	out, err := exec.CommandContext(ctx(t), filepath.Join(root, "hack", "release", "set-version.sh"), "--check", chartAppVersion(t)).CombinedOutput()
	if err != nil {
		t.Errorf("hack/release/set-version.sh --check %s: %v\n%s", chartAppVersion(t), err, out)
	}
}
