// Conditional requests: GitHub answers a REST GET with an ETag, and a request whose
// If-None-Match names the current one gets 304 Not Modified with no body. A 304 does not
// count against the primary rate limit, which is what lets a poller ask often.

package github

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// condWriter holds a GET's answer until the handler is done, so that its ETag can be
// computed and compared.
type condWriter struct {
	w      http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (cw *condWriter) Header() http.Header { return cw.w.Header() }

func (cw *condWriter) WriteHeader(code int) {
	if cw.status == 0 {
		cw.status = code
	}
}

func (cw *condWriter) Write(b []byte) (int, error) {
	if cw.status == 0 {
		cw.status = http.StatusOK
	}
	return cw.body.Write(b)
}

// etagOf is a weak validator of an answer's body, in GitHub's form.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `W/"` + hex.EncodeToString(sum[:16]) + `"`
}

// matchesNoneMatch reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 asks for If-None-Match) or is "*".
func matchesNoneMatch(header, etag string) bool {
	for v := range strings.SplitSeq(header, ",") {
		v = strings.TrimSpace(v)
		if v == "*" || strings.TrimPrefix(v, "W/") == strings.TrimPrefix(etag, "W/") {
			return true
		}
	}
	return false
}

// flush sends the held answer. A 200 gets its ETag; when the request already names it,
// the answer is 304 with no body instead, and notModified is called first (to give the
// call back to the rate limit).
func (cw *condWriter) flush(r *http.Request, notModified func()) {
	h := cw.w.Header()
	if cw.status == http.StatusOK {
		etag := etagOf(cw.body.Bytes())
		h.Set("ETag", etag)
		if inm := r.Header.Get("If-None-Match"); inm != "" && matchesNoneMatch(inm, etag) {
			notModified()
			h.Del("Content-Type")
			h.Del("Content-Length")
			cw.w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if cw.status == 0 {
		cw.status = http.StatusOK
	}
	cw.w.WriteHeader(cw.status)
	_, _ = cw.w.Write(cw.body.Bytes())
}
