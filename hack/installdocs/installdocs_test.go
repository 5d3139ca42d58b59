package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestReachOf(t *testing.T) {
	tests := []struct {
		name                      string
		group, resource, verb, ns string
		want                      where
	}{
		{"namespaced resource, cluster binding", "", "pods", "list", "", where{reach: everyNamespace}},
		{"cluster-scoped resource, cluster binding", "", "namespaces", "delete", "", where{reach: clusterWide}},
		{"namespaced resource in a Role", "gantry.dev", "runners/status", "patch", "ci", where{reach: inNamespace, ns: "ci"}},
		{"a namespace's own object, by name", "", "namespaces", "delete", "ci", where{reach: namespaceItself, ns: "ci"}},
		{"namespaces create in a Role grants nothing", "", "namespaces", "create", "ci", where{reach: noEffect, ns: "ci"}},
		{"namespaces list in a Role grants nothing", "", "namespaces", "list", "ci", where{reach: noEffect, ns: "ci"}},
		{"bind a ClusterRole in a Role: in that namespace's RoleBindings", "rbac.authorization.k8s.io", "clusterroles", "bind", "ci", where{reach: bindIn, ns: "ci"}},
		{"nodes in a Role grant nothing", "", "nodes", "get", "ci", where{reach: noEffect, ns: "ci"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reachOf(tc.group, tc.resource, tc.verb, tc.ns)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(where{})); diff != "" {
				t.Errorf("reachOf (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := reachOf("example.com", "widgets", "get", ""); err == nil {
		t.Error("a resource of unknown scope was accepted: the generator must be told, not guess")
	}
}

func TestDescribeReach(t *testing.T) {
	tests := []struct {
		in   []where
		want string
	}{
		{nil, "—"},
		{[]where{{reach: clusterWide}}, "**cluster-wide**"},
		{[]where{{reach: everyNamespace}, {reach: inNamespace, ns: "gantry-system"}}, "every namespace"},
		{[]where{{reach: inNamespace, ns: "b"}, {reach: inNamespace, ns: "a"}}, "`a`, `b`"},
		{[]where{{reach: namespaceItself, ns: "ci"}}, "the namespace `ci` itself"},
		{[]where{{reach: noEffect, ns: "a"}, {reach: noEffect, ns: "b"}}, "none (a Role cannot grant it)"},
		{[]where{{reach: bindIn, ns: "a"}}, "in RoleBindings of `a`"},
	}
	for _, tc := range tests {
		if got := describeReach(tc.in); got != tc.want {
			t.Errorf("describeReach(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func objects(t *testing.T, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// An install that grants namespaces create and delete cluster-wide shows it in the
// table: what the hand-written table once left out.
func TestRightsTableShowsClusterWideNamespaceRights(t *testing.T) {
	objs := objects(t,
		`{apiVersion: v1, kind: ServiceAccount, metadata: {name: c, namespace: sys}}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: m}, rules: [
		  {apiGroups: [""], resources: [namespaces], verbs: [create, delete]},
		  {apiGroups: [""], resources: [pods], verbs: [get]}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: m},
		  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: m},
		  subjects: [{kind: ServiceAccount, name: c, namespace: sys}]}`,
		// Bound to someone else: not the install's rights.
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: other},
		  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: m},
		  subjects: [{kind: User, name: jane}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r, namespace: ci}, rules: [
		  {apiGroups: [""], resources: [namespaces], verbs: [create, delete]}]}`,
	)
	cluster, err := boundRights(objs[:4])
	if err != nil {
		t.Fatal(err)
	}
	namespaced := objects(t,
		`{apiVersion: v1, kind: ServiceAccount, metadata: {name: c, namespace: sys}}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: r, namespace: ci}, rules: [
		  {apiGroups: [""], resources: [namespaces], verbs: [create, delete]},
		  {apiGroups: [""], resources: [pods], verbs: [get]}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: r, namespace: ci},
		  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r},
		  subjects: [{kind: ServiceAccount, name: c, namespace: sys}]}`,
	)
	inCI, err := boundRights(namespaced)
	if err != nil {
		t.Fatal(err)
	}
	got := rightsSection([]renderedInstall{
		{install: install{column: "wide"}, rights: cluster},
		{install: install{column: "ci"}, rights: inCI},
	})
	want := "| resource | verbs | wide | ci |\n" +
		"| --- | --- | --- | --- |\n" +
		"| `namespaces`, cluster-scoped | create | **cluster-wide** | none (a Role cannot grant it) |\n" +
		"| `namespaces`, cluster-scoped | delete | **cluster-wide** | the namespace `ci` itself |\n" +
		"| `pods` | get | every namespace | `ci` |\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rightsSection (-want +got):\n%s", diff)
	}
}

func TestBoundRightsRefuses(t *testing.T) {
	sa := `{apiVersion: v1, kind: ServiceAccount, metadata: {name: c, namespace: sys}}`
	binding := `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: m},
	  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: m},
	  subjects: [{kind: ServiceAccount, name: c, namespace: sys}]}`
	for name, role := range map[string]string{
		"a wildcard":          `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: m}, rules: [{apiGroups: [""], resources: ["*"], verbs: [get]}]}`,
		"an unknown resource": `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: m}, rules: [{apiGroups: [example.com], resources: [widgets], verbs: [get]}]}`,
		"a missing role":      `{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: not-m}, rules: []}`,
	} {
		if _, err := boundRights(objects(t, sa, role, binding)); err == nil {
			t.Errorf("%s: boundRights accepted it", name)
		}
	}
}

func TestSplice(t *testing.T) {
	doc := "intro\n<!-- BEGIN GENERATED installdocs:a (make generate) -->\nold\n<!-- END GENERATED installdocs:a -->\nend\n"
	got, err := splice(doc, map[string]string{"a": "new\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := "intro\n<!-- BEGIN GENERATED installdocs:a (make generate) -->\nnew\n<!-- END GENERATED installdocs:a -->\nend\n"
	if got != want {
		t.Errorf("splice = %q, want %q", got, want)
	}
	for name, tc := range map[string]struct {
		doc      string
		sections map[string]string
	}{
		"a section without markers": {"intro\n", map[string]string{"a": "x"}},
		"a marker nobody writes":    {doc, map[string]string{}},
		"unpaired":                  {"<!-- BEGIN GENERATED installdocs:a -->\n", map[string]string{"a": "x"}},
		"crossed": {"<!-- BEGIN GENERATED installdocs:a -->\n<!-- END GENERATED installdocs:b -->\n",
			map[string]string{"a": "x", "b": "y"}},
	} {
		if _, err := splice(tc.doc, tc.sections); err == nil {
			t.Errorf("%s: splice accepted it", name)
		}
	}
}
