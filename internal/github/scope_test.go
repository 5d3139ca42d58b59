package github

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		raw         string
		want        Scope
		wantAPI     string
		wantPath    string
		wantErrPart string // "" means success
	}{
		{
			raw:     "https://github.com/acme/app",
			want:    Scope{Kind: ScopeRepository, Scheme: "https", Host: "github.com", Owner: "acme", Repo: "app"},
			wantAPI: "https://api.github.com/", wantPath: "repos/acme/app",
		},
		{
			raw:     "https://www.GitHub.com/acme/",
			want:    Scope{Kind: ScopeOrganization, Scheme: "https", Host: "github.com", Owner: "acme"},
			wantAPI: "https://api.github.com/", wantPath: "orgs/acme",
		},
		{
			raw:     "https://github.com/enterprises/big-co",
			want:    Scope{Kind: ScopeEnterprise, Scheme: "https", Host: "github.com", Enterprise: "big-co"},
			wantAPI: "https://api.github.com/", wantPath: "enterprises/big-co",
		},
		{
			raw:     "https://ghes.example.com/acme/my.repo_1",
			want:    Scope{Kind: ScopeRepository, Scheme: "https", Host: "ghes.example.com", Owner: "acme", Repo: "my.repo_1"},
			wantAPI: "https://ghes.example.com/api/v3/", wantPath: "repos/acme/my.repo_1",
		},
		{
			raw:     "http://127.0.0.1:8080/org",
			want:    Scope{Kind: ScopeOrganization, Scheme: "http", Host: "127.0.0.1:8080", Owner: "org"},
			wantAPI: "http://127.0.0.1:8080/api/v3/", wantPath: "orgs/org",
		},
		{
			raw:     "https://GHES.example.com:8443/enterprises/e/",
			want:    Scope{Kind: ScopeEnterprise, Scheme: "https", Host: "ghes.example.com:8443", Enterprise: "e"},
			wantAPI: "https://ghes.example.com:8443/api/v3/", wantPath: "enterprises/e",
		},
		{raw: "", wantErrPart: "empty"},
		{raw: "github.com/acme", wantErrPart: `start with "https://"`},
		{raw: "ftp://github.com/acme", wantErrPart: `start with "https://"`},
		{raw: "https://github.com", wantErrPart: "names no organization"},
		{raw: "https://github.com/", wantErrPart: "names no organization"},
		{raw: "https://github.com/acme?x=1", wantErrPart: "query"},
		{raw: "https://github.com/acme#frag", wantErrPart: "fragment"},
		{raw: "https://github.com/acme/app/issues", wantErrPart: "3 path segments"},
		{raw: "https://github.com/acme//app", wantErrPart: "empty path segment"},
		{raw: "https://github.com//", wantErrPart: "names no organization"},
		{raw: "https://github.com/enterprises", wantErrPart: "names no enterprise"},
		{raw: "https://github.com/acme/app.git", wantErrPart: ".git suffix"},
		{raw: "https://github.com/acme/..", wantErrPart: "not a repository name"},
		{raw: "https://github.com/-acme", wantErrPart: "must start with a letter or digit"},
		{raw: "https://github.com/ac%20me", wantErrPart: "organization"},
		{raw: "https://github.com:443/acme", wantErrPart: "takes no port"},
		{raw: "https://api.github.com/acme", wantErrPart: "not the API host"},
		{raw: "https://ghes:0/acme", wantErrPart: "port"},
		{raw: "https://ghes:70000/acme", wantErrPart: "port"},
		{raw: "https://-ghes/acme", wantErrPart: "host"},
		{raw: "https://x-access-token:ghp_SECRET@github.com/acme", wantErrPart: "credentials"},
		{raw: "https://github.com/" + strings.Repeat("a", 2048), wantErrPart: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := ParseURL(tt.raw)
			if tt.wantErrPart != "" {
				if err == nil {
					t.Fatalf("ParseURL(%q) = %+v, want an error", tt.raw, got)
				}
				if !strings.Contains(err.Error(), tt.wantErrPart) || !strings.Contains(err.Error(), "https://github.com/OWNER/REPO") {
					t.Errorf("ParseURL(%q) error = %q, want it to mention %q and show valid URLs", tt.raw, err, tt.wantErrPart)
				}
				if strings.Contains(err.Error(), "ghp_SECRET") {
					t.Errorf("ParseURL error echoes credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q) error = %v", tt.raw, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseURL(%q) (-want +got):\n%s", tt.raw, diff)
			}
			if got.APIBaseURL() != tt.wantAPI || got.Path() != tt.wantPath {
				t.Errorf("APIBaseURL(), Path() = %q, %q; want %q, %q", got.APIBaseURL(), got.Path(), tt.wantAPI, tt.wantPath)
			}
			again, err := ParseURL(got.String())
			if err != nil || again != got {
				t.Errorf("ParseURL(%q) = %+v, %v; want the same scope back", got.String(), again, err)
			}
		})
	}
}

