package controller

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

func patchData(t *testing.T, p client.Patch, obj client.Object) map[string]any {
	t.Helper()
	data, err := p.Data(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("patch %s: %v", data, err)
	}
	return m
}

// StatusPatch sends what client.MergeFrom sends for a change of status alone: set,
// changed and removed fields, lists whole.
func TestStatusPatchIsMergeFromOfTheStatus(t *testing.T) {
	before := &v1alpha1.Runner{
		ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "ci", ResourceVersion: "7", Finalizers: []string{v1alpha1.Finalizer}},
		Spec:       v1alpha1.RunnerSpec{PoolName: "linux"},
		Status: v1alpha1.RunnerStatus{Phase: v1alpha1.RunnerPending, Message: "waiting for GitHub", GitHubRunnerID: 3,
			Conditions: []metav1.Condition{{Type: "Online", Status: metav1.ConditionFalse, Reason: "NotListed"}}},
	}
	after := before.DeepCopy()
	after.Status.Phase = v1alpha1.RunnerBusy
	after.Status.Message = ""
	after.Status.Job = &v1alpha1.RunnerJob{ID: 42, RunID: 9, Repository: "acme/app"}
	after.Status.Conditions[0].Status = metav1.ConditionTrue

	p, err := StatusPatch(before.Status, after.Status)
	if err != nil {
		t.Fatal(err)
	}
	got, want := patchData(t, p, after), patchData(t, client.MergeFrom(before), after)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StatusPatch = %v\nMergeFrom  = %v", got, want)
	}
	if _, ok := got["status"].(map[string]any)["githubRunnerID"]; ok {
		t.Errorf("StatusPatch sent an unchanged field: %v", got)
	}
}

// FinalizersPatch sets the finalizers left, null once none is, and carries the version
// read so that a finalizer added meanwhile makes it conflict rather than be lost.
func TestFinalizersPatch(t *testing.T) {
	rn := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Name: "r-1", ResourceVersion: "12", Finalizers: []string{"other.example/keep"}}}
	p := FinalizersPatch(rn)
	want := map[string]any{"metadata": map[string]any{"finalizers": []any{"other.example/keep"}, "resourceVersion": "12"}}
	if got := patchData(t, p, rn); !reflect.DeepEqual(got, want) {
		t.Errorf("FinalizersPatch = %v, want %v", got, want)
	}
	rn.Finalizers = nil
	p = FinalizersPatch(rn)
	want = map[string]any{"metadata": map[string]any{"finalizers": nil, "resourceVersion": "12"}}
	if got := patchData(t, p, rn); !reflect.DeepEqual(got, want) {
		t.Errorf("FinalizersPatch with none left = %v, want %v", got, want)
	}
}
