// Package containerhooks embeds what Gantry ships for Kubernetes mode beyond its
// manifests: the fence — the admission policy on what a runner's hook token may write —
// so that `gantry sim run` installs it on the clusters it starts, as an install does,
// without a checkout of this repository; and the wrapper the runner runs in front of
// GitHub's container hook, which the controller puts in each pool's hook ConfigMap.
package containerhooks

import _ "embed"

// AdmissionPolicy is admission-policy.yaml: the ValidatingAdmissionPolicy and its
// binding.
//
//go:embed admission-policy.yaml
var AdmissionPolicy []byte

// Wrapper is hook.js: Gantry's wrapper of GitHub's Kubernetes container hook (its header
// says what it changes and why).
//
//go:embed hook.js
var Wrapper string
