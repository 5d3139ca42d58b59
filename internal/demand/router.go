package demand

import (
	"cmp"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// PoolKey names a RunnerPool.
type PoolKey = types.NamespacedName

// ScopeKind is the kind of GitHub scope a pool registers runners in.
type ScopeKind int

// Scope kinds, most specific first: the order is the routing rule's first key.
const (
	ScopeRepository ScopeKind = iota
	ScopeOrganization
	ScopeEnterprise
)

// Pool is what routing needs to know of a RunnerPool.
type Pool struct {
	Key  PoolKey
	Kind ScopeKind
	// Host is the GitHub host: github.com or a GHES host (with port, if any).
	Host string
	// Owner and Repo for repository scope, Owner for organization scope,
	// Enterprise for enterprise scope.
	Owner, Repo, Enterprise string
	// Labels are the labels the pool's runners register with GitHub, defaults
	// included (v1alpha1.RunnerPoolSpec.RunnerLabels): nothing is implied.
	Labels []string
	// External: the pool's demand comes from elsewhere (a runner scale set). Jobs
	// routed to it are neither counted as its demand nor reported unmatched.
	External bool
}

type routedPool struct {
	Pool
	labels map[string]struct{}
}

// Router decides which pool a job belongs to. The rule, applied to the pools whose
// scope contains the job's repository and whose labels cover the job's runs-on:
//
//  1. A job matches a pool when every label of its runs-on, compared
//     case-insensitively, is one its runners register (Pool.Labels: self-hosted, OS
//     and architecture unless the pool opts out, then its own), as GitHub matches a
//     job to a runner, and the job's repository is in the pool's scope (same host;
//     the repository itself, its owner organization, or the enterprise the payload
//     names).
//  2. Among matching pools the most specific scope wins: repository, then
//     organization, then enterprise.
//  3. Then the pool with the fewest labels: the closest fit, so a general job does
//     not take a runner from a specialised (say, GPU) pool that also matches.
//  4. Then the pool whose namespace/name sorts first.
//
// The rule is deterministic: every replica and every restart routes a job the same way.
type Router struct {
	mu    sync.RWMutex
	pools map[PoolKey]*routedPool
}

// NewRouter returns an empty Router.
func NewRouter() *Router { return &Router{pools: map[PoolKey]*routedPool{}} }

// SetPool adds or updates a pool.
func (r *Router) SetPool(p Pool) {
	rp := &routedPool{Pool: p, labels: make(map[string]struct{}, len(p.Labels))}
	rp.Host = strings.ToLower(p.Host)
	for _, l := range p.Labels {
		rp.labels[normalizeLabel(l)] = struct{}{}
	}
	r.mu.Lock()
	r.pools[p.Key] = rp
	r.mu.Unlock()
}

// RemovePool forgets a pool.
func (r *Router) RemovePool(key PoolKey) {
	r.mu.Lock()
	delete(r.pools, key)
	r.mu.Unlock()
}

// Route returns the pool a job belongs to, by the rule in the type's doc.
func (r *Router) Route(j Job) (PoolKey, bool) {
	p := r.route(j)
	if p == nil {
		return PoolKey{}, false
	}
	return p.Key, true
}

func (r *Router) route(j Job) *routedPool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var best *routedPool
	for _, p := range r.pools {
		if !p.matches(j) {
			continue
		}
		if best == nil || better(p, best) {
			best = p
		}
	}
	return best
}

func better(a, b *routedPool) bool {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(len(a.labels), len(b.labels)); c != 0 {
		return c < 0
	}
	return a.Key.String() < b.Key.String()
}

func (p *routedPool) matches(j Job) bool {
	if !strings.EqualFold(p.Host, j.Host) {
		return false
	}
	switch p.Kind {
	case ScopeRepository:
		if !strings.EqualFold(p.Owner, j.Owner) || !strings.EqualFold(p.Repo, j.Repo) {
			return false
		}
	case ScopeOrganization:
		if !strings.EqualFold(p.Owner, j.Owner) {
			return false
		}
	case ScopeEnterprise:
		if j.Enterprise == "" || !strings.EqualFold(p.Enterprise, j.Enterprise) {
			return false
		}
	default:
		return false
	}
	for _, l := range j.Labels {
		if _, ok := p.labels[normalizeLabel(l)]; !ok {
			return false
		}
	}
	return true
}
