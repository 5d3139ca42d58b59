package selfsigned

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The serving certificate verifies against its CA for each of its hosts, DNS name or IP
// address, and for no other; the files written load as a key pair.
func TestServingCertificateVerifiesForItsHosts(t *testing.T) {
	s, err := New([]string{"gantry-eviction-webhook.gantry-system.svc", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := s.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatalf("loading what WriteDir wrote: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.CAPEM) {
		t.Fatal("the CA's PEM holds no certificate")
	}
	for host, want := range map[string]bool{
		"gantry-eviction-webhook.gantry-system.svc": true, "127.0.0.1": true,
		"gantry-eviction-webhook.other.svc": false, "127.0.0.2": false,
	} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if got := err == nil; got != want {
			t.Errorf("verifying for %s: %v, want verified %v", host, err, want)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("tls.key mode %v, want 0600", perm)
	}
}
