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

func TestBuildPodSecurityDefaults(t *testing.T) {
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
		name           string
		init           []corev1.Container
		containers     []corev1.Container
		podSC          *corev1.PodSecurityContext
		wantPodSC      *corev1.PodSecurityContext
		wantInitSC     []*corev1.SecurityContext
		wantContainers []*corev1.SecurityContext
	}{
		{
			name:           "no securityContext anywhere: restricted defaults",
			init:           []corev1.Container{{Name: "setup", Image: "busybox"}},
			containers:     []corev1.Container{runnerC, {Name: "cache", Image: "redis"}},
			wantPodSC:      restrictedPod,
			wantInitSC:     []*corev1.SecurityContext{restricted},
			wantContainers: []*corev1.SecurityContext{restricted, restricted},
		},
		{
			name:           "docker-in-docker sidecar: the template is left as written",
			containers:     []corev1.Container{runnerC, dind},
			wantContainers: []*corev1.SecurityContext{nil, dind.SecurityContext},
		},
		{
			name:           "pod securityContext set: left as written",
			containers:     []corev1.Container{runnerC},
			podSC:          &corev1.PodSecurityContext{FSGroup: ptr.To[int64](123)},
			wantPodSC:      &corev1.PodSecurityContext{FSGroup: ptr.To[int64](123)},
			wantContainers: []*corev1.SecurityContext{nil},
		},
		{
			name:           "an init container's securityContext set: left as written",
			init:           []corev1.Container{{Name: "chown", Image: "busybox", SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}}},
			containers:     []corev1.Container{runnerC},
			wantInitSC:     []*corev1.SecurityContext{{RunAsUser: ptr.To[int64](0)}},
			wantContainers: []*corev1.SecurityContext{nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testutil.RunnerPool("ci", "linux").Containers(tt.containers...).Obj()
			pool.Spec.Template.Spec.InitContainers = tt.init
			pool.Spec.Template.Spec.SecurityContext = tt.podSC
			runner := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-abcde"}, Spec: v1alpha1.RunnerSpec{PoolName: "linux"}}
			pod := buildPod(runner, pool)
			if diff := cmp.Diff(tt.wantPodSC, pod.Spec.SecurityContext); diff != "" {
				t.Errorf("pod securityContext (-want +got):\n%s", diff)
			}
			var gotInit, gotContainers []*corev1.SecurityContext
			for _, c := range pod.Spec.InitContainers {
				gotInit = append(gotInit, c.SecurityContext)
			}
			for _, c := range pod.Spec.Containers {
				gotContainers = append(gotContainers, c.SecurityContext)
			}
			if diff := cmp.Diff(tt.wantInitSC, gotInit); diff != "" {
				t.Errorf("init containers' securityContext (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantContainers, gotContainers); diff != "" {
				t.Errorf("containers' securityContext (-want +got):\n%s", diff)
			}
			// The pool's template is never changed in place.
			if pool.Spec.Template.Spec.SecurityContext != tt.podSC {
				t.Errorf("buildPod changed the pool's template")
			}
		})
	}
}

// PoolTemplateHash answers TemplateHash for the pool's current template: a change of
// spec, which raises the generation, is seen at once.
func TestPoolTemplateHashFollowsTheGeneration(t *testing.T) {
	pool := &v1alpha1.RunnerPool{}
	pool.UID, pool.Generation = "uid-hash-test", 1
	pool.Spec.Template.Spec.Containers = []corev1.Container{{Name: "runner", Image: "runner:1"}}
	if got, want := PoolTemplateHash(pool), TemplateHash(pool.Spec.Template); got != want {
		t.Fatalf("PoolTemplateHash = %s, want %s", got, want)
	}
	first := PoolTemplateHash(pool)
	pool.Spec.Template.Spec.Containers[0].Image = "runner:2"
	pool.Generation = 2
	if got, want := PoolTemplateHash(pool), TemplateHash(pool.Spec.Template); got != want || got == first {
		t.Errorf("after a template change PoolTemplateHash = %s, want %s (was %s)", got, want, first)
	}
	ForgetPool(pool.UID)
	other := &v1alpha1.RunnerPool{} // not from the API server: no UID, no generation
	other.Spec.Template.Spec.Containers = []corev1.Container{{Name: "runner", Image: "runner:3"}}
	if got, want := PoolTemplateHash(other), TemplateHash(other.Spec.Template); got != want {
		t.Errorf("PoolTemplateHash of a pool without UID = %s, want %s", got, want)
	}
}
