// Package reliability proves, under load and faults, that Gantry loses no job, creates
// no duplicate runner, kills no busy runner and leaks no secret. Each test is a
// scenario: real `gantry controller` processes (built from ./cmd/gantry, run as a
// ServiceAccount bound only to config/rbac/role.yaml, as nonroot with a read-only root
// filesystem where the machine allows it) against a real kube-apiserver with an audit
// log, the GitHub simulator over HTTP, and a fake kubelet that binds runner pods to
// nodes, runs a simulated runner agent in each, and confirms their deletion.
//
// Every scenario checks the same invariants at its end (see account) and records its
// figures; with GANTRY_RELIABILITY_OUT set, each test writes them to
// $GANTRY_RELIABILITY_OUT/<test>.json, which hack/reliability assembles into
// reliability.json and a table (`make reliability`). GANTRY_RELIABILITY_SCALE (default
// 1, as in CI) multiplies the load and the length of the faults. docs/reliability.md
// explains the guarantees and their bounds.
package reliability

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// cp is the package's control plane, controller binary and work directory.
var cp *controlPlane

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	// The scenarios spend most of their time waiting — for a Lease to expire, a fault
	// to end, a Retry-After — so they run side by side unless -parallel says otherwise
	// (`make reliability` runs them one at a time, for undisturbed figures).
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8")
	}
	var err error
	cp, err = startControlPlane()
	if err != nil {
		fmt.Fprintf(os.Stderr, "reliability: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cp.stop(code == 0); err != nil {
		fmt.Fprintf(os.Stderr, "reliability: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
