package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// getSecret reads a Secret of the pod's namespace.
type getSecret func(ctx context.Context, name string) (*corev1.Secret, error)

// runnerContainers are the pod's containers, the one named "runner" first: where the
// official runner image runs.
func runnerContainers(p *corev1.Pod) []corev1.Container {
	cs := slices.Clone(p.Spec.Containers)
	slices.SortStableFunc(cs, func(a, b corev1.Container) int {
		switch {
		case a.Name == v1alpha1.RunnerContainerName && b.Name != v1alpha1.RunnerContainerName:
			return -1
		case b.Name == v1alpha1.RunnerContainerName && a.Name != v1alpha1.RunnerContainerName:
			return 1
		}
		return 0
	})
	return cs
}

// mayCarryJITConfig reports whether a container of p could hold
// ACTIONS_RUNNER_INPUT_JITCONFIG: it names it in env, or takes a Secret's keys with
// envFrom.
func mayCarryJITConfig(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == runner.EnvJITConfig {
				return true
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.SecretRef != nil && strings.HasPrefix(runner.EnvJITConfig, ef.Prefix) {
				return true
			}
		}
	}
	return false
}

// jitConfigOf reads ACTIONS_RUNNER_INPUT_JITCONFIG as the kubelet would set it in
// the pod's runner container, however the pod supplies it: a literal value, valueFrom
// a Secret key (any Secret, any key), or envFrom a Secret (with its prefix). env wins
// over envFrom, and a later envFrom source over an earlier one, as in Kubernetes.
// found is false when no container sets it.
func jitConfigOf(ctx context.Context, p *corev1.Pod, get getSecret) (value string, found bool, err error) {
	for _, c := range runnerContainers(p) {
		for i := len(c.Env) - 1; i >= 0; i-- {
			e := c.Env[i]
			if e.Name != runner.EnvJITConfig {
				continue
			}
			if e.ValueFrom == nil {
				return e.Value, e.Value != "", nil
			}
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				return "", false, fmt.Errorf("container %s takes %s from a source other than a Secret", c.Name, runner.EnvJITConfig)
			}
			optional := ref.Optional != nil && *ref.Optional
			v, ok, err := secretKey(ctx, get, ref.Name, ref.Key)
			switch {
			case err != nil && optional && apierrors.IsNotFound(err):
				return "", false, nil
			case err != nil:
				return "", false, err
			case !ok && !optional:
				return "", false, fmt.Errorf("secret %s has no key %q for %s", ref.Name, ref.Key, runner.EnvJITConfig)
			}
			return v, ok, nil
		}
		for i := len(c.EnvFrom) - 1; i >= 0; i-- {
			ef := c.EnvFrom[i]
			key, ok := strings.CutPrefix(runner.EnvJITConfig, ef.Prefix)
			if ef.SecretRef == nil || !ok {
				continue
			}
			v, ok, err := secretKey(ctx, get, ef.SecretRef.Name, key)
			if err != nil {
				if apierrors.IsNotFound(err) && ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
					continue
				}
				return "", false, err
			}
			if ok {
				return v, true, nil
			}
		}
	}
	return "", false, nil
}

func secretKey(ctx context.Context, get getSecret, name, key string) (string, bool, error) {
	s, err := get(ctx, name)
	if err != nil {
		return "", false, fmt.Errorf("reading secret %s: %w", name, err)
	}
	if v, ok := s.Data[key]; ok {
		return string(v), true, nil
	}
	if v, ok := s.StringData[key]; ok {
		return v, true, nil
	}
	return "", false, nil
}
