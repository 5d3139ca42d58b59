package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/demand"
)

// leaderElectionID names the leader-election Lease.
const leaderElectionID = "gantry-controller.gantry.dev"

// LabelWebhookEndpoint is the label of the leader-election Lease that carries the
// leader's webhook endpoint (WebhookAdvertiseAddress, ':' written '_', and an IPv6
// address's own colons '-'); controller-runtime sets it whenever a replica takes the
// Lease.
const LabelWebhookEndpoint = "gantry.dev/webhook-endpoint"

// forwardedHeader marks a delivery a standby forwarded, so that it is never forwarded
// twice.
const forwardedHeader = "X-Gantry-Forwarded-By"

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaderElectionLabels returns the labels this replica puts on the Lease when it
// leads, and the Lease's namespace; none without leader election or an advertised
// address.
func leaderElectionLabels(opts Options) (map[string]string, string, error) {
	if !opts.LeaderElection || opts.WebhookAdvertiseAddress == "" {
		return nil, "", nil
	}
	ns := opts.LeaderElectionNamespace
	if ns == "" {
		b, err := os.ReadFile(inClusterNamespace)
		if err != nil {
			return nil, "", fmt.Errorf("finding the leader-election namespace (set it outside a cluster): %w", err)
		}
		ns = strings.TrimSpace(string(b))
	}
	v, err := encodeEndpoint(opts.WebhookAdvertiseAddress)
	if err != nil {
		return nil, "", err
	}
	return map[string]string{LabelWebhookEndpoint: v}, ns, nil
}

func encodeEndpoint(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return "", fmt.Errorf("webhook advertise address %q is not HOST:PORT", addr)
	}
	v := strings.ReplaceAll(host, ":", "-") + "_" + port
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return "", fmt.Errorf("webhook advertise address %q: %s", addr, strings.Join(errs, "; "))
	}
	return v, nil
}

func decodeEndpoint(v string) string {
	i := strings.LastIndex(v, "_")
	if i <= 0 {
		return ""
	}
	host, port := v[:i], v[i+1:]
	if ip := net.ParseIP(strings.ReplaceAll(host, "-", ":")); ip != nil && strings.Contains(host, "-") {
		host = ip.String()
	}
	return net.JoinHostPort(host, port)
}

// webhookServer serves GitHub's webhooks on every replica, so that a Service in front
// of all replicas works. Only the leader takes deliveries — the Tracker they feed lives
// in the leader's memory. A standby forwards each delivery to the leader's endpoint,
// read from the Lease, and returns the leader's answer; when it cannot (no advertised
// endpoint, the leader unreachable during a takeover) it answers 503 at once, and
// GitHub records the failed delivery, which resync recovers.
type webhookServer struct {
	handler  *demand.WebhookHandler
	listener net.Listener
	tracker  *demand.Tracker
	// self is this replica's advertised endpoint; lease finds the leader's.
	self    string
	lease   *leaseEndpoint
	leading atomic.Bool
	// led is closed once this replica leads: a delivery that arrives a moment before
	// (the manager starting, a takeover under way) waits for it up to standbyWait.
	led     chan struct{}
	ledOnce sync.Once
	client  *http.Client
}

// standbyWait is how long a delivery that no leader can take yet waits for this
// replica to lead before it is answered 503: well inside GitHub's 10-second timeout.
const standbyWait = 5 * time.Second

func (w *webhookServer) markLeading(on bool) {
	w.leading.Store(on)
	if on {
		w.ledOnce.Do(func() { close(w.led) })
	}
}

func (w *webhookServer) NeedLeaderElection() bool { return false }

func (w *webhookServer) Start(ctx context.Context) error {
	w.client = &http.Client{Timeout: 5 * time.Second}
	mux := http.NewServeMux()
	mux.Handle("/webhook", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.leading.Load() {
			w.handler.ServeHTTP(rw, r)
			return
		}
		w.forward(rw, r)
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(w.listener) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// forward hands a delivery a standby received to the leader, as is; with no leader to
// hand it to, it waits up to standbyWait for this replica to lead, then answers 503.
func (w *webhookServer) forward(rw http.ResponseWriter, r *http.Request) {
	standby := func() {
		t := time.NewTimer(standbyWait)
		defer t.Stop()
		select {
		case <-w.led:
			w.handler.ServeHTTP(rw, r)
			return
		case <-t.C:
		case <-r.Context().Done():
		}
		demand.WebhookDeliveries.WithLabelValues(demand.ResultStandby).Inc()
		http.Error(rw, "this replica is a standby and cannot reach the leader: retry later", http.StatusServiceUnavailable)
	}
	if w.lease == nil || r.Header.Get(forwardedHeader) != "" {
		standby()
		return
	}
	leader := w.lease.get(r.Context())
	if leader == "" || leader == w.self {
		standby()
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, demand.MaxWebhookBody+1))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			// The leader would refuse it too; say so without sending it.
			demand.WebhookDeliveries.WithLabelValues(demand.ResultTooLarge).Inc()
			http.Error(rw, "payload too large", http.StatusRequestEntityTooLarge)
			return
		}
		standby()
		return
	}
	// Should the leader be unreachable and this replica lead a moment later, it serves
	// the delivery itself.
	r.Body = io.NopCloser(bytes.NewReader(body))
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+leader+"/webhook", bytes.NewReader(body))
	if err != nil {
		standby()
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Set(forwardedHeader, w.self)
	resp, err := w.client.Do(req)
	if err != nil {
		standby()
		return
	}
	defer resp.Body.Close()
	demand.WebhookDeliveries.WithLabelValues(demand.ResultForwarded).Inc()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		rw.Header().Set("Content-Type", ct)
	}
	rw.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(rw, io.LimitReader(resp.Body, 64<<10))
}

// webhookLeader runs on the leader only: it hands accepted deliveries to the Tracker,
// prunes it, and tells the webhookServer to take deliveries while it leads.
type webhookLeader struct{ server *webhookServer }

func (l *webhookLeader) NeedLeaderElection() bool { return true }

func (l *webhookLeader) Start(ctx context.Context) error {
	w := l.server
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.handler.Run(stop) }()
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				w.tracker.Prune()
			}
		}
	}()
	w.markLeading(true)
	<-ctx.Done()
	w.markLeading(false)
	close(stop)
	wg.Wait()
	return nil
}

// leaseEndpoint reads the leader's webhook endpoint from the Lease, at most once a
// second.
type leaseEndpoint struct {
	reader client.Reader
	clock  clock.PassiveClock
	key    types.NamespacedName

	mu     sync.Mutex
	value  string
	readAt time.Time
}

func (l *leaseEndpoint) get(ctx context.Context) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.readAt.IsZero() && l.clock.Since(l.readAt) < time.Second {
		return l.value
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var lease coordinationv1.Lease
	if err := l.reader.Get(ctx, l.key, &lease); err != nil {
		return l.value
	}
	l.value, l.readAt = decodeEndpoint(lease.Labels[LabelWebhookEndpoint]), l.clock.Now()
	return l.value
}
