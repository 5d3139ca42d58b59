package github

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The fuzz targets cover every parser of outside input: Authorization headers and
// App JWTs, JSON request bodies, pagination parameters, webhook signatures, durations
// and cursors. Each checks an invariant besides "no panic".

func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{"token ghp_x", "Bearer eyJ.a.b", "Basic YTpi", "basic", "token  ", "Basic !!", "Bearer"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		scheme, secret, ok := parseAuthorization(h)
		if ok && (secret == "" || (scheme != "token" && scheme != "bearer" && scheme != "basic")) {
			t.Fatalf("parseAuthorization(%q) = %q, %q, true", h, scheme, secret)
		}
	})
}

func FuzzAuthenticate(f *testing.F) {
	w := newWorld(f, worldOpts{})
	f.Add("Bearer " + w.appJWT(f, w.now(), w.now().Add(time.Minute)))
	f.Add("token " + testPAT)
	f.Add("Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxIn0.c2ln")
	f.Add("Bearer eyJhbGciOiJub25lIn0.eyJpc3MiOjF9.")
	f.Fuzz(func(t *testing.T, h string) {
		for _, kind := range []authKind{authToken, authApp, authOptional} {
			r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/app", nil)
			r.Header.Set("Authorization", h)
			cred, e := w.sim.authenticate(r, kind)
			if (cred == nil) == (e == nil) && h != "" {
				t.Fatalf("authenticate(%q, %d) = %v, %v: want exactly one", h, kind, cred, e)
			}
			if e != nil && e.code != 401 && e.code != 403 {
				t.Fatalf("authenticate(%q) status %d", h, e.code)
			}
		}
	})
}

func FuzzJITRequestBody(f *testing.F) {
	for _, s := range []string{`{"name":"a","runner_group_id":1,"labels":["x"]}`, `{`, `[]`, `{"name":1}`, `{"labels":null}`, `""`, `{"runner_group_id":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req jitRequest
		e := parseJSONBody(body, &req)
		if e == nil {
			e = req.validate()
		}
		if e != nil && e.code != 400 && e.code != 422 {
			t.Fatalf("body %q: status %d", body, e.code)
		}
		if e == nil && (strings.TrimSpace(req.Name) == "" || req.RunnerGroupID == nil || len(req.Labels) == 0) {
			t.Fatalf("body %q accepted without its required fields", body)
		}
	})
}

func FuzzPageParams(f *testing.F) {
	f.Add("30", "1")
	f.Add("-1", "abc")
	f.Add("1000000000000000000000", "99999999999")
	f.Fuzz(func(t *testing.T, perPage, page string) {
		pp, pg := pageParams(perPage, page)
		if pp < 1 || pp > 100 || pg < 1 {
			t.Fatalf("pageParams(%q, %q) = %d, %d", perPage, page, pp, pg)
		}
	})
}

func FuzzVerifySignature(f *testing.F) {
	f.Add("secret", []byte(`{"a":1}`), "sha256=00")
	f.Add("", []byte{}, "")
	f.Fuzz(func(t *testing.T, secret string, body []byte, sig string) {
		if !VerifySignature(secret, body, signature(secret, body)) {
			t.Fatal("own signature does not verify")
		}
		if sig != signature(secret, body) && VerifySignature(secret, body, sig) {
			t.Fatalf("foreign signature %q verifies", sig)
		}
	})
}

func FuzzDuration(f *testing.F) {
	for _, s := range []string{`"1s"`, `250`, `"-1s"`, `-5`, `"x"`, `1e300`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Duration
		if err := d.UnmarshalJSON(b); err != nil {
			return
		}
		out, err := d.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := back.UnmarshalJSON(out); err != nil || back != d {
			t.Fatalf("round trip of %q: %v → %s → %v (%v)", b, d, out, back, err)
		}
	})
}

func FuzzParseCursor(f *testing.F) {
	f.Add("123")
	f.Add("")
	f.Add("999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseCursor(s)
		if err == nil && (n < 0 || itoa(n) != strings.TrimLeft(s, "0") && n != 0) {
			t.Fatalf("parseCursor(%q) = %d", s, n)
		}
	})
}
