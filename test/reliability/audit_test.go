package reliability

import (
	"encoding/json"
	"fmt"
	"sort"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the RBAC checks read.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// permission is one (API group, resource[/subresource], verb).
type permission struct{ Group, Resource, Verb string }

func (p permission) String() string {
	g := p.Group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s/%s", p.Verb, g, p.Resource)
}

// auditOf returns, for the requests user made (as an impersonated ServiceAccount):
// the permissions used, the requests RBAC refused, and how many events were read.
func auditOf(user string) (used map[permission]int, forbidden []string, events int, err error) {
	lines, err := readLines(cp.auditLog)
	if err != nil {
		return nil, nil, 0, err
	}
	used = map[permission]int{}
	for _, l := range lines {
		var ev auditEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			return nil, nil, 0, fmt.Errorf("reading the audit log: %w", err)
		}
		if ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != user || ev.ObjectRef == nil {
			continue
		}
		if ev.Stage != "ResponseComplete" && ev.Stage != "ResponseStarted" {
			continue
		}
		events++
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		p := permission{Group: ev.ObjectRef.APIGroup, Resource: res, Verb: ev.Verb}
		if ev.Annotations["authorization.k8s.io/decision"] == "forbid" {
			forbidden = append(forbidden, fmt.Sprintf("%s %s/%s", p, ev.ObjectRef.Namespace, ev.ObjectRef.Name))
			continue
		}
		used[p]++
	}
	sort.Strings(forbidden)
	return used, forbidden, events, nil
}

// granted lists every permission the generated ClusterRole grants.
func granted() map[permission]bool {
	out := map[permission]bool{}
	for _, r := range cp.role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[permission{Group: g, Resource: res, Verb: v}] = true
				}
			}
		}
	}
	return out
}
