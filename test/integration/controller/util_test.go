package controller

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

func ownedBy(refs []metav1.OwnerReference, name string) bool {
	for _, r := range refs {
		if r.Name == name && r.Kind == "Runner" && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

func podJSON(t *testing.T, p *corev1.Pod) string {
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func runnerJSON(t *testing.T, r *v1alpha1.Runner) string {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func hasEvent(w *world, object, reason string) bool {
	var list corev1.EventList
	if err := w.c.List(w.ctx(), &list, client.InNamespace(w.ns)); err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name == object && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			return true
		}
	}
	return false
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func clientMergeFrom(obj client.Object) client.Patch { return client.MergeFrom(obj) }
