package netpol

import (
	"errors"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// ErrInvalidPolicy is returned by Parse for a file that is not a usable runner
// NetworkPolicy.
var ErrInvalidPolicy = errors.New("invalid runner NetworkPolicy")

// Parse reads the runner NetworkPolicy the controller copies into every namespace that
// holds RunnerPools: a NetworkPolicy manifest with a name and no namespace (the chart's
// ConfigMap, or config/components/network-policies/runners.yaml).
func Parse(b []byte) (*networkingv1.NetworkPolicy, error) {
	p := &networkingv1.NetworkPolicy{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	switch {
	case p.Kind != "NetworkPolicy" || p.APIVersion != networkingv1.SchemeGroupVersion.String():
		return nil, fmt.Errorf("%w: kind %q apiVersion %q, want NetworkPolicy networking.k8s.io/v1", ErrInvalidPolicy, p.Kind, p.APIVersion)
	case p.Name == "":
		return nil, fmt.Errorf("%w: it has no metadata.name", ErrInvalidPolicy)
	case p.Namespace != "":
		return nil, fmt.Errorf("%w: it names namespace %q; the controller puts it in each pool's namespace", ErrInvalidPolicy, p.Namespace)
	}
	if _, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector); err != nil {
		return nil, fmt.Errorf("%w: podSelector: %w", ErrInvalidPolicy, err)
	}
	return p, nil
}

// ForNamespace is the policy as the controller applies it in namespace ns: the
// template's labels, annotations and spec, Gantry's managed-by label (the cache holds
// only Gantry's policies), and an owner reference to each pool of the namespace, so the
// garbage collector deletes the policy with the last of them.
func ForNamespace(tmpl *networkingv1.NetworkPolicy, ns string, pools []v1alpha1.RunnerPool) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        tmpl.Name,
			Namespace:   ns,
			Labels:      map[string]string{},
			Annotations: tmpl.Annotations,
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	for k, v := range tmpl.Labels {
		p.Labels[k] = v
	}
	p.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	for _, pool := range pools {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: v1alpha1.GroupVersion.String(),
			Kind:       "RunnerPool",
			Name:       pool.Name,
			UID:        pool.UID,
		})
	}
	return p
}
