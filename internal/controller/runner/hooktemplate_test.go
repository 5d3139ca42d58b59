package runner

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	containerhooks "github.com/gantry-dev/gantry/config/container-hooks"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// The hook template carries Gantry's labels (which the pool's cannot replace) and the
// runner pod's security defaults (with the hook's own fsGroup) unless the pool sets its
// own; it is JSON, which the hook reads as YAML and the wrapper as JSON.
func TestWorkflowPodTemplate(t *testing.T) {
	gantryLabels := map[string]string{
		"app.kubernetes.io/managed-by": "gantry", "gantry.dev/pool": "k8s", "gantry.dev/pool-namespace": "ci",
		"gantry.dev/runner": "", "gantry.dev/container-hook": "workflow",
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range extra {
			out[k] = v
		}
		for k, v := range gantryLabels {
			out[k] = v
		}
		return out
	}
	defaultPodSC := &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1001), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	defaultJobSC := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}
	tests := []struct {
		name string
		tmpl *v1alpha1.WorkflowPodTemplate
		want corev1.PodTemplateSpec
	}{
		{"defaults", nil, corev1.PodTemplateSpec{}},
		{"the pool's labels, placement, security and resources", &v1alpha1.WorkflowPodTemplate{
			Labels:          map[string]string{"team": "a", "gantry.dev/pool": "spoofed"},
			NodeSelector:    map[string]string{"pool": "ci"},
			Tolerations:     []corev1.Toleration{{Key: "ci", Operator: corev1.TolerationOpExists}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			Resources:       &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		}, corev1.PodTemplateSpec{}},
	}
	tests[0].want.Labels = gantryLabels
	tests[0].want.Spec = corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
		SecurityContext: defaultPodSC, Containers: []corev1.Container{{Name: "$job", SecurityContext: defaultJobSC}}}
	tests[1].want.Labels = with(map[string]string{"team": "a"})
	tests[1].want.Spec = corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
		NodeSelector: map[string]string{"pool": "ci"}, Tolerations: []corev1.Toleration{{Key: "ci", Operator: corev1.TolerationOpExists}},
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
		Containers: []corev1.Container{{Name: "$job", SecurityContext: defaultJobSC,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testutil.RunnerPool("ci", "k8s").KubernetesMode("jobs").Obj()
			pool.Spec.ContainerMode.WorkflowPodTemplate = tt.tmpl
			data := HookConfigData(pool)
			if data[HookWrapperKey] != containerhooks.Wrapper {
				t.Errorf("the ConfigMap's %s is not config/container-hooks/hook.js", HookWrapperKey)
			}
			if !json.Valid([]byte(data[HookTemplateKey])) {
				t.Errorf("the template is not JSON: %s", data[HookTemplateKey])
			}
			if data[legacyTemplateKey] != data[HookTemplateKey] {
				t.Errorf("runner pods made before the wrapper read %s: want the same template there", legacyTemplateKey)
			}
			var got corev1.PodTemplateSpec
			if err := yaml.UnmarshalStrict([]byte(data[HookTemplateKey]), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hook template (-want +got):\n%s", diff)
			}
		})
	}
}

// A WorkflowPodReady True condition alone is not worth a status write: it rides with
// the next one. Anything else — a False one, a True one replacing a stored False — is
// written.
func TestWorkflowPodReadyRides(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionWorkflowPodReady, Status: status, Reason: reason}
	}
	online := metav1.Condition{Type: "Online", Status: metav1.ConditionTrue, Reason: "Online"}
	tests := []struct {
		name          string
		before, after v1alpha1.RunnerStatus
		want          bool
	}{
		{"True alone", v1alpha1.RunnerStatus{Conditions: []metav1.Condition{online}},
			v1alpha1.RunnerStatus{Conditions: []metav1.Condition{online, cond(metav1.ConditionTrue, v1alpha1.ReasonWorkflowPodRunning)}}, true},
		{"True and the phase", v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerIdle},
			v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerBusy, Conditions: []metav1.Condition{cond(metav1.ConditionTrue, v1alpha1.ReasonWorkflowPodRunning)}}, false},
		{"False", v1alpha1.RunnerStatus{},
			v1alpha1.RunnerStatus{Conditions: []metav1.Condition{cond(metav1.ConditionFalse, v1alpha1.ReasonWorkflowPodImagePullFailed)}}, false},
		{"False turned True", v1alpha1.RunnerStatus{Conditions: []metav1.Condition{cond(metav1.ConditionFalse, v1alpha1.ReasonWorkflowPodImagePullFailed), online}},
			v1alpha1.RunnerStatus{Conditions: []metav1.Condition{cond(metav1.ConditionTrue, v1alpha1.ReasonWorkflowPodRunning), online}}, false},
		{"nothing", v1alpha1.RunnerStatus{}, v1alpha1.RunnerStatus{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{before: &v1alpha1.Runner{Status: tc.before}, runner: &v1alpha1.Runner{Status: tc.after}}
			if got := workflowPodReadyRides(s); got != tc.want {
				t.Errorf("workflowPodReadyRides = %v, want %v", got, tc.want)
			}
		})
	}
}
