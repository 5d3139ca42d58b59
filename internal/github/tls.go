package github

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
)

// TransportWithCABundle returns a transport like http.DefaultTransport that trusts the
// system's certificate authorities and, in addition, every certificate in pemBundle:
// how Gantry reaches a GitHub Enterprise Server whose certificate a private CA signed.
// A bundle with no PEM certificate is an error, so a wrong file is noticed at start.
func TransportWithCABundle(pemBundle []byte) (*http.Transport, error) {
	pool, err := CertPoolWithBundle(pemBundle)
	if err != nil {
		return nil, err
	}
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("http.DefaultTransport is a %T, not an *http.Transport", http.DefaultTransport)
	}
	t := base.Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// CertPoolWithBundle returns the system's certificate authorities plus every
// certificate in pemBundle, or an error if the bundle holds none.
func CertPoolWithBundle(pemBundle []byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pemBundle) {
		return nil, errors.New("the CA bundle holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	return pool, nil
}