func TestScopeRepository(t *testing.T) {
	org, _ := ParseURL("https://ghes.local/acme")
	got, err := org.Repository("app")
	want := Scope{Kind: ScopeRepository, Scheme: "https", Host: "ghes.local", Owner: "acme", Repo: "app"}
	if err != nil || got != want {
		t.Errorf("Repository(app) = %+v, %v; want %+v", got, err, want)
	}
	if _, err := org.Repository("../x"); err == nil {
		t.Errorf("Repository(../x) = nil error, want one")
	}
	ent, _ := ParseURL("https://github.com/enterprises/e")
	if _, err := ent.Repository("app"); err == nil {
		t.Errorf("enterprise Repository(app) = nil error, want one")
	}
}

// crdURLRule returns the regular expression the RunnerPool CRD enforces on github.url,
// read from the API type's CEL marker so a change there fails these tests.
func crdURLRule(tb testing.TB) *regexp.Regexp {
	tb.Helper()
	src, err := os.ReadFile("../../api/v1alpha1/runnerpool_types.go")
	if err != nil {
		tb.Fatalf("reading the CRD types: %v", err)
	}
	m := regexp.MustCompile(`self\.matches\('([^']+)'\)`).FindSubmatch(src)
	if m == nil {
		tb.Fatal("no self.matches rule for github.url in runnerpool_types.go")
	}
	// CEL string literals escape backslashes; the rule has none today.
	return regexp.MustCompile(strings.ReplaceAll(string(m[1]), `\\`, `\`))
}

// TestParseURLAgreesWithCRD checks ParseURL accepts what admission accepts, except the
// documented URLs that can never work.
func TestParseURLAgreesWithCRD(t *testing.T) {
	rule := crdURLRule(t)
	tests := []struct {
		raw       string
		wantCRD   bool
		wantParse bool
	}{
		{"https://github.com/acme", true, true},
		{"https://github.com/acme/app/", true, true},
		{"https://github.com/enterprises/e", true, true},
		{"http://127.0.0.1:8080/org", true, true},
		{"https://github.com/acme/app/x", false, false},
		{"https://github.com/acme?q", false, false},
		{"https://user@github.com/acme", false, false},
		{"HTTPS://github.com/acme", false, false},
		// Admission lets these through; they can never work.
		{"https://github.com/enterprises", true, false},
		{"https://github.com/acme/..", true, false},
		{"https://github.com/acme/app.git", true, false},
		{"https://ghes:99999/acme", true, false},
		{"https://api.github.com/acme", true, false},
	}
	for _, tt := range tests {
		if got := rule.MatchString(tt.raw); got != tt.wantCRD {
			t.Errorf("CRD rule matches %q = %v, want %v", tt.raw, got, tt.wantCRD)
		}
		if _, err := ParseURL(tt.raw); (err == nil) != tt.wantParse {
			t.Errorf("ParseURL(%q) error = %v, want success %v", tt.raw, err, tt.wantParse)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"https://github.com/acme", "https://github.com/acme/app/", "https://github.com/enterprises/e",
		"http://127.0.0.1:8080/org", "https://ghes.example.com:8443/a/b", "https://github.com//x",
		"https://www.github.com/a?b#c", "https://h:/a", "https://github.com/enterprises/",
	} {
		f.Add(s)
	}
	rule := crdURLRule(f)
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := ParseURL(raw)
		if err != nil {
			return
		}
		if !rule.MatchString(raw) {
			t.Errorf("ParseURL accepted %q, which the CRD rejects", raw)
		}
		again, err := ParseURL(s.String())
		if err != nil {
			t.Fatalf("ParseURL(%q) accepted, but its String %q fails: %v", raw, s.String(), err)
		}
		if again != s {
			t.Errorf("round trip of %q: %+v != %+v", raw, again, s)
		}
		if !strings.HasSuffix(s.APIBaseURL(), "/") || s.Path() == "" {
			t.Errorf("ParseURL(%q) gave APIBaseURL %q, Path %q", raw, s.APIBaseURL(), s.Path())
		}
	})
}
