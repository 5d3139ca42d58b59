package github

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestDefaultTransportKeepsTheConnectionsOfABurst: 32 calls at once, twice, over
// HTTP/1.1 (a GitHub Enterprise Server behind a proxy without HTTP/2). The second
// burst reuses the first one's 32 connections; with Go's default of 2 idle
// connections per host it would open 30 new ones.
func TestDefaultTransportKeepsTheConnectionsOfABurst(t *testing.T) {
	const calls = 32
	var opened atomic.Int32
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Answer once every call of the burst has arrived: all 32 are in flight at once.
		arrived.Done()
		arrived.Wait()
		w.WriteHeader(http.StatusOK)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	tr, err := DefaultTransport()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	burst := func() {
		arrived.Add(calls)
		var done sync.WaitGroup
		for range calls {
			done.Go(func() {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
				if err != nil {
					t.Error(err)
					arrived.Done()
					return
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					arrived.Done() // never reached the handler
					return
				}
				resp.Body.Close()
			})
		}
		done.Wait()
	}
	burst()
	if got := opened.Load(); got != calls {
		t.Fatalf("first burst: %d connections opened, want %d", got, calls)
	}
	burst()
	if got := opened.Load(); got != calls {
		t.Errorf("second burst opened %d more connections; want every call on a kept connection", got-calls)
	}
}
