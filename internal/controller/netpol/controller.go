// Package netpol is the runner NetworkPolicy controller: it puts the runner
// NetworkPolicy (docs/security.md) in every namespace that holds RunnerPools, owned by
// those pools, so runner pods are fenced wherever pools are made, in whichever
// namespace a user picks after installing Gantry.
//
//	controller.go  Reconcile: one namespace's pools → its policy, applied
//	policy.go      the policy read from its file, and as applied in a namespace
//
// The policy is written with server-side apply under one field manager: the spec is
// the template's, and the owner references are exactly the namespace's pools. When
// the last pool of a namespace is gone, the controller deletes the policy.
package netpol

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// FieldManager is the server-side apply field manager of the runner NetworkPolicies.
const FieldManager = "gantry-runner-network-policy"

// Reconciler keeps the runner NetworkPolicy in each namespace that holds RunnerPools.
// Its requests are named after the policy, in the namespace concerned.
type Reconciler struct {
	Client client.Client
	// Policy is the template (Parse); its name names the policy in every namespace.
	Policy *networkingv1.NetworkPolicy
}

// Reconcile applies the policy in req.Namespace when the namespace holds pools, and
// deletes it once the last of them is gone (after its runners drained). The owner
// references make the garbage collector delete it too, should the controller be gone
// first; but the collector cannot judge an owner whose CRD was deleted right after it,
// as an uninstall does, and would leave the policy behind.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pools := &v1alpha1.RunnerPoolList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(req.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the namespace's pools: %w", err)
	}
	if len(pools.Items) == 0 {
		return reconcile.Result{}, r.deleteIfPresent(ctx, req.NamespacedName)
	}

	p := ForNamespace(r.Policy, req.Namespace, pools.Items)
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Applying the runner NetworkPolicy", "networkPolicy", klog.KObj(p), "pools", len(pools.Items))
	obj := &unstructured.Unstructured{Object: u}
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(obj.Object, "status")
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return reconcile.Result{}, fmt.Errorf("applying runner NetworkPolicy %s/%s: %w", p.Namespace, p.Name, err)
	}
	return reconcile.Result{}, nil
}

// deleteIfPresent deletes the namespace's policy when the cache holds it (the cache
// holds only Gantry's).
func (r *Reconciler) deleteIfPresent(ctx context.Context, key types.NamespacedName) error {
	p := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, key, p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if p.Labels[v1alpha1.LabelWorkflowPod] == v1alpha1.ContainerHookSlot {
		return nil // a container hook namespace's (runner/hookslot.go): it goes with the namespace
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Deleting the runner NetworkPolicy: no pool left in its namespace", "networkPolicy", klog.KObj(p))
	if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting runner NetworkPolicy %s: %w", key, err)
	}
	return nil
}

// SetupWithManager registers the controller: a pool created or deleted, or Gantry's
// policy changed or deleted by someone else, reconciles the namespace. A pool's other
// changes (its status, every second while runners move) do not concern its policy.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: r.Policy.Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("runner-network-policy").
		Watches(&v1alpha1.RunnerPool{}, toNamespace, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Watches(&networkingv1.NetworkPolicy{}, toNamespace).
		Complete(r)
}
