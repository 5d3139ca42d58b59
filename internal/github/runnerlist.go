package github

import (
	"context"
	"encoding/json"
	"fmt"

	gh "github.com/google/go-github/v88/github"
)

// runnerPage is one page of a scope's runner list as GitHub last answered it, kept to
// send its ETag back (condPage, without its body) and parsed once.
type runnerPage struct {
	condPage
	runners []Runner
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
		var prev runnerPage
		if i := len(pages); i < len(old) {
			prev = old[i]
		}
		got, notModified, err := c.getPage(ctx, h.api, fmt.Sprintf("%s?per_page=%d&page=%d", runnersPath(scope), perPage, page), what, prev.condPage)
		if err != nil {
			return nil, 0, err
		}
		p := prev
		if !notModified {
			var body gh.Runners
			if err := json.Unmarshal(got.body, &body); err != nil {
				return nil, 0, fmt.Errorf("%s: reading GitHub's answer: %w", what, err)
			}
			p = runnerPage{condPage: condPage{etag: got.etag, next: got.next}, runners: make([]Runner, 0, len(body.Runners))}
			for _, r := range body.Runners {
				p.runners = append(p.runners, toRunner(r))
			}
		}
		pages = append(pages, p)
		runners = append(runners, p.runners...)
	}
	c.mu.Lock()
	c.runnerPages[scope] = pages
	c.mu.Unlock()
	return runners, len(pages), nil
}
