package github

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	jwt "github.com/golang-jwt/jwt/v4"
)

// credKind is the kind of credential a request carried.
type credKind int

const (
	credNone credKind = iota
	credPAT
	credInstallation
	credApp
)

// credential is an authenticated caller.
type credential struct {
	kind  credKind
	pat   *pat
	inst  *installation
	app   *app
	login string
	// rateKey keys the caller's rate-limit buckets; rateLimit is its primary limit
	// per window (0: the default of its kind).
	rateKey   string
	rateLimit int
}

// parseAuthorization splits an Authorization header into its scheme (lower case) and
// credential. "token X" and "Bearer X" carry X; "Basic" carries the password of
// base64(user:password), as GitHub accepts PATs that way.
func parseAuthorization(h string) (scheme, secret string, ok bool) {
	h = strings.TrimSpace(h)
	scheme, secret, found := strings.Cut(h, " ")
	if !found {
		return "", "", false
	}
	scheme = strings.ToLower(scheme)
	secret = strings.TrimSpace(secret)
	if secret == "" {
		return "", "", false
	}
	switch scheme {
	case "token", "bearer":
		return scheme, secret, true
	case "basic":
		raw, err := base64.StdEncoding.DecodeString(secret)
		if err != nil {
			return "", "", false
		}
		_, pw, found := strings.Cut(string(raw), ":")
		if !found || pw == "" {
			return "", "", false
		}
		return scheme, pw, true
	}
	return "", "", false
}

// looksLikeJWT reports whether s has the three dot-separated parts of a JWS.
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 && strings.HasPrefix(s, "eyJ") }

// authenticate identifies the caller of r for a route accepting kind. It returns nil
// and no error for an anonymous request on an authOptional route.
func (s *Sim) authenticate(r *http.Request, kind authKind) (*credential, *apiError) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if kind == authOptional {
			return nil, nil
		}
		if kind == authApp {
			return nil, newError(http.StatusUnauthorized, msgJWTDecode)
		}
		return nil, newError(http.StatusUnauthorized, msgRequiresAuth)
	}
	_, secret, ok := parseAuthorization(h)
	if !ok {
		return nil, newError(http.StatusUnauthorized, msgBadCredentials)
	}
	if looksLikeJWT(secret) {
		a, err := s.verifyAppJWT(secret)
		if err != nil {
			return nil, err
		}
		if kind == authToken {
			return nil, newError(http.StatusForbidden, msgIntegration)
		}
		return &credential{kind: credApp, app: a, login: a.slug + "[bot]", rateKey: "app:" + strconv.FormatInt(a.id, 10)}, nil
	}
	if kind == authApp {
		return nil, newError(http.StatusUnauthorized, msgJWTDecode)
	}
	s.lock()
	defer s.unlock()
	if p, ok := s.st.pats[secret]; ok {
		return &credential{kind: credPAT, pat: p, login: p.Login, rateKey: "pat:" + strconv.FormatInt(p.id, 10), rateLimit: p.RateLimit}, nil
	}
	if t, ok := s.st.instTokens[secret]; ok {
		if !s.now().Before(t.expires) {
			delete(s.st.instTokens, secret)
			return nil, newError(http.StatusUnauthorized, msgBadCredentials)
		}
		in := t.inst
		return &credential{kind: credInstallation, inst: in, login: in.app.slug + "[bot]",
			rateKey: "installation:" + strconv.FormatInt(in.id, 10), rateLimit: in.rateLimit}, nil
	}
	return nil, newError(http.StatusUnauthorized, msgBadCredentials)
}

// jwtLeeway is the clock drift GitHub tolerates on iat.
const jwtLeeway = 60 * time.Second

// verifyAppJWT checks an App JWT: RS256 signature by the App's key, iat not in the
// future, exp in the future and at most 10 minutes ahead, as GitHub does.
func (s *Sim) verifyAppJWT(raw string) (*app, *apiError) {
	var a *app
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation(), jwt.WithJSONNumber())
	claims := jwt.MapClaims{}
	_, err := parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		id, err := issuerID(claims["iss"])
		if err != nil {
			return nil, err
		}
		s.lock()
		defer s.unlock()
		a = s.st.apps[id]
		if a == nil {
			for _, cand := range s.st.apps {
				if cand.clientID == fmt.Sprint(claims["iss"]) {
					a = cand
				}
			}
		}
		if a == nil {
			return nil, fmt.Errorf("unknown app %d", id)
		}
		return a.key, nil
	})
	if err != nil || a == nil {
		return nil, newError(http.StatusUnauthorized, msgJWTDecode)
	}
	now := s.now()
	exp, okExp := numericClaim(claims["exp"])
	iat, okIat := numericClaim(claims["iat"])
	switch {
	case !okIat || time.Unix(iat, 0).After(now.Add(jwtLeeway)):
		return nil, newError(http.StatusUnauthorized, msgJWTIssuedAt)
	case !okExp || !time.Unix(exp, 0).After(now):
		return nil, newError(http.StatusUnauthorized, msgJWTExpired)
	case time.Unix(exp, 0).After(now.Add(10*time.Minute + jwtLeeway)):
		return nil, newError(http.StatusUnauthorized, msgJWTTooFar)
	}
	return a, nil
}

// issuerID reads iss, which GitHub accepts as the App ID (number or numeric string)
// or as the client ID.
func issuerID(v any) (int64, error) {
	switch x := v.(type) {
	case string:
		if id, err := strconv.ParseInt(x, 10, 64); err == nil {
			return id, nil
		}
		return 0, nil // a client ID: looked up by the caller
	case interface{ Int64() (int64, error) }:
		return x.Int64()
	}
	return 0, fmt.Errorf("iss missing")
}

// numericClaim reads an integer NumericDate; GitHub rejects fractional timestamps.
func numericClaim(v any) (int64, bool) {
	n, ok := v.(interface{ String() string })
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	return i, err == nil
}

// authorize checks that cred may act on scope sc through route rt.
func (s *Sim) authorize(cred *credential, rt *route, sc scopeRef) *apiError {
	switch cred.kind {
	case credPAT:
		if len(rt.scopes) == 0 {
			return nil
		}
		for _, want := range rt.scopes {
			if cred.pat.scopes[want] {
				return nil
			}
		}
		e := newError(http.StatusForbidden, msgPATScope)
		e.header = map[string]string{"X-Accepted-OAuth-Scopes": strings.Join(rt.scopes, ", ")}
		return e
	case credInstallation:
		in := cred.inst
		if e := permissionDenied(in, rt); e != nil {
			return e
		}
		switch sc.kind {
		case scopeRepo:
			if in.covers(sc.repo) {
				return nil
			}
		case scopeOrg:
			if in.org == sc.org {
				return nil
			}
		}
		return newError(http.StatusForbidden, msgIntegration)
	}
	return newError(http.StatusForbidden, msgIntegration)
}

// randomToken returns prefix followed by n characters of [A-Za-z0-9].
func randomToken(prefix string, n int, upper bool) string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	const up = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	alphabet := alnum
	if upper {
		alphabet = up
	}
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}

// parsePublicKey accepts a PEM RSA public key or certificate.
func parsePublicKey(pemData []byte) (*rsa.PublicKey, error) {
	k, err := jwt.ParseRSAPublicKeyFromPEM(pemData)
	if err != nil {
		return nil, fmt.Errorf("parsing the App's public key: %w", err)
	}
	return k, nil
}
