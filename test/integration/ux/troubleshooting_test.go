package ux

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/internal/testenv"
)

// Every reason a person can meet — a Runner's status.reason, a condition's reason, an
// event's reason — has an entry in docs/troubleshooting.md: a heading that names it.
// The reasons are read from the code: the Reason… constants of api/v1alpha1 and of
// internal/controller that the controllers use, and the literal reasons they write
// into conditions and events.
func TestEveryReasonHasATroubleshootingEntry(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	sources := goSources(t, filepath.Join(root, "internal"))
	reasons := map[string]string{} // reason → where it comes from

	for path, consts := range reasonConstants(t, filepath.Join(root, "api", "v1alpha1"), filepath.Join(root, "internal", "controller")) {
		for name, value := range consts {
			if strings.Contains(path, "api/v1alpha1") || used(sources, name) {
				reasons[value] = path + ": " + name
			}
		}
	}
	literal := []*regexp.Regexp{
		regexp.MustCompile(`Reason:\s*"([A-Z][A-Za-z]+)"`),
		regexp.MustCompile(`Eventf\([^,]+,[^,]+,\s*corev1\.EventType[A-Za-z]+,\s*"([A-Z][A-Za-z]+)"`),
	}
	for path, src := range sources {
		if !strings.Contains(path, filepath.Join("internal", "controller")) {
			continue
		}
		for _, re := range literal {
			for _, m := range re.FindAllStringSubmatch(src, -1) {
				reasons[m[1]] = path
			}
		}
	}
	if len(reasons) < 15 {
		t.Fatalf("found only %d reasons in the code (%v): the scan is broken", len(reasons), reasons)
	}

	doc, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	var headings []string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "#") {
			headings = append(headings, line)
		}
	}
	var names []string
	for r := range reasons {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		word := regexp.MustCompile(`\b` + regexp.QuoteMeta(r) + `\b`)
		found := false
		for _, h := range headings {
			found = found || word.MatchString(h)
		}
		if !found {
			t.Errorf("reason %s (%s) has no heading in docs/troubleshooting.md: say what it means, what to check and what to fix", r, reasons[r])
		}
	}
}

// goSources reads the non-test Go files under dir.
func goSources(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		out[path] = string(src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reasonConstants returns, per Go file under the given directories, the string
// constants named Reason….
func reasonConstants(t *testing.T, dirs ...string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		var paths []string
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				paths = append(paths, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if !strings.HasPrefix(n.Name, "Reason") || i >= len(vs.Values) {
							continue
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						if out[path] == nil {
							out[path] = map[string]string{}
						}
						out[path][n.Name] = v
					}
				}
			}
		}
	}
	return out
}

// used reports whether the identifier appears in the sources besides its declaration.
func used(sources map[string]string, name string) bool {
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	n := 0
	for _, src := range sources {
		n += len(re.FindAllStringIndex(src, -1))
	}
	return n > 1
}
