package install

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The docs tests run the commands and manifests of the docs as they are written. In
// the Markdown source, an HTML comment on the line right before a fenced block marks it:
//
//	<!-- test: ID -->                      the block runs in the docs tests (sh), or,
//	                                       for a block whose first line is "# FILE",
//	                                       is written to FILE before the next command,
//	                                       or (yaml) a scenario's action compares it
//	                                       with what the cluster holds
//	<!-- release: ID -->                   the block runs in `make release-dry-run`'s
//	                                       rehearsal (release_test.go), with the dry
//	                                       run's files where a download puts them
//	<!-- manifest -->                      a Kubernetes manifest: applied (server-side
//	                                       dry run, strict fields) to the test control
//	                                       plane by TestDocManifests
//	<!-- manifest: RunnerPool spec -->     a part of a RunnerPool's spec (with or without
//	                                       the `spec:` key): applied the same way inside
//	                                       a RunnerPool that has a URL, a Secret and a
//	                                       runner container
//	<!-- values: NAME -->                  chart values a test renders (docValues)
//	<!-- not tested: WHY -->               a command or manifest the tests cannot run
//	                                       (it waits forever, needs GitHub itself, or is
//	                                       not Kubernetes'); TestDocsBlocksAreMarked lists
//	                                       and counts them
//
// Every sh and yaml block of every doc in allDocs carries one of them
// (TestDocsBlocksAreMarked); every block marked `test` is run by a scenario in
// docs_scenarios_test.go, every block marked `release` by the rehearsal. Blocks of other
// languages (console output, JSON, Go) show output or code, not something to run.
//
// A value the reader must change is written as a placeholder, a word in capitals that
// starts with YOUR_ (placeholderRE), and each doc that has one says so before its first
// block. The tests replace the placeholders, and nothing else, before they run a block
// (docWorld.substitute); TestDocsEditOnlyPlaceholders holds them to that.

// docFiles are the docs whose shell blocks the docs scenarios run to install and operate
// Gantry.
var docFiles = []string{
	"docs/quickstart.md",
	"docs/install.md",
	"docs/operations.md",
	"charts/gantry/README.md",
	"docs/container-jobs.md",
	"docs/demand.md",
	"docs/doctor.md",
	"docs/troubleshooting.md",
	"docs/runnerpool.md",
	"docs/usage.md",
	"examples/README.md",
}

// allDocs are every document a user reads: docs/, the chart's README, the examples'
// README and the repository's README.
func allDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	return append(out, "charts/gantry/README.md", "examples/README.md", "README.md")
}

// docBlock is one fenced block of a doc.
type docBlock struct {
	file string // relative to the repository root
	line int    // of the opening fence, 1-based
	lang string
	body string
	// marker is "test", "release", "not tested", "manifest", "values" or "" (none).
	marker string
	// id names a tested block; skipWhy says why a block is not tested.
	id, skipWhy string
}

// ref is how scenarios name the block: "docs/quickstart.md#helm-install".
func (b docBlock) ref() string { return b.file + "#" + b.id }

