package github

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseCredentials(t *testing.T) {
	key := pemKey(testKey())
	pkcs8, err := x509.MarshalPKCS8PrivateKey(testKey())
	if err != nil {
		t.Fatal(err)
	}
	pkcs8PEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	const secret = "ghp_SUPERSECRETtoken1234567890"

	tests := []struct {
		name        string
		data        map[string][]byte
		wantToken   string
		wantApp     string // Credentials.String() for App credentials
		wantErrKeys []string
	}{
		{name: "token", data: map[string][]byte{KeyToken: []byte(secret + "\n")}, wantToken: secret},
		{name: "token and unrelated keys", data: map[string][]byte{KeyToken: []byte(secret), "ca.crt": []byte("x")}, wantToken: secret},
		{
			name:    "app PKCS#1",
			data:    map[string][]byte{KeyAppID: []byte("1234"), KeyAppInstallationID: []byte(" 77\n"), KeyAppPrivateKey: key},
			wantApp: "GitHub App 1234 installation 77",
		},
		{
			name:    "app PKCS#8",
			data:    map[string][]byte{KeyAppID: []byte("1234"), KeyAppInstallationID: []byte("77"), KeyAppPrivateKey: pkcs8PEM},
			wantApp: "GitHub App 1234 installation 77",
		},
		{name: "empty", data: map[string][]byte{}, wantErrKeys: []string{KeyToken, KeyAppID}},
		{name: "empty token", data: map[string][]byte{KeyToken: []byte(" \n")}, wantErrKeys: []string{KeyToken, "empty"}},
		{name: "token with spaces", data: map[string][]byte{KeyToken: []byte("ghp_a " + secret)}, wantErrKeys: []string{KeyToken, "whitespace"}},
		{name: "both kinds", data: map[string][]byte{KeyToken: []byte(secret), KeyAppID: []byte("1")}, wantErrKeys: []string{KeyToken, KeyAppID, "not both"}},
		{
			name:        "app missing installation and key",
			data:        map[string][]byte{KeyAppID: []byte("1234")},
			wantErrKeys: []string{"missing " + KeyAppInstallationID + ", " + KeyAppPrivateKey},
		},
		{
			name:        "app id not a number",
			data:        map[string][]byte{KeyAppID: []byte(secret), KeyAppInstallationID: []byte("77"), KeyAppPrivateKey: key},
			wantErrKeys: []string{KeyAppID, "positive decimal number"},
		},
		{
			name:        "installation id negative",
			data:        map[string][]byte{KeyAppID: []byte("1"), KeyAppInstallationID: []byte("-77"), KeyAppPrivateKey: key},
			wantErrKeys: []string{KeyAppInstallationID, "positive decimal number"},
		},
		{
			name:        "key not PEM",
			data:        map[string][]byte{KeyAppID: []byte("1"), KeyAppInstallationID: []byte("2"), KeyAppPrivateKey: []byte(secret)},
			wantErrKeys: []string{KeyAppPrivateKey, "not PEM-encoded", "BEGIN"},
		},
		{
			name: "key PEM but garbage",
			data: map[string][]byte{KeyAppID: []byte("1"), KeyAppInstallationID: []byte("2"),
				KeyAppPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte(secret)})},
			wantErrKeys: []string{KeyAppPrivateKey, "not a valid RSA private key"},
		},
		{
			name:        "key not RSA",
			data:        map[string][]byte{KeyAppID: []byte("1"), KeyAppInstallationID: []byte("2"), KeyAppPrivateKey: ecPEM},
			wantErrKeys: []string{KeyAppPrivateKey, "not an RSA private key"},
		},
		{
			name: "public key",
			data: map[string][]byte{KeyAppID: []byte("1"), KeyAppInstallationID: []byte("2"),
				KeyAppPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte(secret)})},
			wantErrKeys: []string{KeyAppPrivateKey, "not a private key"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCredentials(tt.data)
			if tt.wantErrKeys != nil {
				if err == nil {
					t.Fatalf("ParseCredentials() = %v, want an error", got)
				}
				for _, part := range tt.wantErrKeys {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not mention %q", err, part)
					}
				}
				assertNoSecrets(t, err.Error(), tt.data)
				return
			}
			if err != nil {
				t.Fatalf("ParseCredentials() error = %v", err)
			}
			if got.Token != tt.wantToken {
				t.Errorf("Token = %q, want %q", got.Token, tt.wantToken)
			}
			if tt.wantApp != "" && (got.App == nil || got.String() != tt.wantApp || !got.App.PrivateKey.Equal(testKey())) {
				t.Errorf("App credentials = %v, want %s with the test key", got, tt.wantApp)
			}
			assertNoSecrets(t, fmt.Sprintf("%v %+v %#v %s", got, got, got, got), tt.data)
		})
	}
}

