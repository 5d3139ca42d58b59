// Package v1alpha1 holds Gantry's API: RunnerPool, a pool of ephemeral GitHub Actions
// runners, and Runner, one ephemeral runner owned by its pool.
//
// +kubebuilder:object:generate=true
// +groupName=gantry.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of Gantry's API.
	GroupVersion = schema.GroupVersion{Group: "gantry.dev", Version: "v1alpha1"}

	// SchemeBuilder registers Gantry's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds Gantry's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &RunnerPool{}, &RunnerPoolList{}, &Runner{}, &RunnerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
