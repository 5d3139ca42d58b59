package controller

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/controller/netpol"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// The controller puts the runner NetworkPolicy of config/components/network-policies
// (what the kustomize install hands it; the chart renders the same) in the namespace of
// the pools, owned by each of them, puts it back when someone deletes it, and drops a
// pool's owner reference once the pool is gone, and deletes the policy with the
// namespace's last pool.
func TestRunnerNetworkPolicyFollowsPools(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "components", "network-policies", "runners.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := netpol.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorldWith(t, stack.Options{RunnerNetworkPolicy: tmpl})
	key := types.NamespacedName{Namespace: w.ns, Name: tmpl.Name}
	owners := func(want ...string) func() (bool, error) {
		return func() (bool, error) {
			var p networkingv1.NetworkPolicy
			if err := w.c.Get(w.ctx(), key, &p); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			var got []string
			for _, o := range p.OwnerReferences {
				got = append(got, o.Kind+"/"+o.Name)
			}
			slices.Sort(got)
			return slices.Equal(got, want), nil
		}
	}

	var before networkingv1.NetworkPolicy
	if err := w.c.Get(w.ctx(), key, &before); !apierrors.IsNotFound(err) {
		t.Fatalf("a runner policy before any pool: %v", err)
	}
	w.create(w.pool("a").Obj())
	w.create(w.pool("b").Obj())
	w.eventually("the runner policy owned by both pools", owners("RunnerPool/a", "RunnerPool/b"))
	var got networkingv1.NetworkPolicy
	if err := w.c.Get(w.ctx(), key, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tmpl.Spec, got.Spec); diff != "" {
		t.Errorf("the applied policy's spec is not the template's (-want +got):\n%s", diff)
	}

	if err := w.c.Delete(w.ctx(), &got); err != nil {
		t.Fatal(err)
	}
	w.eventually("the deleted runner policy put back", owners("RunnerPool/a", "RunnerPool/b"))

	if err := w.c.Delete(w.ctx(), w.getPool("a")); err != nil {
		t.Fatal(err)
	}
	w.eventually("pool a's owner reference dropped once it is gone", owners("RunnerPool/b"))

	if err := w.c.Delete(w.ctx(), w.getPool("b")); err != nil {
		t.Fatal(err)
	}
	w.eventually("the runner policy deleted with the namespace's last pool", func() (bool, error) {
		err := w.c.Get(w.ctx(), key, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}
