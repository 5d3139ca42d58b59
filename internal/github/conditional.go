package github

import (
	"bytes"
	"context"
	"errors"
	"net/http"

	gh "github.com/google/go-github/v88/github"
)

// condPage is one page of a list as GitHub last answered it 200: its ETag, body and the
// next page's number (0 on the last page). Sent back as If-None-Match, the ETag makes
// GitHub answer an unchanged page 304 Not Modified, which does not count against the
// rate limit.
type condPage struct {
	etag string
	body []byte
	next int
}

// getPage GETs one page of path (relative to the API base). When prev has an ETag the
// request is conditional, and a 304 returns prev itself with notModified true.
func (c *client) getPage(ctx context.Context, api *gh.Client, path, what string, prev condPage) (page condPage, notModified bool, err error) {
	req, err := api.NewRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return condPage{}, false, err
	}
	if prev.etag != "" {
		req.Header.Set("If-None-Match", prev.etag)
	}
	var body bytes.Buffer
	resp, err := api.Do(req, &body)
	if resp != nil && resp.StatusCode == http.StatusNotModified && prev.etag != "" {
		_ = resp.Body.Close()
		return prev, true, nil
	}
	if err != nil {
		if er, ok := errors.AsType[*gh.ErrorResponse](err); ok && er.Response != nil && er.Response.StatusCode == http.StatusNotModified {
			err = errors.New("GitHub answered 304 Not Modified to a request without If-None-Match")
		}
		return condPage{}, false, c.classify(err, what, nil)
	}
	return condPage{etag: resp.Header.Get("ETag"), body: body.Bytes(), next: resp.NextPage}, false, nil
}
