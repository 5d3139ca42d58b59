package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// TemplateHash identifies a pool template: the first 16 hex digits of the SHA-256 of its
// JSON. A Runner records the hash of the template its pod was made from
// (status.templateHash, set when the pod is created); the pool replaces idle and
// pending runners whose hash is not its template's.
func TemplateHash(tmpl corev1.PodTemplateSpec) string {
	b, err := json.Marshal(tmpl)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// PoolTemplateHash is TemplateHash of the pool's template, remembered for the pool's
// generation (the API server raises it with every change of spec): every reconcile of
// every runner compares against it, and marshaling the template each time was about
// 1.5 % of the controller's CPU under load.
func PoolTemplateHash(pool *v1alpha1.RunnerPool) string {
	if pool.UID == "" || pool.Generation == 0 {
		return poolPodHash(pool) // not from the API server: nothing to key on
	}
	if v, ok := poolHashes.Load(pool.UID); ok {
		if h := v.(poolHash); h.generation == pool.Generation {
			return h.hash
		}
	}
	h := poolPodHash(pool)
	poolHashes.Store(pool.UID, poolHash{generation: pool.Generation, hash: h})
	return h
}

// poolHashes holds PoolTemplateHash's answers: types.UID → poolHash, one per pool.
var poolHashes sync.Map

type poolHash struct {
	generation int64
	hash       string
}

// ForgetPool drops what PoolTemplateHash remembers of a deleted pool.
func ForgetPool(uid types.UID) { poolHashes.Delete(uid) }

// markOutdated sets status.outdated: the runner's pod was made from another template
// than the pool's current one. A runner without a pod yet (or made before hashes were
// recorded) is not outdated: its pod, when made, follows the current template.
func markOutdated(s *scope) {
	h := s.runner.Status.TemplateHash
	s.runner.Status.Outdated = h != "" && h != PoolTemplateHash(s.pool)
}
