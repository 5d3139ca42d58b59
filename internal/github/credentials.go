package github

import (
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Keys of the credentials Secret a RunnerPool's github.credentialsSecretRef names.
const (
	// KeyToken holds a personal access token (classic, or fine-grained where the
	// endpoints allow it).
	KeyToken = "github_token"
	// KeyAppID holds the GitHub App's numeric ID.
	KeyAppID = "github_app_id"
	// KeyAppInstallationID holds the numeric ID of the App's installation on the
	// organization, repository or account.
	KeyAppInstallationID = "github_app_installation_id"
	// KeyAppPrivateKey holds the App's private key, PEM-encoded as GitHub downloads it.
	KeyAppPrivateKey = "github_app_private_key"
)

var appKeys = []string{KeyAppID, KeyAppInstallationID, KeyAppPrivateKey}

// Credentials authenticate a Client: either a personal access token or a GitHub App
// installation. Their String method never prints the secret parts.
type Credentials struct {
	// Token is the personal access token; empty for App credentials.
	Token string
	// App is set for GitHub App credentials.
	App *AppCredentials

	// fingerprint is a SHA-256 of the secret material, so a Provider can tell a rotated
	// Secret from an unchanged one without keeping the values in its keys.
	fingerprint string
}

// AppCredentials identify a GitHub App installation.
type AppCredentials struct {
	AppID          int64
	InstallationID int64
	PrivateKey     *rsa.PrivateKey
}

// IsApp reports whether the credentials are a GitHub App's.
func (c Credentials) IsApp() bool { return c.App != nil }

// String describes the credentials without their secrets.
func (c Credentials) String() string {
	if c.App != nil {
		return fmt.Sprintf("GitHub App %d installation %d", c.App.AppID, c.App.InstallationID)
	}
	if c.Token != "" {
		return "personal access token"
	}
	return "no credentials"
}

// GoString keeps %#v from printing the secrets.
func (c Credentials) GoString() string { return "github.Credentials{" + c.String() + "}" }

// ParseCredentials reads a credentials Secret's data: either github_token, or all of
// github_app_id, github_app_installation_id and github_app_private_key. Surrounding
// whitespace (a trailing newline from --from-file) is ignored. Errors name the key that
// is missing or malformed and what to put there; they never contain a value.
func ParseCredentials(data map[string][]byte) (Credentials, error) {
	_, hasToken := data[KeyToken]
	var present, missing []string
	for _, k := range appKeys {
		if _, ok := data[k]; ok {
			present = append(present, k)
		} else {
			missing = append(missing, k)
		}
	}
	switch {
	case hasToken && len(present) > 0:
		return Credentials{}, fmt.Errorf("the credentials Secret has both %s and %s: keep either the personal access token or the GitHub App keys, not both",
			KeyToken, strings.Join(present, ", "))
	case hasToken:
		return parseToken(data[KeyToken])
	case len(present) == 0:
		return Credentials{}, fmt.Errorf("the credentials Secret has neither %s (a personal access token) nor the GitHub App keys %s",
			KeyToken, strings.Join(appKeys, ", "))
	case len(missing) > 0:
		return Credentials{}, fmt.Errorf("the credentials Secret has %s but is missing %s: a GitHub App needs all of %s",
			strings.Join(present, ", "), strings.Join(missing, ", "), strings.Join(appKeys, ", "))
	}
	return parseApp(data)
}

func parseToken(raw []byte) (Credentials, error) {
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return Credentials{}, fmt.Errorf("%s is empty: put a personal access token in it", KeyToken)
	}
	for _, r := range tok {
		if r <= ' ' || r == 0x7f || r > '~' {
			return Credentials{}, fmt.Errorf("%s contains whitespace, control or non-ASCII characters: it must hold only the token", KeyToken)
		}
	}
	return Credentials{Token: tok, fingerprint: fingerprint([]byte(KeyToken), []byte(tok))}, nil
}

func parseApp(data map[string][]byte) (Credentials, error) {
	appID, err := parseID(KeyAppID, data[KeyAppID], "the App's numeric ID from its settings page")
	if err != nil {
		return Credentials{}, err
	}
	instID, err := parseID(KeyAppInstallationID, data[KeyAppInstallationID], "the numeric ID of the App's installation (the number at the end of the installation's settings URL)")
	if err != nil {
		return Credentials{}, err
	}
	key, err := parsePrivateKey(data[KeyAppPrivateKey])
	if err != nil {
		return Credentials{}, err
	}
	fp := fingerprint([]byte(KeyAppID), []byte(strconv.FormatInt(appID, 10)),
		[]byte(strconv.FormatInt(instID, 10)), x509.MarshalPKCS1PrivateKey(key))
	return Credentials{
		App:         &AppCredentials{AppID: appID, InstallationID: instID, PrivateKey: key},
		fingerprint: fp,
	}, nil
}

func parseID(key string, raw []byte, what string) (int64, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return 0, fmt.Errorf("%s is empty: put %s in it", key, what)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || !allDigits(s) {
		return 0, fmt.Errorf("%s is not a positive decimal number: put %s in it", key, what)
	}
	return n, nil
}

// parsePrivateKey decodes a PEM RSA key in PKCS#1 (what GitHub downloads) or PKCS#8.
// Errors never wrap the parser's error, so no key material can leak through them.
func parsePrivateKey(raw []byte) (*rsa.PrivateKey, error) {
	const fix = "paste the whole .pem file GitHub generated for the App, including the -----BEGIN and -----END lines"
	block, _ := pem.Decode([]byte(strings.TrimSpace(string(raw))))
	if block == nil {
		return nil, fmt.Errorf("%s is not PEM-encoded: %s", KeyAppPrivateKey, fix)
	}
	if !strings.Contains(block.Type, "PRIVATE KEY") {
		return nil, fmt.Errorf("%s holds a PEM block that is not a private key: %s", KeyAppPrivateKey, fix)
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid RSA private key: %s", KeyAppPrivateKey, fix)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s is not an RSA private key (GitHub Apps sign with RS256): %s", KeyAppPrivateKey, fix)
	}
	return rk, nil
}

// fingerprint hashes its parts, each length-prefixed so the encoding is unambiguous.
func fingerprint(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// errAppCannotServeEnterprise is wrapped by ValidateFor for App credentials on an
// enterprise scope.
var errAppCannotServeEnterprise = errors.New("enterprise runner endpoints need a classic personal access token with the manage_runners:enterprise scope in " +
	KeyToken + "; GitHub App installations cannot manage enterprise runners")

// ValidateFor checks that the credentials can serve the scope. App credentials cannot
// serve an enterprise scope; the error is Unauthorized.
func (c Credentials) ValidateFor(s Scope) error {
	if c.App != nil && s.Kind == ScopeEnterprise {
		return NewUnauthorizedError(fmt.Sprintf("scope %s", s), errAppCannotServeEnterprise)
	}
	return nil
}
