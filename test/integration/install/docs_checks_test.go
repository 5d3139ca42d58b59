package install

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// Checks of the docs that need no cluster: what a block may be changed in before it
// runs, what the docs say a reader needs, the one minimum Kubernetes version, the
// documented workflows, and the release's tools.

// TestDocsEditOnlyPlaceholders: the docs tests change a block's text in its
// placeholders only. Every value the tests give is a placeholder's (a YOUR_ word, or
// the github.com organization URL the simulator stands for); filling a block in leaves
// every other character as written; and each doc that has a placeholder in a block
// says what placeholders are before the first one.
func TestDocsEditOnlyPlaceholders(t *testing.T) {
	values := docPlaceholders("https://127.0.0.1:1", 1, 2, "secret")
	for k := range values {
		if k != githubOrgURL && placeholderRE.FindString(k) != k {
			t.Errorf("the docs tests give %q a value, and it is no placeholder: a doc must mark what the reader changes as YOUR_…", k)
		}
	}
	anyRE := regexp.MustCompile(regexp.QuoteMeta(githubOrgURL) + "|" + placeholderRE.String())
	blocks := loadDocBlocks(t)
	stated := map[string]bool{}
	for _, ref := range slices.Sorted(maps.Keys(blocks)) {
		b := blocks[ref]
		filled, used, err := fillPlaceholders(b.body, values)
		if err != nil {
			t.Errorf("%s: %v", b.where(), err)
			continue
		}
		// Everything between the placeholders is as written, in order.
		parts := anyRE.Split(b.body, -1)
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		if !regexp.MustCompile("(?s)^" + strings.Join(parts, ".*?") + "$").MatchString(filled) {
			t.Errorf("%s: filling in %v changed more than the placeholders:\n%s", b.where(), used, filled)
		}
		if len(used) == 0 || stated[b.file] {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, b.file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		if !strings.Contains(strings.Join(lines[:b.line-1], "\n"), "`YOUR_") {
			t.Errorf("%s: the block has placeholders (%v), and %s does not say before it that values to change are written YOUR_…", b.where(), used, b.file)
		}
		stated[b.file] = true
	}
	// The filling itself: a placeholder inside a word, the organization URL whole.
	got, _, err := fillPlaceholders("url: https://github.com/YOUR_ORG\nrepo: YOUR_ORG/YOUR_REPO\nf: gantry_YOUR_VERSION_linux.tgz\nkeep: MY_ORG YOUR\n", values)
	if err != nil {
		t.Fatal(err)
	}
	want := "url: https://127.0.0.1:1/my-org\nrepo: my-org/hello\nf: gantry_1.2.3_linux.tgz\nkeep: MY_ORG YOUR\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fillPlaceholders (-want +got):\n%s", diff)
	}
	if _, _, err := fillPlaceholders("YOUR_NEW_THING", values); err == nil {
		t.Error("a placeholder without a value was filled in")
	}
}

// commandsOf lists the commands a shell block runs: the first word of each simple
// command, past environment assignments, outside heredoc bodies.
func commandsOf(body string) []string {
	body = strings.ReplaceAll(body, "\\\n", " ")
	var out []string
	var heredoc string
	for _, line := range strings.Split(body, "\n") {
		if heredoc != "" {
			if strings.TrimSpace(line) == heredoc {
				heredoc = ""
			}
			continue
		}
		if m := regexp.MustCompile(`<<-?'?(\w+)'?`).FindStringSubmatch(line); m != nil {
			heredoc = m[1]
		}
		line, _, _ = strings.Cut(line, " #")
		for _, cmd := range regexp.MustCompile(`&&|\|\||;|\|`).Split(line, -1) {
			for _, word := range strings.Fields(cmd) {
				if strings.Contains(word, "=") && !strings.HasPrefix(word, "-") {
					continue
				}
				if !slices.Contains(out, word) && !strings.HasPrefix(word, "#") {
					out = append(out, word)
				}
				break
			}
		}
	}
	return out
}

// shellBuiltins are commands every shell machine has: no prerequisite names them.
var shellBuiltins = []string{"cd", "mkdir", "cat", "echo", "base64"}

