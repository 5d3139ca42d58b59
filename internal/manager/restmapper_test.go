package manager

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper maps only what it was given, and counts the questions.
type countingMapper struct {
	meta.RESTMapper
	asked int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

func TestRememberingMapperAsksOncePerKindAndAgainAfterNoMatch(t *testing.T) {
	gv := schema.GroupVersion{Group: "gantry.dev", Version: "v1alpha1"}
	inner := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	counting := &countingMapper{RESTMapper: inner}
	m := &rememberingMapper{RESTMapper: counting}
	runner := schema.GroupKind{Group: "gantry.dev", Kind: "Runner"}

	if _, err := m.RESTMapping(runner, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Fatalf("before the kind is known: err = %v, want a no-match error", err)
	}
	inner.Add(gv.WithKind("Runner"), meta.RESTScopeNamespace)
	for range 3 {
		got, err := m.RESTMapping(runner, "v1alpha1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Resource.Resource != "runners" || got.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("mapping = %+v, want namespaced runners", got)
		}
	}
	if counting.asked != 2 {
		t.Errorf("inner mapper asked %d times, want 2 (the miss, then once for the three answers)", counting.asked)
	}
	if _, err := m.RESTMapping(runner); err != nil {
		t.Fatal(err)
	}
	if counting.asked != 3 {
		t.Errorf("inner mapper asked %d times, want 3: another version list is another question", counting.asked)
	}
}
