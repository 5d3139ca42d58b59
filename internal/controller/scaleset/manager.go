package scaleset

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
	"github.com/gantry-dev/gantry/internal/warm"
)

// Manager runs the listeners of the scale-set pools. It is a controller-runtime
// Runnable that needs leader election: sessions live only in the leader, are opened
// when it starts leading and closed when it stops (leadership lost, shutdown). The
// RunnerPool controller tells it which pools exist (Ensure, Remove) and reads back
// their state (Status, Assigned). Safe for concurrent use; a nil Manager knows no pool.
type Manager struct {
	Clients Services
	// Client patches status.scaleSet.id as soon as a scale set is created.
	Client  client.Client
	Tracker *demand.Tracker
	// Warm hears of each job a scale-set pool's runner started, at the job's queue
	// time: the arrivals spec.warm.predictive sizes the floor from (a webhook pool's
	// come from the Tracker).
	Warm  *warm.Observations
	Clock clock.Clock
	// Owner names this controller in the sessions it opens (its pod name).
	Owner string
	Log   logr.Logger
	// Backoff bounds the wait between attempts to connect after a failure, conflicts
	// included: it starts at BackoffBase and doubles up to BackoffMax (1s, 30s).
	BackoffBase, BackoffMax time.Duration
	// GatherWindow is how long job messages gather on the service after an answer that
	// was not full before the next long poll (gather.go); 0: DefaultGatherWindow,
	// negative: none.
	GatherWindow time.Duration

	mu      sync.Mutex
	ctx     context.Context // set while leading
	pools   map[types.NamespacedName]*poolListener
	notify  func(types.NamespacedName)
	running sync.WaitGroup
}

// gatherWindow is GatherWindow with its default.
func (m *Manager) gatherWindow() time.Duration {
	switch {
	case m.GatherWindow == 0:
		return DefaultGatherWindow
	case m.GatherWindow < 0:
		return 0
	}
	return m.GatherWindow
}

// NeedLeaderElection: sessions are opened by the leader only.
func (m *Manager) NeedLeaderElection() bool { return true }

// SetNotify sets the function told, outside any lock, that a pool's scale set state or
// demand changed. The RunnerPool controller wires it to its work queue.
func (m *Manager) SetNotify(f func(types.NamespacedName)) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.notify = f
	m.mu.Unlock()
}

// Start runs the listeners of the pools known so far and of those ensured later, until
// ctx ends; then it closes every session and returns once they are closed.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	if m.pools == nil {
		m.pools = map[types.NamespacedName]*poolListener{}
	}
	for _, l := range m.pools {
		m.startLocked(l)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.ctx = nil
	m.mu.Unlock()
	m.running.Wait()
	return nil
}

// Ensure records a scale-set pool's wanted state and starts or restarts its listener
// when that changed in a way the running one cannot follow (scope, credentials, group,
// name or labels). maxRunners and minIdle, the idle floor in force (spec.minIdle as
// raised by spec.warm), are followed live.
func (m *Manager) Ensure(pool *v1alpha1.RunnerPool, minIdle int32) {
	if m == nil {
		return
	}
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	cfg := configOf(pool)
	m.mu.Lock()
	if m.pools == nil {
		m.pools = map[types.NamespacedName]*poolListener{}
	}
	old := m.pools[key]
	if old != nil && old.cfg.equal(cfg) {
		m.mu.Unlock()
		old.setLimits(pool.Spec.MaxRunners, minIdle)
		old.adoptID(cfg.knownID, cfg.deadSession)
		return
	}
	delete(m.pools, key)
	m.mu.Unlock()
	if old != nil {
		old.stop() // outside the lock: the stopping listener reports through it
		cfg.knownID = max(cfg.knownID, old.scaleSetID())
		cfg.deadSession = "" // the recorded session was the stopped listener's, closed as it stopped
	}
	l := newPoolListener(m, key, cfg, pool.DeepCopy())
	l.setLimits(pool.Spec.MaxRunners, minIdle)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pools[key] != nil {
		return // ensured meanwhile by another caller
	}
	m.pools[key] = l
	if m.ctx != nil {
		m.startLocked(l)
	}
}

func (m *Manager) startLocked(l *poolListener) {
	if l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.ctx)
	l.cancel = cancel
	l.done = make(chan struct{})
	m.running.Add(1)
	go func() {
		defer m.running.Done()
		defer close(l.done)
		l.run(ctx)
	}()
}

// Forget stops a pool's listener, closing its session, and forgets it: for a pool that
// is no longer a scale-set pool or whose spec cannot be used.
func (m *Manager) Forget(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	l := m.pools[key]
	delete(m.pools, key)
	m.mu.Unlock()
	if l != nil {
		l.stop()
	}
}

