// Package nodes is the controller's one view of the cluster's Nodes, shared by every
// pool and runner: an informer of the manager's cache whose objects are slimmed
// (Slim) to what Gantry reads — labels, cordon, taints, readiness — so that its memory
// follows the node count at a few hundred bytes a node, and reading the nodes costs no
// request however many pools read them.
//
// Why an informer and not a list per pool, a list shared for a period, or a
// metadata-only informer: a pool's platform (runnerpool/platform.go) and a runner's
// node going away (cordoned, tainted for a disruption) need the cordon, the taints and
// the Ready condition, which metadata alone does not carry; a list shared for a period
// reads every node again each period (tens of megabytes a minute on a cluster of
// thousands of nodes), and is stale for that period, while a watch sends only what
// changed. The informer's one list at start and its watch events are the whole cost.
//
// A namespaced install grants no right on Nodes (cluster-scoped), and an informer
// without them would retry its list forever and keep every controller that watches
// nodes from starting. So the view is enabled only when the controller may list and
// watch Nodes (one SelfSubjectAccessReview per verb when the manager is built);
// disabled, every read answers ErrNotPermitted and callers fall back as documented where
// they read.
package nodes

import (
	"context"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotPermitted is what a disabled view answers: the controller may not list and
// watch Nodes.
var ErrNotPermitted = errors.New("the controller may not list and watch nodes (a namespaced install grants no cluster-wide rights)")

// View reads Nodes from the manager's cache, when the controller may.
type View struct {
	// Reader is the manager's cached client (or its cache), whose Node informer holds
	// Slim objects; nil disables the view.
	Reader client.Reader
}

// Enabled says whether the view reads nodes: false on a namespaced install.
func (v *View) Enabled() bool { return v != nil && v.Reader != nil }

// List returns every node, as Slim keeps them: the cache's own objects, not copies, to
// be read and never modified. Every pool reads the nodes when it is first reconciled:
// copying them each time cost 200 pools on 1,000 nodes 200,000 node copies at start.
// The first call starts the informer and waits for its list.
func (v *View) List(ctx context.Context) ([]corev1.Node, error) {
	if !v.Enabled() {
		return nil, ErrNotPermitted
	}
	var list corev1.NodeList
	if err := v.Reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes from the cache: %w", err)
	}
	return list.Items, nil
}

// Get returns one node, as Slim keeps it; a NotFound error when there is none.
func (v *View) Get(ctx context.Context, name string) (*corev1.Node, error) {
	if !v.Enabled() {
		return nil, ErrNotPermitted
	}
	n := &corev1.Node{}
	if err := v.Reader.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
		return nil, err
	}
	return n, nil
}

// Permitted asks the API server, with one SelfSubjectAccessReview per verb (which every
// authenticated user may create), whether the controller may list and watch Nodes
// cluster-wide.
func Permitted(ctx context.Context, c client.Client) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes"},
		}}
		if err := c.Create(ctx, review); err != nil {
			return false, fmt.Errorf("asking whether the controller may %s nodes: %w", verb, err)
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}