// assertNoSecrets fails if s contains any secret value of data (or its trimmed form).
func assertNoSecrets(t *testing.T, s string, data map[string][]byte) {
	t.Helper()
	for k, v := range data {
		if k == KeyAppID || k == KeyAppInstallationID {
			continue // not secret, but short numbers could appear by chance
		}
		if tv := strings.TrimSpace(string(v)); len(tv) >= 8 && strings.Contains(s, tv) {
			t.Errorf("%q contains the value of %s", s, k)
		}
	}
}

func TestCredentialsFingerprint(t *testing.T) {
	a, _ := ParseCredentials(map[string][]byte{KeyToken: []byte("ghp_aaaaaaaa")})
	a2, _ := ParseCredentials(map[string][]byte{KeyToken: []byte("ghp_aaaaaaaa\n")})
	b, _ := ParseCredentials(map[string][]byte{KeyToken: []byte("ghp_bbbbbbbb")})
	if a.fingerprint != a2.fingerprint || a.fingerprint == b.fingerprint {
		t.Errorf("fingerprints: same token %v, different token %v; want equal, different",
			a.fingerprint == a2.fingerprint, a.fingerprint == b.fingerprint)
	}
	if strings.Contains(a.fingerprint, "aaaaaaaa") {
		t.Errorf("fingerprint contains the token")
	}
}

func TestValidateFor(t *testing.T) {
	ent, _ := ParseURL("https://github.com/enterprises/e")
	org, _ := ParseURL("https://github.com/acme")
	app := Credentials{App: &AppCredentials{AppID: 1, InstallationID: 2, PrivateKey: testKey()}}
	pat := Credentials{Token: "ghp_x"}
	got := map[string]bool{
		"app/enterprise": IsUnauthorized(app.ValidateFor(ent)),
		"app/org":        app.ValidateFor(org) == nil,
		"pat/enterprise": pat.ValidateFor(ent) == nil,
	}
	want := map[string]bool{"app/enterprise": true, "app/org": true, "pat/enterprise": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ValidateFor (-want +got):\n%s", diff)
	}
	if err := app.ValidateFor(ent); !strings.Contains(err.Error(), KeyToken) {
		t.Errorf("error %q does not say to use %s", err, KeyToken)
	}
}

func FuzzParseCredentials(f *testing.F) {
	f.Add("ghp_abc", "", "", "", byte(1))
	f.Add("", "123", "456", "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n", byte(14))
	f.Add("", "1", "", "x", byte(6))
	f.Fuzz(func(t *testing.T, token, appID, instID, key string, present byte) {
		const sentinel = "SENTINEL-9f8e7d"
		data := map[string][]byte{}
		for i, kv := range []struct{ k, v string }{
			{KeyToken, sentinel + token}, {KeyAppID, appID}, {KeyAppInstallationID, instID}, {KeyAppPrivateKey, sentinel + key},
		} {
			if present&(1<<i) != 0 {
				data[kv.k] = []byte(kv.v)
			}
		}
		c, err := ParseCredentials(data)
		if err != nil {
			if strings.Contains(err.Error(), sentinel) {
				t.Fatalf("error contains a secret value: %v", err)
			}
			assertNoSecrets(t, err.Error(), data)
			return
		}
		if c.App == nil && c.Token == "" {
			t.Fatalf("ParseCredentials(%v) = no credentials and no error", present)
		}
		if s := fmt.Sprintf("%v %#v", c, c); strings.Contains(s, sentinel) {
			t.Fatalf("formatted credentials contain a secret: %s", s)
		}
	})
}
