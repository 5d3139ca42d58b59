// Package containerhooks embeds the fence of Kubernetes mode — the admission policy on
// what a runner's hook token may write — so that `gantry sim run` installs it on the
// clusters it starts, as an install does, without a checkout of this repository.
package containerhooks

import _ "embed"

// AdmissionPolicy is admission-policy.yaml: the ValidatingAdmissionPolicy and its
// binding.
//
//go:embed admission-policy.yaml
var AdmissionPolicy []byte
