package main

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// right is one verb on one resource (resource or resource/subresource) of an API group,
// limited to names when the rule has resourceNames.
type right struct {
	Group, Resource, Names, Verb string
}

// reach says how far a right bound to the controller goes.
type reach int

const (
	// clusterWide: a cluster-scoped resource, through a ClusterRoleBinding.
	clusterWide reach = iota
	// everyNamespace: a namespaced resource, through a ClusterRoleBinding.
	everyNamespace
	// inNamespace: a namespaced resource, through a RoleBinding in ns.
	inNamespace
	// namespaceItself: the Namespace object ns, through a RoleBinding in ns: the API
	// server authorizes a request on namespace ns (get, update, patch, delete) in ns.
	namespaceItself
	// bindIn: bind a ClusterRole with RoleBindings in ns: the API server checks `bind`
	// on the ClusterRole in the RoleBinding's namespace.
	bindIn
	// noEffect: any other cluster-scoped resource in a RoleBinding: it grants nothing.
	noEffect
)

type where struct {
	reach reach
	ns    string
}

// namedVerbs are the verbs whose requests name one object: on a namespace, the API
// server evaluates them in that namespace.
var namedVerbs = map[string]bool{"get": true, "update": true, "patch": true, "delete": true}

// resourceNamespaced says whether a resource (GROUP/RESOURCE, core as /RESOURCE) is
// namespaced. A right on a resource not listed here stops the generator, which must be
// told before it can say what the right reaches.
var resourceNamespaced = map[string]bool{
	"/pods": true, "/secrets": true, "/configmaps": true, "/serviceaccounts": true, "/events": true,
	"/persistentvolumeclaims": true, "/services": true, "/endpoints": true,
	"/namespaces": false, "/nodes": false, "/persistentvolumes": false,
	"apps/deployments": true, "apps/replicasets": true,
	"policy/poddisruptionbudgets": true,
	"coordination.k8s.io/leases":  true,
	"events.k8s.io/events":        true,
	"gantry.dev/runnerpools":      true, "gantry.dev/runners": true,
	"networking.k8s.io/networkpolicies": true, "networking.k8s.io/ingresses": true,
	"discovery.k8s.io/endpointslices":                                true,
	"rbac.authorization.k8s.io/roles":                                true,
	"rbac.authorization.k8s.io/rolebindings":                         true,
	"rbac.authorization.k8s.io/clusterroles":                         false,
	"rbac.authorization.k8s.io/clusterrolebindings":                  false,
	"storage.k8s.io/storageclasses":                                  false,
	"apiextensions.k8s.io/customresourcedefinitions":                 false,
	"admissionregistration.k8s.io/validatingadmissionpolicies":       false,
	"admissionregistration.k8s.io/validatingadmissionpolicybindings": false,
	"authorization.k8s.io/selfsubjectaccessreviews":                  false,
}

// isClusterScoped reports whether group/resource (a subresource counts as its resource)
// is cluster-scoped.
func isClusterScoped(group, resource string) (bool, error) {
	base, _, _ := strings.Cut(resource, "/")
	ns, ok := resourceNamespaced[group+"/"+base]
	if !ok {
		return false, fmt.Errorf("a right on %q of API group %q: hack/installdocs does not know whether it is namespaced (add it to resourceNamespaced)", base, group)
	}
	return !ns, nil
}

// reachOf is how far a verb on group/resource goes when a binding grants it, in ns for
// a RoleBinding ("" for a ClusterRoleBinding).
func reachOf(group, resource, verb, ns string) (where, error) {
	cluster, err := isClusterScoped(group, resource)
	if err != nil {
		return where{}, err
	}
	base, _, _ := strings.Cut(resource, "/")
	switch {
	case ns == "" && cluster:
		return where{reach: clusterWide}, nil
	case ns == "":
		return where{reach: everyNamespace}, nil
	case !cluster:
		return where{reach: inNamespace, ns: ns}, nil
	case group == "" && base == "namespaces" && namedVerbs[verb]:
		return where{reach: namespaceItself, ns: ns}, nil
	case group == rbacv1.GroupName && base == "clusterroles" && (verb == "bind" || verb == "escalate"):
		return where{reach: bindIn, ns: ns}, nil
	}
	return where{reach: noEffect, ns: ns}, nil
}

