package reliability

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// service stands for the Kubernetes Service in front of the controller replicas that
// GitHub's webhooks reach: each delivery goes to the next running replica in turn, as
// kube-proxy spreads connections over a Service's endpoints. A replica that is down
// is skipped; with none up the delivery fails.
type service struct {
	url    string
	srv    *httptest.Server
	client *http.Client

	mu       sync.Mutex
	backends []*controllerProc
	next     int
	answers  map[int]int // status → count; 0 is "no answer"
}

func newService(t *testing.T) *service {
	s := &service{
		client:  &http.Client{Timeout: 10 * time.Second},
		answers: map[int]int{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.url = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) add(p *controllerProc) {
	s.mu.Lock()
	s.backends = append(s.backends, p)
	s.mu.Unlock()
}

func (s *service) pick() *controllerProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range s.backends {
		p := s.backends[s.next%len(s.backends)]
		s.next++
		if p.isAlive() {
			return p
		}
	}
	return nil
}

func (s *service) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	code := 0
	defer func() {
		s.mu.Lock()
		s.answers[code]++
		s.mu.Unlock()
	}()
	p := s.pick()
	if p == nil {
		http.Error(w, "no endpoints", http.StatusServiceUnavailable)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+p.webhookAddr+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	code = resp.StatusCode
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// answerCounts returns how the replicas answered deliveries, by status (0: none).
func (s *service) answerCounts() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.answers))
	for k, v := range s.answers {
		out[k] = v
	}
	return out
}

// tcpProxy stands between the controllers and the API server; cut makes the API
// server unreachable (every connection is closed, new ones refused) until restored.
type tcpProxy struct {
	addr     string
	upstream string
	ln       net.Listener

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newTCPProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{addr: ln.Addr().String(), upstream: upstream, ln: ln, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.setDown(true)
	})
	return p
}

func (p *tcpProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns[c] = true
		}
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		go p.pipe(c)
	}
}

func (p *tcpProxy) pipe(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.upstream)
	cancel()
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		up.Close()
		return
	}
	p.conns[up] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, up)
		p.mu.Unlock()
		up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// setDown cuts (true) or restores (false) the API server.
func (p *tcpProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}