// Remove is the last step of deleting a scale-set pool, once its runners are gone: it
// stops the listener (closing the session) and deletes the scale set on GitHub. done is
// false while that has yet to succeed.
func (m *Manager) Remove(ctx context.Context, pool *v1alpha1.RunnerPool) (done bool, err error) {
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	id := int64(0)
	if pool.Status.ScaleSet != nil {
		id = pool.Status.ScaleSet.ID
	}
	m.mu.Lock()
	l := m.pools[key]
	m.mu.Unlock()
	if l != nil {
		l.stop()
		id = max(id, l.scaleSetID())
	}
	if id != 0 {
		c, err := m.Clients.For(ctx, pool)
		if err != nil {
			return false, fmt.Errorf("deleting scale set %d: %w", id, err)
		}
		if err := c.DeleteRunnerScaleSet(ctx, int(id)); err != nil && !isNotFound(err) {
			return false, fmt.Errorf("deleting scale set %d on GitHub: %w", id, err)
		}
		m.Log.Info("Deleted the pool's runner scale set", "pool", key.String(), "scaleSetID", id)
	}
	m.Forget(key)
	return true, nil
}

// Status returns what the listener knows of a pool's scale set and session, the
// reason of the pool's ScaleSetSession condition, and whether it has a listener at all.
func (m *Manager) Status(key types.NamespacedName) (st v1alpha1.ScaleSetStatus, reason string, ok bool) {
	if m == nil {
		return st, "", false
	}
	m.mu.Lock()
	l := m.pools[key]
	leading := m.ctx != nil
	m.mu.Unlock()
	if l == nil {
		return st, "", false
	}
	st, reason = l.snapshot()
	if !leading {
		st.Session, reason = v1alpha1.SessionClosed, v1alpha1.ReasonNotLeader
		st.Message = "this controller is not the leader; the leader holds the session"
	}
	return st, reason, true
}

// Assigned returns statistics.totalAssignedJobs of the pool's scale set from the
// service's last answer: jobs assigned to it, waiting or running. ok is false before
// the first answer.
func (m *Manager) Assigned(key types.NamespacedName) (n int, ok bool) {
	if m == nil {
		return 0, false
	}
	m.mu.Lock()
	l := m.pools[key]
	m.mu.Unlock()
	if l == nil {
		return 0, false
	}
	return l.assignedJobs()
}

// Runners sorts the pool's runners (names) by what the service's answers said of them
// up to the last: running a job, or finished with it; names the runners running a job
// that are not among them (their Runner is gone, their JobCompleted not yet heard);
// numbers that answer; and says its lag: how many more runners its job messages say run
// a job than its count of running jobs has (JobCompleted messages still to come). ok is
// false when the pool has no listener.
func (m *Manager) Runners(key types.NamespacedName, names []string) (running, done, elsewhere []string, answer uint64, lag int, ok bool) {
	if m == nil {
		return nil, nil, nil, 0, 0, false
	}
	m.mu.Lock()
	l := m.pools[key]
	m.mu.Unlock()
	if l == nil {
		return nil, nil, nil, 0, 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	running, done, elsewhere = l.jobs.of(names)
	return running, done, elsewhere, l.jobs.answer, max(0, len(running)+len(elsewhere)-l.jobs.runningJobs), true
}

// ScaleSetID returns the id of the pool's scale set, known to its listener or recorded
// in its status; 0 while there is none.
func (m *Manager) ScaleSetID(pool *v1alpha1.RunnerPool) int64 {
	if m == nil {
		return 0
	}
	var id int64
	if pool.Status.ScaleSet != nil {
		id = pool.Status.ScaleSet.ID
	}
	m.mu.Lock()
	l := m.pools[types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}]
	m.mu.Unlock()
	if l != nil {
		if known := l.scaleSetID(); known != 0 {
			id = known
		}
	}
	return id
}

func (m *Manager) wake(key types.NamespacedName) {
	m.mu.Lock()
	f := m.notify
	m.mu.Unlock()
	if f != nil {
		f(key)
	}
}

// poolConfig is what a running listener cannot change without reconnecting.
type poolConfig struct {
	url, secret, group, name string
	labels                   []string
	knownID                  int64
	// deadSession is the session id recorded in the pool's status by a previous leader:
	// closed before this listener opens its own.
	deadSession string
}

func configOf(pool *v1alpha1.RunnerPool) poolConfig {
	cfg := poolConfig{
		url:    pool.Spec.GitHub.URL,
		secret: pool.Spec.GitHub.CredentialsSecretRef.Name,
		group:  pool.Spec.GitHub.RunnerGroup,
		name:   pool.ScaleSetName(),
		labels: scaleSetLabels(pool),
	}
	if pool.Status.ScaleSet != nil {
		cfg.knownID = pool.Status.ScaleSet.ID
		cfg.deadSession = pool.Status.ScaleSet.SessionID
	}
	return cfg
}

// equal compares what needs a reconnect; the known id and the dead session only matter
// at start.
func (c poolConfig) equal(o poolConfig) bool {
	return c.url == o.url && c.secret == o.secret && c.group == o.group && c.name == o.name && slices.Equal(c.labels, o.labels)
}

// scaleSetLabels are the scale set's labels: its name, then the labels the pool's
// runners register (self-hosted, OS and architecture unless the pool opts out, then
// its own), each once, compared case-insensitively as GitHub compares labels.
func scaleSetLabels(pool *v1alpha1.RunnerPool) []string {
	out := []string{pool.ScaleSetName()}
	seen := map[string]bool{strings.ToLower(out[0]): true}
	for _, l := range pool.RunnerLabels() {
		if !seen[strings.ToLower(l)] {
			seen[strings.ToLower(l)] = true
			out = append(out, l)
		}
	}
	return out
}
