package runnerpool

import (
	"fmt"
	"strings"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// storedSpecError says why a stored pool cannot be used as it is, or nil. The API server
// refuses such pools today; this catches those stored before a rule existed: a field
// this version cannot decode (a recovery duration such as "600"), or a name too long for
// the Runner names and labels derived from it; or one too costly for the API server to
// check: a runner container variable Gantry sets itself (ACTIONS_RUNNER_INPUT_JITCONFIG,
// GANTRY_RUNNER_*), which would silently replace the template's. The pool reports it in Ready and Degraded
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
	for _, c := range pool.Spec.Template.Spec.Containers {
		if c.Name != v1alpha1.RunnerContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.Name == runner.EnvJITConfig || strings.HasPrefix(e.Name, "GANTRY_RUNNER_") {
				return &controller.ConfigError{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
					"template.spec.containers[runner].env sets %s, which Gantry sets for each runner and would silently replace: "+
						"remove it or use another name, such as MY_RUNNER_SETTING", e.Name)}
			}
		}
	}
	return cacheSpecError(pool)
}
