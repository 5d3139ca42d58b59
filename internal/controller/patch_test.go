package controller

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

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

// Two statuses whose only difference is a time's fraction of a second — one read back
// from the API server, one from a clock — make an empty patch, which is not sent; any
// other difference is not empty.
func TestIsEmptyStatusPatch(t *testing.T) {
	at := time.Date(2026, 11, 24, 9, 0, 5, 0, time.UTC)
	status := func(t time.Time, idle int32) v1alpha1.RunnerPoolStatus {
		mt := metav1.NewTime(t)
		return v1alpha1.RunnerPoolStatus{IdleRunners: idle, ScaleSet: &v1alpha1.ScaleSetStatus{ID: 3, LastMessageAt: &mt}}
	}
	tests := []struct {
		name          string
		before, after v1alpha1.RunnerPoolStatus
		want          bool
	}{
		{name: "the same", before: status(at, 1), after: status(at, 1), want: true},
		{name: "a fraction of a second apart", before: status(at, 1), after: status(at.Add(400*time.Millisecond), 1), want: true},
		{name: "a second apart", before: status(at, 1), after: status(at.Add(time.Second), 1), want: false},
		{name: "a count", before: status(at, 1), after: status(at, 2), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := StatusPatch(tt.before, tt.after)
			if err != nil {
				t.Fatal(err)
			}
			if got := IsEmptyStatusPatch(p); got != tt.want {
				data, _ := p.Data(nil)
				t.Errorf("IsEmptyStatusPatch(%s) = %v, want %v", data, got, tt.want)
			}
		})
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
