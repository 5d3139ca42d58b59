package github

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Provider builds and caches one Client per credentials Secret, so every pool that uses
// a Secret shares its installation token, registration tokens, runner group cache and
// rate-limit state. A Secret whose credentials change (rotation) gets a new Client; one
// whose other fields change (labels, annotations) keeps its Client: the cache is keyed by
// a fingerprint of the credentials, not by resourceVersion, so rate-limit state survives
// unrelated updates. Safe for concurrent use.
type Provider struct {
	opts ProviderOptions

	mu      sync.Mutex
	clients map[types.NamespacedName]providerEntry
}

// ProviderOptions configure the Clients a Provider builds. Options.Name is set per
// Secret to its namespace/name.
type ProviderOptions struct {
	Options
	// NewClient builds a Client; default NewClient. Tests replace it.
	NewClient func(Credentials, Options) (Client, error)
}

type providerEntry struct {
	fingerprint string
	client      Client
}

// NewProvider returns an empty Provider.
func NewProvider(opts ProviderOptions) *Provider {
	if opts.NewClient == nil {
		opts.NewClient = NewClient
	}
	return &Provider{opts: opts, clients: map[types.NamespacedName]providerEntry{}}
}

// ForSecret returns the Client for a credentials Secret, building it on first use or
// when the credentials changed. Errors from parsing name the Secret and the key to fix.
func (p *Provider) ForSecret(secret *corev1.Secret) (Client, error) {
	return p.Get(types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name}, secret.Data)
}

// Get returns the Client for the credentials in data, read from the Secret named key.
func (p *Provider) Get(key types.NamespacedName, data map[string][]byte) (Client, error) {
	creds, err := ParseCredentials(data)
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", key, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.clients[key]; ok && e.fingerprint == creds.fingerprint {
		return e.client, nil
	}
	opts := p.opts.Options
	opts.Name = key.String()
	c, err := p.opts.NewClient(creds, opts)
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", key, err)
	}
	p.clients[key] = providerEntry{fingerprint: creds.fingerprint, client: c}
	return c, nil
}

// Forget drops the Client of a deleted Secret.
func (p *Provider) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.clients, key)
}