// TestQuickstartPrerequisitesNameEveryTool: every command the quickstart's blocks run
// is in its list of what you need (make: with Go, which it builds with), and so is a
// way to get the checkout its paths are relative to.
func TestQuickstartPrerequisitesNameEveryTool(t *testing.T) {
	text, blocks := readDoc(t, "docs/quickstart.md")
	start, end := strings.Index(text, "You need:"), strings.Index(text, "## 1. Install Gantry")
	if start < 0 || end < start {
		t.Fatal(`docs/quickstart.md has no "You need:" list before "## 1. Install Gantry"`)
	}
	prereqs := text[start:end]
	var cmds []string
	for _, b := range blocks {
		if isShell(b.lang) {
			for _, c := range commandsOf(b.body) {
				if !slices.Contains(cmds, c) {
					cmds = append(cmds, c)
				}
			}
		}
	}
	if !slices.Contains(cmds, "kubectl") || !slices.Contains(cmds, "helm") {
		t.Fatalf("the quickstart's commands read as %v: the parsing is wrong", cmds)
	}
	for _, c := range cmds {
		if slices.Contains(shellBuiltins, c) {
			continue
		}
		if !strings.Contains(prereqs, "`"+c+"`") {
			t.Errorf("the quickstart runs %s, and its list of what you need does not name `%s`", c, c)
		}
		if c == "make" && !strings.Contains(prereqs, "Go 1.") {
			t.Errorf("the quickstart runs make, which builds with Go, and its list of what you need names no Go version")
		}
	}
	if !strings.Contains(text, "git clone https://github.com/gantry-dev/gantry") {
		t.Error("the quickstart's paths are relative to a checkout, and it says nowhere how to clone one")
	}
}

// minimumKubernetes is Chart.yaml's kubeVersion (">=1.N.0-0"): the one statement of the
// oldest Kubernetes Gantry installs on. It returns N.
func minimumKubernetes(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "charts", "gantry", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^kubeVersion: ">=1\.(\d+)\.0-0"$`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`charts/gantry/Chart.yaml has no kubeVersion ">=1.N.0-0"`)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestMinimumKubernetesVersionIsOneFact: the docs that state the minimum state
// Chart.yaml's, no doc claims an older one, and helm refuses the cluster just below it.
// TestRenderedAPIsServedAtMinimumKubernetes checks the manifests against it.
func TestMinimumKubernetesVersionIsOneFact(t *testing.T) {
	minor := minimumKubernetes(t)
	want := fmt.Sprintf("1.%d or later", minor)
	for _, f := range []string{"docs/quickstart.md", "docs/install.md", "charts/gantry/README.md"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not state the minimum Kubernetes version as Chart.yaml's kubeVersion does: %q", f, want)
		}
	}
	claim := regexp.MustCompile(`\b1\.(\d+)\*{0,2} (?:or|and) later`)
	for _, f := range allDocs(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range claim.FindAllStringSubmatch(string(b), -1) {
			if n, _ := strconv.Atoi(m[1]); n < minor {
				t.Errorf("%s says %q: Gantry installs on Kubernetes 1.%d or later only (Chart.yaml)", f, m[0], minor)
			}
		}
	}
	if _, stderr, err := run(t, helmBin, "template", "gantry", "charts/gantry", "--kube-version", fmt.Sprintf("1.%d.0", minor-1)); err == nil || !strings.Contains(stderr, "kubeVersion") {
		t.Errorf("helm template for Kubernetes 1.%d: err %v, stderr %s; want the chart's kubeVersion to refuse it", minor-1, err, stderr)
	}
	if _, stderr, err := run(t, helmBin, "template", "gantry", "charts/gantry", "--kube-version", fmt.Sprintf("1.%d.0", minor)); err != nil {
		t.Errorf("helm template for Kubernetes 1.%d: %v: %s", minor, err, stderr)
	}
}

// TestChartReadmePoolIsTheSample: the chart README's pool, which the docs tests apply,
// is config/samples' RunnerPool.
func TestChartReadmePoolIsTheSample(t *testing.T) {
	b, ok := loadDocBlocks(t)[chart+"sample-pool-file"]
	if !ok {
		t.Fatal("charts/gantry/README.md has no block sample-pool-file")
	}
	sample, err := os.ReadFile(filepath.Join(root, "config", "samples", "gantry_v1alpha1_runnerpool.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var readme, file map[string]any
	if err := yaml.Unmarshal([]byte(b.body), &readme); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(sample, &file); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(file, readme); diff != "" {
		t.Errorf("the chart README's pool differs from config/samples/gantry_v1alpha1_runnerpool.yaml (-sample +README):\n%s", diff)
	}
}

// TestInstallNamesThePinnedCosign: the cosign version install.md tells a reader to check
// a release with is the one the release signs with (hack/cosign/go.mod).
func TestInstallNamesThePinnedCosign(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(root, "hack", "cosign", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`github\.com/sigstore/cosign/v2 (v[0-9.]+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("hack/cosign/go.mod requires no github.com/sigstore/cosign/v2")
	}
	pinned := string(m[1])
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`cosign(?: |/v2/cmd/cosign@)(v\d+\.\d+\.\d+)`).FindAllSubmatch(doc, -1)
	if len(named) < 2 {
		t.Fatalf("docs/install.md names the cosign version %d times; want it named, and its go install command", len(named))
	}
	for _, n := range named {
		if string(n[1]) != pinned {
			t.Errorf("docs/install.md names cosign %s; the release signs with %s (hack/cosign/go.mod)", n[1], pinned)
		}
	}
}