func (b docBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// fileName is the file a block writes: its first line "# FILE", or "".
func (b docBlock) fileName() string {
	first, _, _ := strings.Cut(b.body, "\n")
	if name, ok := strings.CutPrefix(strings.TrimSpace(first), "# "); ok && !strings.Contains(name, " ") && strings.Contains(name, ".") {
		return name
	}
	return ""
}

var (
	markerRE = regexp.MustCompile(`^\s*<!--\s*(test|release|not tested|manifest|values)(?::\s*(.*?))?\s*-->\s*$`)
	fenceRE  = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")
)

// parseDocBlocks returns the fenced blocks of a Markdown document, with the marker on
// the line right before each. Fences may be indented (inside a list item); the body
// loses that indentation.
func parseDocBlocks(file, text string) ([]docBlock, error) {
	var out []docBlock
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var prev string
	var cur *docBlock
	var indent string
	var body []string
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if cur != nil {
			if strings.TrimSpace(line) == "```" {
				cur.body = strings.Join(body, "\n") + "\n"
				out = append(out, *cur)
				cur, body, prev = nil, nil, line
				continue
			}
			body = append(body, strings.TrimPrefix(line, indent))
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			cur = &docBlock{file: file, line: n, lang: m[2]}
			indent = m[1]
			if mm := markerRE.FindStringSubmatch(prev); mm != nil {
				cur.marker = mm[1]
				switch mm[1] {
				case "not tested":
					cur.skipWhy = mm[2]
				case "manifest", "values":
					cur.id = mm[2]
				default:
					cur.id = strings.TrimSpace(mm[2])
					if cur.id == "" || strings.ContainsAny(cur.id, " #;,") {
						return nil, fmt.Errorf("%s:%d: marker %q needs an id, one word: placeholders are YOUR_ words in the block, not listed in the marker", file, n-1, prev)
					}
				}
			}
			continue
		}
		prev = line
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a fenced block is never closed", file, cur.line)
	}
	return out, sc.Err()
}

// readDoc returns a doc's text (f relative to the repository's root) and its blocks.
func readDoc(t *testing.T, f string) (string, []docBlock) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, f))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseDocBlocks(f, string(b))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), blocks
}

// loadDocBlocks parses every doc in docFiles and returns the blocks marked `test` or
// `release`, by ref.
func loadDocBlocks(t *testing.T) map[string]docBlock {
	t.Helper()
	out := map[string]docBlock{}
	for _, f := range docFiles {
		_, blocks := readDoc(t, f)
		for _, bl := range blocks {
			if bl.marker != "test" && bl.marker != "release" {
				continue
			}
			if old, dup := out[bl.ref()]; dup {
				t.Fatalf("%s and %s both mark a block %q", old.where(), bl.where(), bl.id)
			}
			out[bl.ref()] = bl
		}
	}
	return out
}

func isShell(lang string) bool { return lang == "sh" || lang == "bash" || lang == "shell" }

// allDocBlocks parses every doc in allDocs.
func allDocBlocks(t *testing.T) []docBlock {
	t.Helper()
	var out []docBlock
	for _, f := range allDocs(t) {
		_, blocks := readDoc(t, f)
		out = append(out, blocks...)
	}
	return out
}

// docValuesUsed are the `<!-- values: NAME -->` blocks the chart tests render.
var docValuesUsed = []string{"narrow-egress", "loadbalancer"}

// manifestKinds are what a `<!-- manifest: KIND -->` marker may name.
var manifestKinds = []string{"", "RunnerPool spec"}

