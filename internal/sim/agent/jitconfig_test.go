package agent

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gantry-dev/gantry/internal/controller/runner"
)

func TestJITConfigOf(t *testing.T) {
	secrets := map[string]*corev1.Secret{
		"arc-runner-abc": {Data: map[string][]byte{"jitToken": []byte("from-key")}},
		"env-all":        {Data: map[string][]byte{runner.EnvJITConfig: []byte("from-envfrom"), "INPUT_JITCONFIG": []byte("prefixed")}},
		"other":          {Data: map[string][]byte{"unrelated": []byte("x")}},
	}
	get := func(_ context.Context, name string) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	secretEnv := func(name, key string, optional bool) corev1.EnvVar {
		return corev1.EnvVar{Name: runner.EnvJITConfig, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}}
	}
	envFrom := func(name, prefix string) corev1.EnvFromSource {
		return corev1.EnvFromSource{Prefix: prefix, SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
	}
	pod := func(cs ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: cs}}
	}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantValue string
		wantFound bool
		wantErr   bool
		wantMay   bool
	}{
		{name: "literal value", wantValue: "literal", wantFound: true, wantMay: true,
			pod: pod(corev1.Container{Name: "runner", Env: []corev1.EnvVar{{Name: runner.EnvJITConfig, Value: "literal"}}})},
		{name: "secret key of any name", wantValue: "from-key", wantFound: true, wantMay: true,
			pod: pod(corev1.Container{Name: "runner", Env: []corev1.EnvVar{secretEnv("arc-runner-abc", "jitToken", false)}})},
		{name: "envFrom a secret", wantValue: "from-envfrom", wantFound: true, wantMay: true,
			pod: pod(corev1.Container{Name: "main", EnvFrom: []corev1.EnvFromSource{envFrom("env-all", "")}})},
		{name: "envFrom with a prefix", wantValue: "prefixed", wantFound: true, wantMay: true,
			pod: pod(corev1.Container{Name: "runner", EnvFrom: []corev1.EnvFromSource{envFrom("env-all", "ACTIONS_RUNNER_")}})},
		{name: "env wins over envFrom", wantValue: "literal", wantFound: true, wantMay: true,
			pod: pod(corev1.Container{Name: "runner", EnvFrom: []corev1.EnvFromSource{envFrom("env-all", "")},
				Env: []corev1.EnvVar{{Name: runner.EnvJITConfig, Value: "literal"}}})},
		{name: "the runner container first", wantValue: "runner's", wantFound: true, wantMay: true,
			pod: pod(corev1.Container{Name: "sidecar", Env: []corev1.EnvVar{{Name: runner.EnvJITConfig, Value: "sidecar's"}}},
				corev1.Container{Name: "runner", Env: []corev1.EnvVar{{Name: runner.EnvJITConfig, Value: "runner's"}}})},
		{name: "envFrom a secret without the key", wantMay: true,
			pod: pod(corev1.Container{Name: "runner", EnvFrom: []corev1.EnvFromSource{envFrom("other", "")}})},
		{name: "missing key of a required secret ref", wantErr: true, wantMay: true,
			pod: pod(corev1.Container{Name: "runner", Env: []corev1.EnvVar{secretEnv("other", "jit", false)}})},
		{name: "missing secret of an optional ref", wantMay: true,
			pod: pod(corev1.Container{Name: "runner", Env: []corev1.EnvVar{secretEnv("gone", "jit", true)}})},
		{name: "missing secret of a required ref", wantErr: true, wantMay: true,
			pod: pod(corev1.Container{Name: "runner", Env: []corev1.EnvVar{secretEnv("gone", "jit", false)}})},
		{name: "no JIT config at all",
			pod: pod(corev1.Container{Name: "web", Env: []corev1.EnvVar{{Name: "PORT", Value: "80"}}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, found, err := jitConfigOf(context.Background(), tc.pod, get)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			type out struct {
				Value      string
				Found, May bool
			}
			want := out{tc.wantValue, tc.wantFound, tc.wantMay}
			if diff := cmp.Diff(want, out{v, found, mayCarryJITConfig(tc.pod)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
