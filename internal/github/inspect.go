package github

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	gh "github.com/google/go-github/v88/github"
)

// Inspector answers the read-only questions `gantry doctor` asks and the controllers
// never do: a scope's runner groups with their access settings, and whether a
// repository is public. The Clients NewClient builds implement it.
type Inspector interface {
	// RunnerGroups lists the runner groups of an organization or enterprise scope,
	// every page. visibleTo, if not empty, keeps only the groups GitHub lets that
	// repository (organization scope) or organization (enterprise scope) use
	// (visible_to_repository, visible_to_organization). A repository scope has only the
	// default group and makes no call. Read-only.
	RunnerGroups(ctx context.Context, scope Scope, visibleTo string) ([]RunnerGroup, error)

	// RepositoryIsPublic reports whether repository repo of an organization scope is
	// public, reading the organization's repository list (GET /orgs/{org}/repos, a call
	// per 100 repositories) until it is found. A repository it cannot see is NotFound.
	// Read-only.
	RepositoryIsPublic(ctx context.Context, org Scope, repo string) (bool, error)

	// ActionsWrite says whether the credentials may re-run workflow jobs in the scope's
	// repositories, as far as GitHub tells: a GitHub App's installation token carries
	// its permissions (actions: write), and every answer to a classic token lists its
	// scopes in X-OAuth-Scopes (repo); a fine-grained token's permissions are not told
	// (Known false). One request at most: an installation token (cached, as every call
	// uses it) or GET /rate_limit, which does not count against the rate limit.
	ActionsWrite(ctx context.Context, scope Scope) (Permission, error)
}

// Permission is what GitHub tells of one permission of the credentials.
type Permission struct {
	// Known is false when GitHub does not tell (a fine-grained token).
	Known bool
	// Granted is the answer, when Known.
	Granted bool
	// Has says what the credentials were seen to have: "actions: read", "scopes:
	// admin:org, workflow", ….
	Has string
}

// RunnerGroup is a runner group and who may use it.
type RunnerGroup struct {
	ID   int64
	Name string
	// Visibility is all, selected or private (organization groups), or all or selected
	// (enterprise groups).
	Visibility string
	Default    bool
	// Inherited is true for an enterprise group seen from an organization.
	Inherited bool
	// AllowsPublicRepositories: without it, jobs of public repositories never get a
	// runner of the group. GitHub's Default groups do not allow them unless changed.
	AllowsPublicRepositories bool
}

func (c *client) RunnerGroups(ctx context.Context, scope Scope, visibleTo string) ([]RunnerGroup, error) {
	what := fmt.Sprintf("listing runner groups in %s", scope)
	if scope.Kind == ScopeRepository {
		return []RunnerGroup{{ID: defaultRunnerGroupID, Name: "Default", Visibility: "all", Default: true, AllowsPublicRepositories: true}}, nil
	}
	h, err := c.host(scope)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out []RunnerGroup
	add := func(g *gh.RunnerGroup) {
		out = append(out, RunnerGroup{ID: g.GetID(), Name: g.GetName(), Visibility: g.GetVisibility(), Default: g.GetDefault(),
			Inherited: g.GetInherited(), AllowsPublicRepositories: g.GetAllowsPublicRepositories()})
	}
	switch scope.Kind {
	case ScopeOrganization:
		opts := &gh.ListOrgRunnerGroupOptions{ListOptions: gh.ListOptions{PerPage: perPage}, VisibleToRepository: visibleTo}
		for g, err := range h.api.Actions.ListOrganizationRunnerGroupsIter(ctx, scope.Owner, opts) {
			if err != nil {
				return nil, c.classify(err, what, nil)
			}
			add(g)
		}
	case ScopeEnterprise:
		opts := &gh.ListEnterpriseRunnerGroupOptions{ListOptions: gh.ListOptions{PerPage: perPage}, VisibleToOrganization: visibleTo}
		for g, err := range h.api.Enterprise.ListRunnerGroupsIter(ctx, scope.Enterprise, opts) {
			if err != nil {
				return nil, c.classify(err, what, nil)
			}
			add(&gh.RunnerGroup{ID: g.ID, Name: g.Name, Visibility: g.Visibility, Default: g.Default,
				Inherited: g.Inherited, AllowsPublicRepositories: g.AllowsPublicRepositories})
		}
	}
	return out, nil
}

// maxRepoPages bounds RepositoryIsPublic's reading of an organization's repositories.
const maxRepoPages = 100

func (c *client) RepositoryIsPublic(ctx context.Context, org Scope, repo string) (bool, error) {
	what := fmt.Sprintf("finding repository %s/%s", org.Owner, repo)
	if org.Kind != ScopeOrganization && org.Kind != ScopeRepository {
		return false, fmt.Errorf("%s: %s is not an organization scope", what, org)
	}
	h, err := c.host(org)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	opts := &gh.RepositoryListByOrgOptions{ListOptions: gh.ListOptions{PerPage: perPage}}
	for page := 0; page < maxRepoPages; page++ {
		repos, resp, err := h.api.Repositories.ListByOrg(ctx, org.Owner, opts)
		if err != nil {
			return false, c.classify(err, what, nil)
		}
		for _, r := range repos {
			if strings.EqualFold(r.GetName(), repo) {
				return !r.GetPrivate() && r.GetVisibility() != "internal", nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return false, NewNotFoundError(what+": not in the organization's repositories the credentials can see", nil)
}

func (c *client) ActionsWrite(ctx context.Context, scope Scope) (Permission, error) {
	what := "reading the credentials' permissions on " + scope.Host
	h, err := c.host(scope)
	if err != nil {
		return Permission{}, fmt.Errorf("%s: %w", what, err)
	}
	if h.installation != nil {
		if _, err := h.installation.Token(ctx); err != nil {
			return Permission{}, c.classify(err, what, nil)
		}
		perms, err := h.installation.Permissions()
		if err != nil {
			return Permission{}, fmt.Errorf("%s: %w", what, err)
		}
		level := perms.GetActions()
		has := "actions: " + level
		if level == "" {
			has = "no actions permission"
		}
		return Permission{Known: true, Granted: level == "write", Has: has}, nil
	}
	req, err := h.api.NewRequest(ctx, http.MethodGet, "rate_limit", nil)
	if err != nil {
		return Permission{}, err
	}
	// GHES with rate limits off answers 404; the scopes header comes with any answer.
	resp, err := h.api.Do(req, nil)
	if resp == nil {
		return Permission{}, c.classify(err, what, nil)
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return Permission{}, c.classify(err, what, nil)
	}
	scopes, classic := resp.Header[http.CanonicalHeaderKey("X-OAuth-Scopes")]
	if !classic {
		return Permission{}, nil
	}
	var list []string
	for _, v := range scopes {
		for sc := range strings.SplitSeq(v, ",") {
			if sc = strings.TrimSpace(sc); sc != "" {
				list = append(list, sc)
			}
		}
	}
	return Permission{Known: true, Granted: slices.Contains(list, "repo"), Has: "scopes: " + strings.Join(list, ", ")}, nil
}