// TestDocsBlocksAreMarked: every command (sh) and manifest (yaml) of every doc says how
// the tests run it, or why they do not; every block marked `test` is run by a scenario,
// which names only blocks that exist. It lists and counts the blocks not tested.
func TestDocsBlocksAreMarked(t *testing.T) {
	used, readByAction := map[string]bool{}, map[string]bool{}
	for _, sc := range docScenarios {
		for _, st := range sc.steps {
			if st.doc != "" {
				used[st.doc] = true
			}
			for _, ref := range st.runs {
				used[ref], readByAction[ref] = true, true
			}
		}
	}
	blocks := loadDocBlocks(t)
	var skipped []string
	counts := map[string]int{}
	for _, bl := range allDocBlocks(t) {
		runnable := isShell(bl.lang) || bl.lang == "yaml"
		if runnable {
			counts[bl.marker]++
		}
		switch {
		case isShell(bl.lang) && bl.marker != "test" && bl.marker != "release" && bl.marker != "not tested":
			t.Errorf("%s: a shell block without <!-- test: ID -->, <!-- release: ID --> or <!-- not tested: WHY --> before it", bl.where())
		case bl.lang == "yaml" && bl.marker == "":
			t.Errorf("%s: a yaml block without <!-- test: ID -->, <!-- manifest -->, <!-- manifest: RunnerPool spec -->, <!-- values: NAME --> or <!-- not tested: WHY --> before it", bl.where())
		case !runnable && bl.marker != "":
			t.Errorf("%s: a %q block is marked %s; only sh and yaml blocks are run", bl.where(), bl.lang, bl.marker)
		}
		switch bl.marker {
		case "not tested":
			if bl.skipWhy == "" {
				t.Errorf("%s: <!-- not tested: --> says no reason", bl.where())
			}
			skipped = append(skipped, fmt.Sprintf("%s (%s): %s", bl.where(), bl.lang, bl.skipWhy))
		case "test":
			if !isShell(bl.lang) && bl.fileName() == "" && !readByAction[bl.ref()] {
				t.Errorf("%s: a tested %s block must start with a \"# FILE\" line naming the file it is, or be what a scenario's action compares with the cluster", bl.where(), bl.lang)
			}
			if !used[bl.ref()] {
				t.Errorf("%s: block %s is marked test, but no scenario in docs_scenarios_test.go runs it", bl.where(), bl.ref())
			}
		case "release":
			if !isShell(bl.lang) {
				t.Errorf("%s: only shell blocks can be marked release", bl.where())
			}
			if !slices.Contains(releaseBlocks, bl.ref()) {
				t.Errorf("%s: block %s is marked release, but the rehearsal (releaseBlocks) does not run it", bl.where(), bl.ref())
			}
		case "manifest":
			if !slices.Contains(manifestKinds, bl.id) {
				t.Errorf("%s: <!-- manifest: %s -->: want one of %q", bl.where(), bl.id, manifestKinds)
			}
		case "values":
			if !slices.Contains(docValuesUsed, bl.id) {
				t.Errorf("%s: <!-- values: %s --> is rendered by no test (docValuesUsed)", bl.where(), bl.id)
			}
		}
	}
	var missing []string
	for ref := range used {
		if b, ok := blocks[ref]; !ok || b.marker != "test" {
			missing = append(missing, ref)
		}
	}
	for _, ref := range releaseBlocks {
		if b, ok := blocks[ref]; !ok || b.marker != "release" {
			missing = append(missing, ref)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("scenarios or the rehearsal run blocks no doc marks so: %v", missing)
	}
	t.Logf("commands and manifests of %d docs: %d run by a scenario, %d by the release rehearsal, %d applied as manifests, %d rendered as chart values, %d not tested:\n  %s",
		len(allDocs(t)), counts["test"], counts["release"], counts["manifest"], counts["values"], counts["not tested"], strings.Join(skipped, "\n  "))
}

func TestParseDocBlocks(t *testing.T) {
	doc := "intro\n\n<!-- test: install -->\n```sh\nhelm install x\n```\n\n" +
		"1. a step\n\n   <!-- test: pool -->\n   ```yaml\n   # pool.yaml\n   a: 1\n   ```\n" +
		"<!-- not tested: waits forever -->\n```sh\nkubectl get x -w\n```\n" +
		"```console\nNAME\n```\n"
	got, err := parseDocBlocks("d.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{
		{file: "d.md", line: 4, lang: "sh", body: "helm install x\n", marker: "test", id: "install"},
		{file: "d.md", line: 11, lang: "yaml", body: "# pool.yaml\na: 1\n", marker: "test", id: "pool"},
		{file: "d.md", line: 16, lang: "sh", body: "kubectl get x -w\n", marker: "not tested", skipWhy: "waits forever"},
		{file: "d.md", line: 19, lang: "console", body: "NAME\n"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(docBlock{})); diff != "" {
		t.Errorf("parseDocBlocks (-want +got):\n%s", diff)
	}
	if name := got[1].fileName(); name != "pool.yaml" {
		t.Errorf("fileName = %q, want pool.yaml", name)
	}
	for _, bad := range []string{"<!-- test: a b -->\n```sh\nx\n```\n", "<!-- test: a; replaces: b -->\n```sh\nx\n```\n", "```sh\nx\n"} {
		if _, err := parseDocBlocks("d.md", bad); err == nil {
			t.Errorf("parseDocBlocks(%q) accepted it", bad)
		}
	}
}
