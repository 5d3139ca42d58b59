package runner

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// EvictionWebhookName is the eviction webhook's name in its configuration.
const EvictionWebhookName = "evictions.gantry.dev"

// EvictionWebhookConfiguration is the ValidatingWebhookConfiguration that sends the
// evictions of pods in the namespaces selected (nil: every namespace) to the eviction
// webhook at cc, as the chart renders it: failurePolicy Ignore (the webhook never
// refuses, and the pools' PodDisruptionBudgets decide without it), sideEffects
// NoneOnDryRun (a dry run retires nothing).
func EvictionWebhookConfiguration(name string, cc admissionregistrationv1.WebhookClientConfig, namespaces *metav1.LabelSelector, timeoutSeconds int32) *admissionregistrationv1.ValidatingWebhookConfiguration {
	if namespaces == nil {
		namespaces = &metav1.LabelSelector{}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         EvictionWebhookName,
			ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:          ptr.To(timeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       namespaces,
		}},
	}
}
