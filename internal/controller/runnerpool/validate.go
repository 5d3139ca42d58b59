package runnerpool

import (
	"fmt"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
)

// storedSpecError says why a stored pool cannot be used as it is, or nil. The API server
// refuses such pools today; this catches those stored before a rule existed: a field
// this version cannot decode (a recovery duration such as "600"), or a name too long for
// the Runner names and labels derived from it. The pool reports it in Ready and Degraded
// (reason InvalidSpec, with a Warning event) and creates no runner; other pools are not
// affected.
func storedSpecError(pool *v1alpha1.RunnerPool) error {
	if pool.DecodeError != "" {
		return &controller.ConfigError{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
			"the stored pool has fields Gantry cannot read (%s): fix them, for example recovery durations with units such as \"10m\"; "+
				"`kubectl get runnerpool %s -o yaml` shows what is stored", pool.DecodeError, pool.Name)}
	}
	if n := len(pool.Name); n > v1alpha1.MaxPoolNameLength {
		return &controller.ConfigError{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
			"the pool's name has %d characters, more than %d: its runners' names and labels would be too long; "+
				"create the pool again under a shorter name", n, v1alpha1.MaxPoolNameLength)}
	}
	return nil
}
