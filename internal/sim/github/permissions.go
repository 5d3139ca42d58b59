package github

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
)

// GitHub App permissions: an installation is granted a level ("read" or "write") of
// each permission its App asked for, and a call made with one of its tokens that needs
// a permission it lacks is refused 403 "Resource not accessible by integration", with
// X-Accepted-GitHub-Permissions naming what the endpoint needs. The names are GitHub's
// (the keys of an installation's "permissions" object).
const (
	PermOrgSelfHostedRunners = "organization_self_hosted_runners"
	PermAdministration       = "administration"
	PermActions              = "actions"
	PermMetadata             = "metadata"
	PermOrgHooks             = "organization_hooks"
	PermRepoHooks            = "repository_hooks"
)

// knownPermissions are the permissions the simulator knows a route to need.
var knownPermissions = map[string]bool{
	PermOrgSelfHostedRunners: true, PermAdministration: true, PermActions: true,
	PermMetadata: true, PermOrgHooks: true, PermRepoHooks: true,
}

// validatePermissions checks an InstallationSpec's permissions: known names, levels
// read or write.
func validatePermissions(p map[string]string) error {
	for name, level := range p {
		if !knownPermissions[name] {
			return fmt.Errorf("unknown permission %q", name)
		}
		if level != "read" && level != "write" {
			return fmt.Errorf("permission %s: level %q, want read or write", name, level)
		}
	}
	return nil
}

// routePermission is the permission, and its level, an installation token needs for
// rt, as GitHub documents each endpoint ("" when the simulator knows none). Reads need
// read; POST and DELETE need write.
func routePermission(rt *route) (name, level string) {
	level = "read"
	if rt.method != http.MethodGet && rt.method != http.MethodHead {
		level = "write"
	}
	p := rt.pattern
	switch {
	case strings.HasPrefix(p, "/orgs/{org}/actions/runner"):
		return PermOrgSelfHostedRunners, level
	case strings.HasPrefix(p, "/repos/{owner}/{repo}/actions/runners"):
		return PermAdministration, level
	case strings.HasPrefix(p, "/repos/{owner}/{repo}/actions/"):
		return PermActions, level
	case p == "/orgs/{org}/repos":
		return PermMetadata, "read"
	case strings.HasPrefix(p, "/orgs/{org}/hooks/"):
		return PermOrgHooks, level
	case strings.HasPrefix(p, "/repos/{owner}/{repo}/hooks/"):
		return PermRepoHooks, level
	}
	return "", ""
}

// permissionDenied answers a call made with an installation token whose installation
// lacks the permission rt needs; nil when it has it, or when the installation was
// created without Permissions (it may then do everything a runner controller does).
// The caller holds s.mu.
func permissionDenied(in *installation, rt *route) *apiError {
	if in.permissions == nil {
		return nil
	}
	name, level := routePermission(rt)
	if name == "" {
		return nil
	}
	switch in.permissions[name] {
	case "write":
		return nil
	case "read":
		if level == "read" {
			return nil
		}
	}
	e := newError(http.StatusForbidden, msgIntegration)
	e.header = map[string]string{"X-Accepted-GitHub-Permissions": name + "=" + level}
	return e
}

// grantedPermissions copies an InstallationSpec's permissions for the installation.
func grantedPermissions(p map[string]string) map[string]string {
	if p == nil {
		return nil
	}
	return maps.Clone(p)
}