// boundRights collects every right that the install's RoleBindings and
// ClusterRoleBindings give a ServiceAccount the install creates (the controller's),
// with how far each goes.
func boundRights(objs []*unstructured.Unstructured) (map[right][]where, error) {
	accounts := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() == "ServiceAccount" {
			accounts[o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	if len(accounts) == 0 {
		return nil, fmt.Errorf("the install creates no ServiceAccount")
	}
	ours := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && accounts[s.Namespace+"/"+s.Name]
		})
	}
	rulesOf := func(ref rbacv1.RoleRef, ns string) ([]rbacv1.PolicyRule, error) {
		for _, o := range objs {
			switch {
			case ref.Kind == "ClusterRole" && o.GetKind() == "ClusterRole" && o.GetName() == ref.Name:
				var r rbacv1.ClusterRole
				return r.Rules, fromUnstructured(o, &r)
			case ref.Kind == "Role" && o.GetKind() == "Role" && o.GetName() == ref.Name && o.GetNamespace() == ns:
				var r rbacv1.Role
				return r.Rules, fromUnstructured(o, &r)
			}
		}
		return nil, fmt.Errorf("a binding names %s %s, which the install does not create", ref.Kind, ref.Name)
	}
	out := map[right][]where{}
	add := func(rules []rbacv1.PolicyRule, ns string) error {
		for _, r := range rules {
			if len(r.NonResourceURLs) > 0 {
				return fmt.Errorf("a rule grants non-resource URLs %v: say what it reaches", r.NonResourceURLs)
			}
			names := strings.Join(r.ResourceNames, ", ")
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if g == "*" || res == "*" || v == "*" {
							return fmt.Errorf("a rule grants a wildcard (%q %q %q): list what it grants", g, res, v)
						}
						w, err := reachOf(g, res, v, ns)
						if err != nil {
							return err
						}
						k := right{Group: g, Resource: res, Names: names, Verb: v}
						if !slices.Contains(out[k], w) {
							out[k] = append(out[k], w)
						}
					}
				}
			}
		}
		return nil
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := fromUnstructured(o, &b); err != nil {
				return nil, err
			}
			if !ours(b.Subjects) {
				continue
			}
			rules, err := rulesOf(b.RoleRef, "")
			if err == nil {
				err = add(rules, "")
			}
			if err != nil {
				return nil, fmt.Errorf("ClusterRoleBinding %s: %w", b.Name, err)
			}
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := fromUnstructured(o, &b); err != nil {
				return nil, err
			}
			if !ours(b.Subjects) {
				continue
			}
			rules, err := rulesOf(b.RoleRef, b.Namespace)
			if err == nil {
				err = add(rules, b.Namespace)
			}
			if err != nil {
				return nil, fmt.Errorf("RoleBinding %s/%s: %w", b.Namespace, b.Name, err)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no binding gives the install's ServiceAccount any right")
	}
	return out, nil
}

func fromUnstructured(o *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// describeReach says in words how far a right goes in one install: "every namespace",
// "`ci`, `ci-gpu`", "none (…)". A wider reach makes a narrower one of the same right
// redundant and drops it.
func describeReach(ws []where) string {
	has := func(r reach) bool { return slices.ContainsFunc(ws, func(w where) bool { return w.reach == r }) }
	nsOf := func(r reach) []string {
		var out []string
		for _, w := range ws {
			if w.reach == r && !slices.Contains(out, w.ns) {
				out = append(out, w.ns)
			}
		}
		slices.Sort(out)
		for i, n := range out {
			out[i] = "`" + n + "`"
		}
		return out
	}
	var parts []string
	switch {
	case has(clusterWide):
		parts = append(parts, "**cluster-wide**")
	case has(everyNamespace):
		parts = append(parts, "every namespace")
	}
	if !has(clusterWide) && !has(everyNamespace) {
		if ns := nsOf(inNamespace); len(ns) > 0 {
			parts = append(parts, strings.Join(ns, ", "))
		}
	}
	if !has(clusterWide) {
		if ns := nsOf(namespaceItself); len(ns) == 1 {
			parts = append(parts, "the namespace "+ns[0]+" itself")
		} else if len(ns) > 1 {
			parts = append(parts, "the namespaces "+strings.Join(ns, ", ")+" themselves")
		}
		if ns := nsOf(bindIn); len(ns) > 0 {
			parts = append(parts, "in RoleBindings of "+strings.Join(ns, ", "))
		}
		if len(parts) == 0 && has(noEffect) {
			parts = append(parts, "none (a Role cannot grant it)")
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}
