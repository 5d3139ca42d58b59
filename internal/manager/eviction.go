package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrl "sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// evictionServer serves the eviction webhook (runner/evict.go) over TLS, its
// certificate read from a directory (a kubernetes.io/tls Secret mounted there: tls.crt,
// tls.key) and read again when it changes. Every replica serves it, so that the API
// server reaches whichever the Service picks; only the leader acts.
type evictionServer struct {
	listener net.Listener
	certs    *certwatcher.CertWatcher
	handler  http.Handler
}

// newEvictionServer binds addr at once, so that its address is known before Start, and
// reads the certificate in dir, failing at start-up rather than at the first eviction.
func newEvictionServer(mgr ctrl.Manager, addr, dir string, r *runner.Reconciler) (*evictionServer, error) {
	if dir == "" {
		return nil, errors.New("the eviction webhook needs a certificate: set --eviction-webhook-cert-dir to a directory with tls.crt and tls.key")
	}
	certs, err := certwatcher.New(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("reading the eviction webhook's certificate in %s: %w", dir, err)
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for the eviction webhook on %s: %w", addr, err)
	}
	elected := mgr.Elected()
	leading := func() bool {
		select {
		case <-elected:
			return true
		default:
			return false
		}
	}
	mux := http.NewServeMux()
	mux.Handle(runner.EvictionWebhookPath, runner.ServeEvictions(r.EvictionWebhook(leading)))
	return &evictionServer{listener: ln, certs: certs, handler: mux}, nil
}

// NeedLeaderElection: every replica serves (a standby answers without acting).
func (s *evictionServer) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, watching the certificate meanwhile.
func (s *evictionServer) Start(ctx context.Context) error {
	watchDone := make(chan error, 1)
	go func() { watchDone <- s.certs.Start(ctx) }()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.GetCertificate},
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.ServeTLS(s.listener, "", "") }()
	select {
	case err := <-serveDone:
		return fmt.Errorf("serving the eviction webhook: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdown)
	if werr := <-watchDone; werr != nil && err == nil {
		err = werr
	}
	return err
}
