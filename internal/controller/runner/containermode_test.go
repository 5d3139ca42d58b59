package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// hookAccess is what a runner pod gives the hook: which ServiceAccount, which token in
// which container, and the hook's environment.
type hookAccess struct {
	ServiceAccount string
	Automount      *bool
	// TokenMounts are container: mount path of every projected ServiceAccount token.
	TokenMounts       map[string]string
	TokenExpiration   int64
	HookEnv           map[string]string
	WorkMount         string
	WorkVolumeIsClaim bool
}

func hookAccessOf(pod *corev1.Pod) hookAccess {
	a := hookAccess{ServiceAccount: pod.Spec.ServiceAccountName, Automount: pod.Spec.AutomountServiceAccountToken,
		TokenMounts: map[string]string{}, HookEnv: map[string]string{}}
	tokenVolumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				tokenVolumes[v.Name] = true
				a.TokenExpiration = ptr.Deref(s.ServiceAccountToken.ExpirationSeconds, 0)
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == workVolumeName && v.Ephemeral != nil {
			a.WorkVolumeIsClaim = true
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if tokenVolumes[m.Name] {
				a.TokenMounts[c.Name] = m.MountPath
			}
			if m.MountPath == v1alpha1.DefaultWorkVolumeMountPath {
				a.WorkMount = c.Name + ":" + m.Name
			}
		}
		for _, e := range c.Env {
			switch e.Name {
			case EnvContainerHooks, EnvWrappedHook, EnvKubernetesNamespace, EnvContainerHookTemplate, EnvPrepareJobTimeout, EnvRequireJobContainer,
				"ACTIONS_RUNNER_USE_KUBE_SCHEDULER":
				a.HookEnv[e.Name] = e.Value
			case EnvRunnerPodName:
				a.HookEnv[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
	}
	return a
}

// Only a Kubernetes-mode pool's runner pod gets a token: the pool's ServiceAccount,
// projected for an hour into the runner container alone, with the hook's environment:
// the runner runs Gantry's wrapper, which runs hookPath. useKubeScheduler sets nothing:
// the hook never reads ACTIONS_RUNNER_USE_KUBE_SCHEDULER.
func TestContainerModeGivesTheRunnerContainerAloneAShortLivedToken(t *testing.T) {
	runner := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "k8s-abcde"}, Spec: v1alpha1.RunnerSpec{PoolName: "k8s"}}
	sidecar := corev1.Container{Name: "sidecar", Image: "busybox"}
	runnerC := corev1.Container{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest"}
	hookEnv := map[string]string{
		EnvContainerHooks:        "/etc/gantry/container-hook/hook.js",
		EnvWrappedHook:           "/home/runner/k8s-novolume/index.js",
		EnvRunnerPodName:         "metadata.name",
		EnvKubernetesNamespace:   "ci-jobs",
		EnvContainerHookTemplate: "/etc/gantry/container-hook/workflow-pod.json",
		EnvPrepareJobTimeout:     "300",
		EnvRequireJobContainer:   "true",
	}
	withEnv := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range hookEnv {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name string
		pool *v1alpha1.RunnerPool
		want hookAccess
	}{
		{"no container mode", testutil.RunnerPool("ci", "k8s").Containers(runnerC, sidecar).Obj(),
			hookAccess{Automount: ptr.To(false), TokenMounts: map[string]string{}, HookEnv: map[string]string{}}},
		{"type None", testutil.RunnerPool("ci", "k8s").Containers(runnerC, sidecar).ContainerMode(v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeNone}).Obj(),
			hookAccess{Automount: ptr.To(false), TokenMounts: map[string]string{}, HookEnv: map[string]string{}}},
		{"Kubernetes", testutil.RunnerPool("ci", "k8s").Containers(runnerC, sidecar).KubernetesMode("ci-jobs").Obj(),
			hookAccess{ServiceAccount: "k8s-container-hook", Automount: ptr.To(false),
				TokenMounts: map[string]string{"runner": ServiceAccountTokenDir}, TokenExpiration: 3600, HookEnv: hookEnv}},
		{"Kubernetes, template asking for the automatic token", func() *v1alpha1.RunnerPool {
			p := testutil.RunnerPool("ci", "k8s").Containers(runnerC, sidecar).KubernetesMode("ci-jobs").Obj()
			p.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true)
			return p
		}(), hookAccess{ServiceAccount: "k8s-container-hook", Automount: ptr.To(false),
			TokenMounts: map[string]string{"runner": ServiceAccountTokenDir}, TokenExpiration: 3600, HookEnv: hookEnv}},
		{"Kubernetes, every setting", testutil.RunnerPool("ci", "k8s").Containers(runnerC, sidecar).ContainerMode(v1alpha1.ContainerModeSpec{
			Type: v1alpha1.ContainerModeKubernetes, Namespace: "jobs", PrepareJobTimeout: &metav1.Duration{Duration: 90e9},
			RequireJobContainer: ptr.To(false), UseKubeScheduler: true, HookPath: "/hooks/index.js",
			WorkVolume: &v1alpha1.WorkVolumeSpec{Type: v1alpha1.WorkVolumeEphemeral, Ephemeral: &v1alpha1.EphemeralWorkVolume{Size: resource.MustParse("5Gi")}},
		}).Obj(), hookAccess{ServiceAccount: "k8s-container-hook", Automount: ptr.To(false),
			TokenMounts: map[string]string{"runner": ServiceAccountTokenDir}, TokenExpiration: 3600,
			HookEnv: withEnv(map[string]string{EnvKubernetesNamespace: "jobs", EnvPrepareJobTimeout: "90", EnvRequireJobContainer: "false",
				EnvWrappedHook: "/hooks/index.js"}),
			WorkMount: "runner:" + workVolumeName, WorkVolumeIsClaim: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hookAccessOf(buildPod(runner, tt.pool))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("runner pod's hook access (-want +got):\n%s", diff)
			}
		})
	}
}

// A changed containerMode outdates a Kubernetes-mode pool's runners; a pool in no mode
// keeps the hash of its template alone.
func TestPoolPodHashFollowsContainerMode(t *testing.T) {
	plain := testutil.RunnerPool("ci", "p").Obj()
	none := testutil.RunnerPool("ci", "p").ContainerMode(v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeNone}).Obj()
	k8s := testutil.RunnerPool("ci", "p").KubernetesMode("jobs").Obj()
	moved := testutil.RunnerPool("ci", "p").KubernetesMode("other-jobs").Obj()
	got := map[string]string{"plain": poolPodHash(plain), "none": poolPodHash(none), "k8s": poolPodHash(k8s), "moved": poolPodHash(moved)}
	want := TemplateHash(plain.Spec.Template)
	if got["plain"] != want || got["none"] != want {
		t.Errorf("pools in no container mode: hashes %q and %q, want the template's %q", got["plain"], got["none"], want)
	}
	if got["k8s"] == want || got["k8s"] == got["moved"] {
		t.Errorf("Kubernetes-mode hashes %q (jobs) and %q (other-jobs) must differ from each other and from the template's %q", got["k8s"], got["moved"], want)
	}
}
