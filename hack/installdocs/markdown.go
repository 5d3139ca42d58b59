package main

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderedInstall is an install as rendered, with the rights it binds.
type renderedInstall struct {
	install
	objs   []*unstructured.Unstructured
	rights map[right][]where
}

// clusterScopedKinds are the kinds the installs render that have no namespace.
var clusterScopedKinds = map[string]bool{
	"CustomResourceDefinition": true, "Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true, "ValidatingWebhookConfiguration": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true, "StorageClass": true, "PriorityClass": true,
}

// releaseNamespace is where helm puts a rendered object that names no namespace.
const releaseNamespace = "gantry-system"

// objectsByNamespace groups objects by namespace ("" for cluster-scoped), then kind.
func objectsByNamespace(objs []*unstructured.Unstructured) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for _, o := range objs {
		ns := o.GetNamespace()
		if clusterScopedKinds[o.GetKind()] {
			ns = ""
		} else if ns == "" {
			ns = releaseNamespace
		}
		if out[ns] == nil {
			out[ns] = map[string][]string{}
		}
		out[ns][o.GetKind()] = append(out[ns][o.GetKind()], o.GetName())
	}
	return out
}

// kindList writes "`Kind` a, b; `Other` c", kinds and names sorted.
func kindList(byKind map[string][]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		names := slices.Clone(byKind[k])
		slices.Sort(names)
		parts = append(parts, "`"+k+"` "+strings.Join(names, ", "))
	}
	return strings.Join(parts, "; ")
}

// objectsSection lists what each install creates, cluster-scoped objects first.
func objectsSection(rs []renderedInstall) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s creates:\n\n", upperFirst(r.title))
		byNS := objectsByNamespace(r.objs)
		if c, ok := byNS[""]; ok {
			fmt.Fprintf(&b, "- cluster-scoped: %s\n", kindList(c))
		}
		for _, ns := range slices.Sorted(maps.Keys(byNS)) {
			if ns != "" {
				fmt.Fprintf(&b, "- in `%s`: %s\n", ns, kindList(byNS[ns]))
			}
		}
	}
	return b.String()
}

func upperFirst(s string) string {
	if s == "" || s[0] == '`' {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// resourceKey is a row's resource: an API group's resource, limited to names or not.
type resourceKey struct{ Group, Resource, Names string }

func (k resourceKey) String() string {
	s := "`" + k.Resource + "`"
	if k.Group != "" {
		s += " (" + k.Group + ")"
	}
	if k.Names != "" {
		s += " named `" + k.Names + "`"
	}
	return s
}

// rightsRows groups the rights of all installs into rows: per resource, the verbs whose
// reach is the same in every install. Cluster-scoped resources come first.
func rightsRows(rs []renderedInstall) [][]string {
	verbs := map[resourceKey][]string{}
	for _, r := range rs {
		for k := range r.rights {
			rk := resourceKey{k.Group, k.Resource, k.Names}
			if !slices.Contains(verbs[rk], k.Verb) {
				verbs[rk] = append(verbs[rk], k.Verb)
			}
		}
	}
	keys := slices.Collect(maps.Keys(verbs))
	slices.SortFunc(keys, func(a, b resourceKey) int {
		ca, _ := isClusterScoped(a.Group, a.Resource)
		cb, _ := isClusterScoped(b.Group, b.Resource)
		if ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Names, b.Names))
	})
	var rows [][]string
	for _, k := range keys {
		vs := verbs[k]
		slices.Sort(vs)
		// Verbs with the same reach in every install share a row, in the order of
		// their first verb.
		var order []string
		group := map[string][]string{}
		cells := map[string][]string{}
		for _, v := range vs {
			var c []string
			for _, r := range rs {
				c = append(c, describeReach(r.rights[right{k.Group, k.Resource, k.Names, v}]))
			}
			sig := strings.Join(c, "\x00")
			if _, ok := group[sig]; !ok {
				order = append(order, sig)
				cells[sig] = c
			}
			group[sig] = append(group[sig], v)
		}
		label := k.String()
		if c, _ := isClusterScoped(k.Group, k.Resource); c {
			label += ", cluster-scoped"
		}
		for _, sig := range order {
			rows = append(rows, append([]string{label, strings.Join(group[sig], ", ")}, cells[sig]...))
		}
	}
	return rows
}

