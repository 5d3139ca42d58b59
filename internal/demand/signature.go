package demand

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// Signature errors. They never include the secret or the expected digest.
var (
	ErrMissingSignature = errors.New("missing X-Hub-Signature-256 header")
	ErrBadSignature     = errors.New("X-Hub-Signature-256 does not match the body signed with any configured webhook secret")
)

// VerifySignature checks GitHub's X-Hub-Signature-256 header ("sha256=<hex HMAC-SHA256
// of the raw body>") against each secret in turn, so a secret can be rotated without
// dropping deliveries. The comparison is constant-time.
func VerifySignature(secrets [][]byte, body []byte, header string) error {
	if header == "" {
		return ErrMissingSignature
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return ErrBadSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return ErrBadSignature
	}
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		mac := hmac.New(sha256.New, s)
		mac.Write(body)
		if hmac.Equal(got, mac.Sum(nil)) {
			return nil
		}
	}
	return ErrBadSignature
}

// Sign returns the X-Hub-Signature-256 header value for body, as GitHub computes it.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
