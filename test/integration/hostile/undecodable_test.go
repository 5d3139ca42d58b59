package hostile

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// withoutDurationRules replaces the RunnerPool CRD with one whose recovery durations
// are plain strings, as before their validation rule existed, and returns a function
// that puts the original back.
func (w *world) withoutDurationRules() (restore func()) {
	w.t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := w.c.Get(w.ctx(), types.NamespacedName{Name: "runnerpools.gantry.dev"}, crd); err != nil {
		w.t.Fatal(err)
	}
	original, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	versions := runtime.DeepCopyJSONValue(original).([]any)
	for _, v := range versions {
		props, _, _ := unstructured.NestedMap(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "recovery", "properties")
		for name, p := range props {
			delete(p.(map[string]any), "x-kubernetes-validations")
			props[name] = p
		}
		if err := unstructured.SetNestedMap(v.(map[string]any), props, "schema", "openAPIV3Schema", "properties", "spec", "properties", "recovery", "properties"); err != nil {
			w.t.Fatal(err)
		}
	}
	w.setVersions(versions, true)
	return func() { w.setVersions(original, false) }
}

// setVersions writes the CRD's versions and waits until the API server takes a bare
// number as pendingTimeout (accepts) or refuses it.
func (w *world) setVersions(versions []any, accepts bool) {
	w.t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := w.c.Get(w.ctx(), types.NamespacedName{Name: "runnerpools.gantry.dev"}, crd); err != nil {
		w.t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.Update(w.ctx(), crd); err != nil {
		w.t.Fatalf("updating the RunnerPool CRD: %v", err)
	}
	w.eventually("the API server to use the new CRD", func() (bool, error) {
		probe := w.badPool("probe")
		err := w.c.Create(w.ctx(), probe, client.DryRunAll)
		if accepts {
			return err == nil, err
		}
		return apierrors.IsInvalid(err), err
	})
}

// badPool is the healthy pool's spec but for pendingTimeout "600", which this version
// of Gantry cannot decode.
func (w *world) badPool(name string) *unstructured.Unstructured {
	w.t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w.healthyPool(name))
	if err != nil {
		w.t.Fatal(err)
	}
	if err := unstructured.SetNestedField(obj, "600", "spec", "recovery", "pendingTimeout"); err != nil {
		w.t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// A pool stored before the duration rule existed, with pendingTimeout "600", stays in
// the cluster after the CRD is upgraded. It is reported on itself (InvalidSpec, naming
// the field), while the healthy pool runs its jobs, a pool created after it is served,
// and a restarted controller syncs its caches; fixed, it becomes Ready.
func TestUndecodablePoolStaysLocal(t *testing.T) {
	w := newWorld(t)
	first := w.start()
	w.create(w.healthyPool("healthy"))
	w.runJob("healthy", "before the undecodable pool")

	restore := w.withoutDurationRules()
	if err := w.c.Create(w.ctx(), w.badPool("legacy")); err != nil {
		restore()
		t.Fatalf("storing the pool under the old CRD: %v", err)
	}
	restore()

	msg := w.reported("legacy", v1alpha1.ReasonInvalidSpec)
	if missing := containsAll(msg, []string{"spec.recovery.pendingTimeout", `"600"`}); len(missing) > 0 {
		t.Errorf("InvalidSpec message %q does not say %q", msg, missing)
	}
	w.runJob("healthy", "beside the undecodable pool")

	// A pool created after the undecodable one is seen and served.
	w.create(w.healthyPool("later"))
	w.eventually("the pool created later to be Ready", func() (bool, error) { return w.readyTrue("later"), nil })

	first.stop(t) // fails the test if its caches had not synced
	w.start()
	w.runJob("healthy", "after a controller restart")
	w.reported("legacy", v1alpha1.ReasonInvalidSpec)
	if n := len(w.runners("legacy")); n != 0 {
		t.Errorf("the undecodable pool has %d runners", n)
	}

	// Fixed, it is decoded and Ready.
	fix := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"recovery":{"pendingTimeout":"10m"}}}`))
	legacy := &v1alpha1.RunnerPool{}
	legacy.Namespace, legacy.Name = w.ns, "legacy"
	if err := w.c.Patch(w.ctx(), legacy, fix); err != nil {
		t.Fatalf("fixing the pool: %v", err)
	}
	w.eventually("the fixed pool to be Ready", func() (bool, error) { return w.readyTrue("legacy"), nil })
	if p, err := w.getPool("legacy"); err != nil || strings.TrimSpace(p.DecodeError) != "" {
		t.Errorf("the fixed pool: %v, decode error %q", err, p.DecodeError)
	}
}