// rightsSection is the table of every right each install binds to the controller.
func rightsSection(rs []renderedInstall) string {
	var b strings.Builder
	header := []string{"resource", "verbs"}
	for _, r := range rs {
		header = append(header, r.column)
	}
	writeRow(&b, header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	writeRow(&b, sep)
	for _, row := range rightsRows(rs) {
		writeRow(&b, row)
	}
	return b.String()
}

func writeRow(b *strings.Builder, cells []string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

// namespacedSection says what the chart with watchNamespaces still creates and grants
// outside the watched namespaces: its cluster-scoped objects (with and without the
// container hook's), whether any right reaches every namespace or the cluster, and what
// its Roles' rules on cluster-scoped resources reach.
func namespacedSection(r renderedInstall, noHooks []*unstructured.Unstructured) string {
	type group struct {
		key   resourceKey
		reach string
	}
	verbs := map[group][]string{}
	for k, ws := range r.rights {
		cluster, _ := isClusterScoped(k.Group, k.Resource)
		wide := slices.ContainsFunc(ws, func(w where) bool { return w.reach == everyNamespace || w.reach == clusterWide })
		if !cluster && !wide {
			continue
		}
		g := group{resourceKey{k.Group, k.Resource, k.Names}, describeReach(ws)}
		verbs[g] = append(verbs[g], k.Verb)
	}
	var wide, reached, nothing []string
	for _, g := range slices.SortedFunc(maps.Keys(verbs), func(a, b group) int {
		return cmp.Or(cmp.Compare(a.key.String(), b.key.String()), cmp.Compare(a.reach, b.reach))
	}) {
		vs := verbs[g]
		slices.Sort(vs)
		line := fmt.Sprintf("%s: %s", g.key, strings.Join(vs, ", "))
		switch {
		case strings.Contains(g.reach, "cluster-wide") || strings.Contains(g.reach, "every namespace"):
			wide = append(wide, line+" ("+g.reach+")")
		case strings.HasPrefix(g.reach, "none"):
			nothing = append(nothing, line)
		default:
			reached = append(reached, "- "+line+" — "+g.reach)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "With `watchNamespaces: [%s]`", strings.Join(watched, ", "))
	if len(wide) == 0 {
		b.WriteString(" the chart binds the controller to no ClusterRole: a Role and RoleBinding in each watched namespace hold the generated rules, and one in the release namespace leader election.")
	} else {
		fmt.Fprintf(&b, " the chart still grants beyond the watched namespaces: %s.", strings.Join(wide, "; "))
	}
	if len(reached) > 0 {
		b.WriteString(" Of the generated rules on cluster-scoped resources, the Roles give the controller these:\n\n")
		b.WriteString(strings.Join(reached, "\n") + "\n\n")
	} else {
		b.WriteString("\n\n")
	}
	if len(nothing) > 0 {
		fmt.Fprintf(&b, "and nothing of the others (%s): a Role cannot grant them.\n\n", strings.Join(nothing, "; "))
	}
	b.WriteString("It still creates these cluster-scoped objects, which the installing user needs the right to create:\n\n")
	fmt.Fprintf(&b, "- %s\n", kindList(objectsByNamespace(r.objs)[""]))
	fmt.Fprintf(&b, "- with `containerHooks.enabled: false`: %s\n", kindList(objectsByNamespace(noHooks)[""]))
	return b.String()
}

var markerRE = regexp.MustCompile(`(?m)^<!-- (BEGIN|END) GENERATED installdocs:([a-z-]+)(?: \(make generate\))? -->\n`)

// splice replaces the text between each section's BEGIN and END markers. Every section
// given must be in the document, once, and every marker of the document must be given.
func splice(doc string, sections map[string]string) (string, error) {
	ms := markerRE.FindAllStringSubmatchIndex(doc, -1)
	if len(ms)%2 != 0 {
		return "", fmt.Errorf("unpaired installdocs markers")
	}
	seen := map[string]bool{}
	var b strings.Builder
	last := 0
	for i := 0; i < len(ms); i += 2 {
		begin, end := ms[i], ms[i+1]
		kb, name := doc[begin[2]:begin[3]], doc[begin[4]:begin[5]]
		ke, nameEnd := doc[end[2]:end[3]], doc[end[4]:end[5]]
		if kb != "BEGIN" || ke != "END" || name != nameEnd {
			return "", fmt.Errorf("installdocs markers out of order at %q", name)
		}
		text, ok := sections[name]
		if !ok {
			return "", fmt.Errorf("a marker names section %q, which installdocs does not write", name)
		}
		if seen[name] {
			return "", fmt.Errorf("section %q is marked twice", name)
		}
		seen[name] = true
		b.WriteString(doc[last:begin[1]])
		b.WriteString(text)
		last = end[0]
	}
	b.WriteString(doc[last:])
	for name := range sections {
		if !seen[name] {
			return "", fmt.Errorf("no markers for section %q: add <!-- BEGIN GENERATED installdocs:%s (make generate) --> and <!-- END GENERATED installdocs:%s --> on lines of their own", name, name, name)
		}
	}
	return b.String(), nil
}
