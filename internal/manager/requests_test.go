package manager

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// TestRequestsHTTPClientHasAConnectionOfItsOwn: the client made from the same
// configuration the informers use (rest.HTTPClientFor) and RequestsHTTPClient each
// reach an HTTP/2 API server on their own connection; two clients of that
// configuration share one.
func TestRequestsHTTPClientHasAConnectionOfItsOwn(t *testing.T) {
	var opened atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("request over %s, want HTTP/2", r.Proto)
		}
		w.WriteHeader(http.StatusOK)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}

	get := func(c *http.Client) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/version", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	watches, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	same, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get(watches)
	get(same)
	if got := opened.Load(); got != 1 {
		t.Fatalf("two clients of one configuration opened %d connections, want 1 (shared)", got)
	}
	requests, err := RequestsHTTPClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get(requests)
	get(requests)
	if got := opened.Load(); got != 2 {
		t.Errorf("%d connections opened, want 2: the requests' own and the shared one", got)
	}
}
