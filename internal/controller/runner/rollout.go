package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
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

// markOutdated sets status.outdated: the runner's pod was made from another template
// than the pool's current one. A runner without a pod yet (or made before hashes were
// recorded) is not outdated: its pod, when made, follows the current template.
func markOutdated(s *scope) {
	h := s.runner.Status.TemplateHash
	s.runner.Status.Outdated = h != "" && h != TemplateHash(s.pool.Spec.Template)
}
