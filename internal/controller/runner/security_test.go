package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// podAccess is what a runner pod gives job code beyond its own containers.
type podAccess struct {
	AutomountServiceAccountToken *bool
	EnableServiceLinks           *bool
	SecurityContext              *corev1.PodSecurityContext
	ContainerSecurityContexts    []*corev1.SecurityContext
}

func accessOf(spec *corev1.PodSpec) podAccess {
	a := podAccess{
		AutomountServiceAccountToken: spec.AutomountServiceAccountToken,
		EnableServiceLinks:           spec.EnableServiceLinks,
		SecurityContext:              spec.SecurityContext,
	}
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		a.ContainerSecurityContexts = append(a.ContainerSecurityContexts, c.SecurityContext)
	}
	return a
}

// The ServiceAccount token and service links are off unless the template sets the field
// itself, whatever it says about securityContext; a Windows template gets no Linux-only
// setting, which the API server would refuse.
func TestBuildPodTokenServiceLinksAndWindows(t *testing.T) {
	restrictedPod := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](RunnerUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	restricted := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	runnerC := corev1.Container{Name: v1alpha1.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:latest"}
	dind := corev1.Container{Name: "dind", Image: "docker:dind", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}
	tests := []struct {
		name   string
		mutate func(*corev1.PodSpec)
		want   podAccess
	}{
		{
			name:   "template sets nothing: no token, no service links, restricted",
			mutate: func(*corev1.PodSpec) {},
			want: podAccess{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
				SecurityContext: restrictedPod, ContainerSecurityContexts: []*corev1.SecurityContext{restricted}},
		},
		{
			name: "template asks for the token (IRSA, Workload Identity): it keeps it",
			mutate: func(s *corev1.PodSpec) {
				s.AutomountServiceAccountToken = ptr.To(true)
				s.ServiceAccountName = "ci-deployer"
			},
			want: podAccess{AutomountServiceAccountToken: ptr.To(true), EnableServiceLinks: ptr.To(false),
				SecurityContext: restrictedPod, ContainerSecurityContexts: []*corev1.SecurityContext{restricted}},
		},
		{
			name:   "template turns service links on: they stay on",
			mutate: func(s *corev1.PodSpec) { s.EnableServiceLinks = ptr.To(true) },
			want: podAccess{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(true),
				SecurityContext: restrictedPod, ContainerSecurityContexts: []*corev1.SecurityContext{restricted}},
		},
		{
			name: "template says false explicitly: false",
			mutate: func(s *corev1.PodSpec) {
				s.AutomountServiceAccountToken, s.EnableServiceLinks = ptr.To(false), ptr.To(false)
			},
			want: podAccess{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
				SecurityContext: restrictedPod, ContainerSecurityContexts: []*corev1.SecurityContext{restricted}},
		},
		{
			name:   "docker-in-docker sets a securityContext: still no token, no service links",
			mutate: func(s *corev1.PodSpec) { s.Containers = append(s.Containers, dind) },
			want: podAccess{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
				ContainerSecurityContexts: []*corev1.SecurityContext{nil, dind.SecurityContext}},
		},
		{
			name:   "windows: no Linux security settings, still no token and no service links",
			mutate: func(s *corev1.PodSpec) { s.OS = &corev1.PodOS{Name: corev1.Windows} },
			want: podAccess{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
				ContainerSecurityContexts: []*corev1.SecurityContext{nil}},
		},
		{
			name:   "linux named explicitly: restricted as usual",
			mutate: func(s *corev1.PodSpec) { s.OS = &corev1.PodOS{Name: corev1.Linux} },
			want: podAccess{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
				SecurityContext: restrictedPod, ContainerSecurityContexts: []*corev1.SecurityContext{restricted}},
		},
		{
			name:   "user namespaces are the template's choice, kept",
			mutate: func(s *corev1.PodSpec) { s.HostUsers = ptr.To(false) },
			want: podAccess{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
				SecurityContext: restrictedPod, ContainerSecurityContexts: []*corev1.SecurityContext{restricted}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testutil.RunnerPool("ci", "linux").Containers(runnerC).Obj()
			tt.mutate(&pool.Spec.Template.Spec)
			before := pool.Spec.Template.DeepCopy()
			runner := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-abcde"}, Spec: v1alpha1.RunnerSpec{PoolName: "linux"}}
			pod := buildPod(runner, pool)
			if diff := cmp.Diff(tt.want, accessOf(&pod.Spec)); diff != "" {
				t.Errorf("runner pod (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before.Spec.HostUsers, pod.Spec.HostUsers); diff != "" {
				t.Errorf("hostUsers changed (-template +pod):\n%s", diff)
			}
			if diff := cmp.Diff(before, &pool.Spec.Template); diff != "" {
				t.Errorf("buildPod changed the pool's template (-before +after):\n%s", diff)
			}
		})
	}
}
