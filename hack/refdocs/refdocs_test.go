package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMarker(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    Marker
		wantErr bool
	}{
		{line: "+optional", want: Marker{Name: "optional"}},
		{line: "+listType=set", want: Marker{Name: "listType", Value: "set"}},
		{line: `+kubebuilder:default="10m"`, want: Marker{Name: "kubebuilder:default", Value: "10m"}},
		{line: "+kubebuilder:default={}", want: Marker{Name: "kubebuilder:default", Value: "{}"}},
		{line: "+kubebuilder:validation:Enum=JIT;RegistrationToken", want: Marker{Name: "kubebuilder:validation:Enum", Value: "JIT;RegistrationToken"}},
		{
			line: `+kubebuilder:validation:XValidation:rule="self.spec.containers.exists(c, c.name == 'runner')",message="must include a container named \"runner\": it runs the agent"`,
			want: Marker{Name: "kubebuilder:validation:XValidation", Args: []Arg{
				{"rule", "self.spec.containers.exists(c, c.name == 'runner')"},
				{"message", `must include a container named "runner": it runs the agent`},
			}},
		},
		{
			line: "+kubebuilder:printcolumn:name=\"Ready\",type=string,JSONPath=`.status.conditions[?(@.type==\"Ready\")].status`,priority=1",
			want: Marker{Name: "kubebuilder:printcolumn", Args: []Arg{
				{"name", "Ready"}, {"type", "string"}, {"JSONPath", `.status.conditions[?(@.type=="Ready")].status`}, {"priority", "1"},
			}},
		},
		{
			line: "+kubebuilder:resource:shortName=rp;rpool,categories=gantry",
			want: Marker{Name: "kubebuilder:resource", Args: []Arg{{"shortName", "rp;rpool"}, {"categories", "gantry"}}},
		},
		{line: `+kubebuilder:validation:XValidation:rule="unterminated`, wantErr: true},
		{line: `+kubebuilder:printcolumn:name="A"type=string`, wantErr: true},
		{line: `+kubebuilder:printcolumn:name="A",`, wantErr: true},
		{line: `+kubebuilder:default="10m"x`, wantErr: true},
	} {
		got, err := ParseMarker(tc.line)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseMarker(%q) = %+v, want an error", tc.line, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseMarker(%q): %v", tc.line, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseMarker(%q) (-want +got):\n%s", tc.line, diff)
		}
	}
}

// The checked-in reference is what the generator writes from the API types today
// (`make verify` checks the same after `make generate`; this catches it in `make test`).
func TestReferenceIsCurrent(t *testing.T) {
	pkg, err := Load("../../api/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Render(pkg, []string{"RunnerPool", "Runner"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/reference/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/reference/api.md is stale; run `make generate` (-generated +checked in):\n%s", diff)
	}
}

// What a reader looks the reference up for is in it: every field's JSON name, every
// default, every CEL message, every printer column and every enumeration value.
func TestReferenceCoversTheAPI(t *testing.T) {
	pkg, err := Load("../../api/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(pkg, []string{"RunnerPool", "Runner"})
	if err != nil {
		t.Fatal(err)
	}
	doc := string(out)
	var want []string
	for _, name := range []string{"RunnerPool", "RunnerPoolSpec", "GitHubSpec", "RecoverySpec", "RunnerPoolStatus", "Runner", "RunnerStatus", "RegistrationMode", "RunnerPhase"} {
		if pkg.Types[name] == nil {
			t.Fatalf("the API has no type %s: update this test", name)
		}
		want = append(want, "# "+name+"\n")
	}
	for _, typ := range pkg.Types {
		if strings.HasSuffix(typ.Name, "List") {
			continue // RunnerPoolList and RunnerList are what `kubectl get` returns, not documented
		}
		for _, m := range typ.Markers {
			if m.Name == "kubebuilder:printcolumn" {
				n, _ := m.Arg("name")
				want = append(want, "| "+strings.ToUpper(n)+" |")
			}
			if m.Name == "kubebuilder:validation:XValidation" {
				msg, _ := m.Arg("message")
				want = append(want, cell(msg))
			}
		}
		for _, v := range typ.Values {
			want = append(want, "`"+v.Value+"`")
		}
		for _, f := range typ.Fields {
			if f.Inline {
				continue
			}
			want = append(want, "| `"+f.JSON+"` |")
			for _, m := range Find(f.Markers, "kubebuilder:default") {
				want = append(want, code(m.Value))
			}
			for _, m := range Find(f.Markers, "kubebuilder:validation:XValidation") {
				msg, _ := m.Arg("message")
				want = append(want, cell(msg))
			}
		}
	}
	for _, w := range want {
		if !strings.Contains(doc, w) {
			t.Errorf("the reference lacks %q", w)
		}
	}
	for _, w := range []string{"`rp`, `rpool`", "| `minIdle` | integer, optional | `0` | ≥ 0 |", "| `pendingTimeout` | duration", "`10m`"} {
		if !strings.Contains(doc, w) {
			t.Errorf("the reference lacks %q", w)
		}
	}
}
