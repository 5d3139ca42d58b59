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
	t, err := DefaultTransport()
	if err != nil {
		return nil, err
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// MaxIdleConnsPerHost is how many idle connections to one GitHub host a transport keeps:
// the runners reconciled at once (`gantry controller --runner-concurrency`, default 64).
// Go's default keeps 2, so where GitHub answers over HTTP/1.1 (a GitHub Enterprise
// Server behind a proxy that does not speak HTTP/2) a burst of 64 runners registering
// at once closed 62 connections after every call and opened as many again: a TCP and
// TLS handshake per JIT configuration. Over HTTP/2 (github.com) one connection carries
// every call and this changes nothing.
const MaxIdleConnsPerHost = 64

// DefaultTransport is a clone of http.DefaultTransport (proxy from the environment,
// HTTP/2, its timeouts) that keeps MaxIdleConnsPerHost idle connections per host.
func DefaultTransport() (*http.Transport, error) {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("http.DefaultTransport is a %T, not an *http.Transport", http.DefaultTransport)
	}
	t := base.Clone()
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	t.MaxIdleConns = max(t.MaxIdleConns, MaxIdleConnsPerHost)
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
