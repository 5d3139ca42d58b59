package controller

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretCache reads Secrets straight from the API server, each at most once per TTL.
// It serves the Secrets that carry no Gantry label (a pool's GitHub credentials, the
// webhook secret) and so are outside the controller's label-filtered informers: an
// informer over every Secret would hold the whole cluster's Secrets in memory.
//
// A Secret that does not exist is remembered as missing for TTL too. A read that fails
// (the API server unreachable, RBAC refusing it) is not remembered: the next Get reads
// again. Callers that find the same Secret due at once share one read: when the TTL
// runs out under a burst, the runner workers do not all read it together.
type SecretCache struct {
	Reader client.Reader
	Clock  clock.PassiveClock
	TTL    time.Duration

	mu      sync.Mutex
	entries map[types.NamespacedName]secretEntry
	reads   singleflight.Group
}

// secretEntry is the last good read of a Secret.
type secretEntry struct {
	data   map[string][]byte
	found  bool
	readAt time.Time
}

// Get returns the data of Secret key and whether it exists, read within the last TTL.
// When a due read fails, Get returns the error together with the last good read, if
// any, for callers that would rather go on with it through an API server blip.
func (c *SecretCache) Get(ctx context.Context, key types.NamespacedName) (data map[string][]byte, found bool, err error) {
	now := c.Clock.Now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Sub(e.readAt) < c.TTL {
		return e.data, e.found, nil
	}
	v, err, _ := c.reads.Do(key.String(), func() (any, error) {
		var s corev1.Secret
		read := secretEntry{readAt: now}
		switch err := c.Reader.Get(ctx, key, &s); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			read.data, read.found = s.Data, true
		}
		c.mu.Lock()
		if c.entries == nil {
			c.entries = map[types.NamespacedName]secretEntry{}
		}
		c.entries[key] = read
		c.mu.Unlock()
		return read, nil
	})
	if err != nil {
		return e.data, e.found, err
	}
	e = v.(secretEntry)
	return e.data, e.found, nil
}
