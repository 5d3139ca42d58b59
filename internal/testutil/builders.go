// Package testutil has builders for Gantry's API types, so tests state only what they
// care about: testutil.RunnerPool("ns", "name").MinIdle(1).Obj().
package testutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// RunnerPoolBuilder builds a RunnerPool, valid unless a test makes it otherwise.
type RunnerPoolBuilder struct{ p v1alpha1.RunnerPool }

// RunnerPool starts a valid organization-scoped pool with a runner container.
func RunnerPool(namespace, name string) *RunnerPoolBuilder {
	return &RunnerPoolBuilder{p: v1alpha1.RunnerPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RunnerPool"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.RunnerPoolSpec{
			GitHub: v1alpha1.GitHubSpec{
				URL:                  "https://github.com/my-org",
				CredentialsSecretRef: v1alpha1.SecretReference{Name: "github-app"},
			},
			Labels:     []string{"linux", "x64"},
			MaxRunners: 10,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:  v1alpha1.RunnerContainerName,
				Image: "ghcr.io/actions/actions-runner:latest",
			}}}},
		},
	}}
}

// URL sets spec.github.url.
func (b *RunnerPoolBuilder) URL(u string) *RunnerPoolBuilder { b.p.Spec.GitHub.URL = u; return b }

// Credentials sets spec.github.credentialsSecretRef.name.
func (b *RunnerPoolBuilder) Credentials(name string) *RunnerPoolBuilder {
	b.p.Spec.GitHub.CredentialsSecretRef.Name = name
	return b
}

// RunnerGroup sets spec.github.runnerGroup.
func (b *RunnerPoolBuilder) RunnerGroup(g string) *RunnerPoolBuilder {
	b.p.Spec.GitHub.RunnerGroup = g
	return b
}

// Labels sets spec.labels.
func (b *RunnerPoolBuilder) Labels(l ...string) *RunnerPoolBuilder { b.p.Spec.Labels = l; return b }

// MinIdle sets spec.minIdle.
func (b *RunnerPoolBuilder) MinIdle(n int32) *RunnerPoolBuilder { b.p.Spec.MinIdle = n; return b }

// MaxRunners sets spec.maxRunners.
func (b *RunnerPoolBuilder) MaxRunners(n int32) *RunnerPoolBuilder { b.p.Spec.MaxRunners = n; return b }

// Mode sets spec.registrationMode.
func (b *RunnerPoolBuilder) Mode(m v1alpha1.RegistrationMode) *RunnerPoolBuilder {
	b.p.Spec.RegistrationMode = m
	return b
}

// ScaleSet makes the pool take its demand from a runner scale set named name ("" for
// the pool's name).
func (b *RunnerPoolBuilder) ScaleSet(name string) *RunnerPoolBuilder {
	b.p.Spec.Demand = v1alpha1.DemandSpec{Source: v1alpha1.DemandSourceScaleSet, ScaleSetName: name}
	return b
}

// Containers replaces the template's containers.
func (b *RunnerPoolBuilder) Containers(c ...corev1.Container) *RunnerPoolBuilder {
	b.p.Spec.Template.Spec.Containers = c
	return b
}

// Obj returns a copy of the pool built so far.
// Schedule adds a window to spec.warm.schedules.
func (b *RunnerPoolBuilder) Schedule(s v1alpha1.WarmSchedule) *RunnerPoolBuilder {
	if b.p.Spec.Warm == nil {
		b.p.Spec.Warm = &v1alpha1.WarmSpec{}
	}
	b.p.Spec.Warm.Schedules = append(b.p.Spec.Warm.Schedules, s)
	return b
}

// Predictive sets spec.warm.predictive.
func (b *RunnerPoolBuilder) Predictive(p v1alpha1.PredictiveWarmSpec) *RunnerPoolBuilder {
	if b.p.Spec.Warm == nil {
		b.p.Spec.Warm = &v1alpha1.WarmSpec{}
	}
	b.p.Spec.Warm.Predictive = &p
	return b
}

func (b *RunnerPoolBuilder) Obj() *v1alpha1.RunnerPool { return b.p.DeepCopy() }
