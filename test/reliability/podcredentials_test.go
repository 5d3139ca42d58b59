package reliability

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// podCredentials lists the credentials a runner pod, as the API server admitted it,
// hands its job beyond the runner's own JIT configuration: a ServiceAccount token
// (mounted, or not ruled out), a Secret in a volume or an environment variable, service
// links. Each entry says where; an empty list means the job gets nothing but its own
// registration.
func podCredentials(p *corev1.Pod) []string {
	var out []string
	if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
		out = append(out, "automountServiceAccountToken is not false")
	}
	if p.Spec.EnableServiceLinks == nil || *p.Spec.EnableServiceLinks {
		out = append(out, "enableServiceLinks is not false")
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Secret != nil:
			out = append(out, fmt.Sprintf("volume %s mounts Secret %s", v.Name, v.Secret.SecretName))
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					out = append(out, fmt.Sprintf("volume %s holds a ServiceAccount token", v.Name))
				}
				if s.Secret != nil {
					out = append(out, fmt.Sprintf("volume %s projects Secret %s", v.Name, s.Secret.Name))
				}
			}
		}
	}
	own := p.Labels[v1alpha1.LabelRunner]
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					out = append(out, fmt.Sprintf("container %s takes its environment from Secret %s", c.Name, e.SecretRef.Name))
				}
			}
			for _, e := range c.Env {
				ref := e.ValueFrom
				if ref == nil || ref.SecretKeyRef == nil {
					continue
				}
				if c.Name == v1alpha1.RunnerContainerName && e.Name == runner.EnvJITConfig &&
					ref.SecretKeyRef.Name == own && ref.SecretKeyRef.Key == runner.JITConfigKey {
					continue
				}
				out = append(out, fmt.Sprintf("container %s variable %s reads key %s of Secret %s", c.Name, e.Name, ref.SecretKeyRef.Key, ref.SecretKeyRef.Name))
			}
		}
	}
	sort.Strings(out)
	return out
}

// addedCredentials is podCredentials less what the pod's pool template asks for itself:
// a Secret the user's own template reads is the user's choice (a registry token, say);
// what Gantry must never do is add one, or leave a ServiceAccount token or service
// links the template did not ask for.
func addedCredentials(ctx context.Context, p *corev1.Pod) []string {
	found := podCredentials(p)
	pool := &v1alpha1.RunnerPool{}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cp.c.Get(gctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Labels[v1alpha1.LabelPool]}, pool); err != nil {
		return found // no template to compare with: every credential counts
	}
	own := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: *pool.Spec.Template.Spec.DeepCopy()}
	own.Spec.AutomountServiceAccountToken, own.Spec.EnableServiceLinks = ptr.To(false), ptr.To(false)
	asked := map[string]bool{}
	for _, c := range podCredentials(own) {
		asked[c] = true
	}
	var out []string
	for _, c := range found {
		if !asked[c] {
			out = append(out, c)
		}
	}
	return out
}

// The check's positive control: a runner pod as Gantry makes it passes, and each
// credential a careless pod could carry is named.
func TestPodCredentialsNamesEachCredential(t *testing.T) {
	jit := corev1.EnvVar{Name: runner.EnvJITConfig, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "linux-abcde"}, Key: runner.JITConfigKey}}}
	clean := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "linux-abcde", Labels: map[string]string{v1alpha1.LabelRunner: "linux-abcde"}},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
				Containers: []corev1.Container{{Name: v1alpha1.RunnerContainerName, Env: []corev1.EnvVar{jit}}},
			},
		}
	}
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{name: "as Gantry makes it", mutate: func(*corev1.Pod) {}},
		{
			name: "admitted with a ServiceAccount token",
			mutate: func(p *corev1.Pod) {
				p.Spec.AutomountServiceAccountToken = nil
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{
					Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
			},
			want: []string{"automountServiceAccountToken is not false", "volume kube-api-access-x holds a ServiceAccount token"},
		},
		{
			name:   "service links on",
			mutate: func(p *corev1.Pod) { p.Spec.EnableServiceLinks = ptr.To(true) },
			want:   []string{"enableServiceLinks is not false"},
		},
		{
			name: "another runner's JIT configuration, a Secret volume, envFrom a Secret",
			mutate: func(p *corev1.Pod) {
				other := jit.DeepCopy()
				other.ValueFrom.SecretKeyRef.Name = "linux-zzzzz"
				p.Spec.Containers[0].Env = []corev1.EnvVar{*other}
				p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "github-creds"}}}}
				p.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "github-creds"}}}}
			},
			want: []string{
				"container runner takes its environment from Secret github-creds",
				"container runner variable ACTIONS_RUNNER_INPUT_JITCONFIG reads key jitconfig of Secret linux-zzzzz",
				"volume creds mounts Secret github-creds",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := clean()
			tt.mutate(p)
			if diff := cmp.Diff(tt.want, podCredentials(p)); diff != "" {
				t.Errorf("podCredentials (-want +got):\n%s", diff)
			}
		})
	}
}