// inlineCommandRE finds a command written inline in prose that changes the cluster or
// the checkout and names what it acts on (a path or a file): `kubectl apply -k
// config/crd`, `helm upgrade gantry charts/gantry …`, `hack/release/set-version.sh …`.
var inlineCommandRE = regexp.MustCompile("`((?:kubectl (?:apply|create|label|delete|patch)|helm (?:install|upgrade|uninstall)|cosign [a-z-]+|hack/release/)[^`]*)`")

// TestInlineCommandsAreRunAsBlocks: a command a doc writes inline, in prose, is also in
// one of the docs' blocks (which a scenario or the rehearsal runs, or which
// says why not), so no command reaches a reader untested by accident. Generated
// sections and headings (troubleshooting quotes failing commands) are not prose; the
// paragraph under a heading is.
func TestInlineCommandsAreRunAsBlocks(t *testing.T) {
	norm := func(s string) string {
		s = strings.ReplaceAll(s, "\\\n", " ")
		return strings.Join(strings.Fields(s), " ")
	}
	var bodies []string
	for _, b := range allDocBlocks(t) {
		if isShell(b.lang) {
			bodies = append(bodies, norm(b.body))
		}
	}
	generated := regexp.MustCompile(`(?s)<!-- BEGIN GENERATED.*?<!-- END GENERATED[^>]*-->`)
	fences := regexp.MustCompile("(?s)```.*?```")
	headings := regexp.MustCompile(`(?m)^[ \t]*#.*$`)
	checked := 0
	for _, f := range allDocs(t) {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := generated.ReplaceAllString(string(src), "")
		text = fences.ReplaceAllString(text, "")
		text = headings.ReplaceAllString(text, "")
		for _, para := range strings.Split(regexp.MustCompile(`\n[ \t]*`).ReplaceAllString(text, "\n"), "\n\n") {
			for _, m := range inlineCommandRE.FindAllStringSubmatch(strings.ReplaceAll(para, "\n", " "), -1) {
				cmd := norm(m[1])
				if !strings.ContainsAny(strings.TrimPrefix(cmd, "hack/release/"), "/") && !strings.Contains(cmd, ".yaml") && !strings.HasPrefix(cmd, "hack/release/") {
					continue // a subcommand named, not a command to run
				}
				checked++
				t.Logf("%s: `%s`", f, cmd)
				if !slices.ContainsFunc(bodies, func(b string) bool { return strings.Contains(b, cmd) }) {
					t.Errorf("%s writes `%s` in prose, and no block of the docs runs it: make it a block (tested, or marked not tested with why)", f, cmd)
				}
			}
		}
	}
	t.Logf("%d commands written inline checked", checked)
}

// TestDocsSayWhereGantryComesFrom: a doc whose blocks run the gantry CLI says where a
// reader gets it — a release's download, or `make build` in a checkout — before its
// first such block.
func TestDocsSayWhereGantryComesFrom(t *testing.T) {
	n := 0
	for _, f := range allDocs(t) {
		src, blocks := readDoc(t, f)
		for _, b := range blocks {
			if !isShell(b.lang) || !slices.Contains(commandsOf(b.body), "gantry") {
				continue
			}
			n++
			before := strings.Join(strings.Split(src, "\n")[:b.line-1], "\n")
			if !strings.Contains(before, "make build") || !strings.Contains(before, "install.md#from-a-release") {
				t.Errorf("%s runs gantry, and %s does not say before it where gantry comes from (a release's download: install.md#from-a-release; a checkout: make build)", b.where(), f)
			}
			break
		}
	}
	if n == 0 {
		t.Fatal("no doc runs gantry in a block: the search is wrong")
	}
}
