package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// The runner pods the controller creates, as an API server with ServiceAccount admission
// on admits them: no token and no service links by default, the token when the
// template asks for it.
func TestRunnerPodsCarryNoTokenUnlessTheTemplateAsks(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("plain").MinIdle(1).Obj())
	irsa := w.pool("irsa").MinIdle(1).Obj()
	irsa.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true)
	w.create(irsa)

	podOf := func(pool string) *corev1.Pod {
		t.Helper()
		var pod *corev1.Pod
		w.eventually("a runner pod of pool "+pool, func() (bool, error) {
			var pods corev1.PodList
			if err := w.c.List(w.ctx(), &pods, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
				return false, err
			}
			if len(pods.Items) == 0 {
				return false, nil
			}
			pod = &pods.Items[0]
			return true, nil
		})
		return pod
	}
	tokens := func(p *corev1.Pod) int {
		n := 0
		for _, v := range p.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					n++
				}
			}
		}
		return n
	}

	plain := podOf("plain")
	if n := tokens(plain); n != 0 || plain.Spec.AutomountServiceAccountToken == nil || *plain.Spec.AutomountServiceAccountToken {
		t.Errorf("pool plain's pod: %d token volumes, automountServiceAccountToken %v; want none and false", n, plain.Spec.AutomountServiceAccountToken)
	}
	if plain.Spec.EnableServiceLinks == nil || *plain.Spec.EnableServiceLinks {
		t.Errorf("pool plain's pod: enableServiceLinks %v, want false", plain.Spec.EnableServiceLinks)
	}
	if sc := plain.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil {
		t.Errorf("pool plain's pod lacks the restricted defaults: %+v", sc)
	}
	if got := podOf("irsa"); tokens(got) != 1 || got.Spec.ServiceAccountName != "default" {
		t.Errorf("pool irsa's pod (automountServiceAccountToken: true): %d token volumes, ServiceAccount %q; want 1 and default", tokens(got), got.Spec.ServiceAccountName)
	}
}
