package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	gh "github.com/google/go-github/v88/github"
)

// runnerPage is one page of a scope's runner list as GitHub last answered it, kept to
// send its ETag back: GitHub answers an unchanged page 304 Not Modified, which does not
// count against the rate limit.
type runnerPage struct {
	etag    string
	runners []Runner
	next    int
}

// runnersPath is the runner list of a scope, relative to the API base.
func runnersPath(scope Scope) string {
	switch scope.Kind {
	case ScopeRepository:
		return fmt.Sprintf("repos/%s/%s/actions/runners", scope.Owner, scope.Repo)
	case ScopeEnterprise:
		return fmt.Sprintf("enterprises/%s/actions/runners", scope.Enterprise)
	}
	return fmt.Sprintf("orgs/%s/actions/runners", scope.Owner)
}

func (c *client) ListAllRunners(ctx context.Context, scope Scope) ([]Runner, int, error) {
	what := fmt.Sprintf("listing the runners of %s", scope)
	h, err := c.host(scope)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	c.mu.Lock()
	old := c.runnerPages[scope]
	c.mu.Unlock()

	var pages []runnerPage
	runners := []Runner{}
	for page := 1; page > 0; page = pages[len(pages)-1].next {
		req, err := h.api.NewRequest(ctx, http.MethodGet, fmt.Sprintf("%s?per_page=%d&page=%d", runnersPath(scope), perPage, page), nil)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", what, err)
		}
		var prev *runnerPage
		if i := len(pages); i < len(old) && old[i].etag != "" {
			prev = &old[i]
			req.Header.Set("If-None-Match", prev.etag)
		}
		var body gh.Runners
		resp, err := h.api.Do(req, &body)
		if resp != nil && resp.StatusCode == http.StatusNotModified && prev != nil {
			_ = resp.Body.Close()
			pages = append(pages, *prev)
			runners = append(runners, prev.runners...)
			continue
		}
		if err != nil {
			if er, ok := errors.AsType[*gh.ErrorResponse](err); ok && er.Response != nil && er.Response.StatusCode == http.StatusNotModified {
				err = errors.New("GitHub answered 304 Not Modified to a request without If-None-Match")
			}
			return nil, 0, c.classify(err, what, nil)
		}
		p := runnerPage{etag: resp.Header.Get("ETag"), next: resp.NextPage, runners: make([]Runner, 0, len(body.Runners))}
		for _, r := range body.Runners {
			p.runners = append(p.runners, toRunner(r))
		}
		pages = append(pages, p)
		runners = append(runners, p.runners...)
	}
	c.mu.Lock()
	c.runnerPages[scope] = pages
	c.mu.Unlock()
	return runners, len(pages), nil
}
