package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

const goodPool = `{"apiVersion":"gantry.dev/v1alpha1","kind":"RunnerPool",
 "metadata":{"name":"good","namespace":"ci","finalizers":["gantry.dev/pool-drain"]},
 "spec":{"github":{"url":"https://github.com/acme","credentialsSecretRef":{"name":"gh"}},
  "labels":["linux"],"maxRunners":3,"recovery":{"pendingTimeout":"10m","nodeLostTimeout":"5m"},
  "template":{"spec":{"containers":[{"name":"runner","image":"runner:1"}]}}},
 "status":{"busyRunners":2}}`

func TestRunnerPoolsDecodeAroundFieldsThatDoNot(t *testing.T) {
	tests := []struct {
		name        string
		json        string
		wantProblem []string // all in DecodeError; none: DecodeError empty
		check       func(t *testing.T, p *RunnerPool)
	}{
		{
			name: "valid pool",
			json: goodPool,
			check: func(t *testing.T, p *RunnerPool) {
				if p.Spec.Recovery.PendingTimeoutOrDefault() != 10*time.Minute || p.Status.BusyRunners != 2 {
					t.Errorf("decoded %+v", p.Spec.Recovery)
				}
			},
		},
		{
			name:        "a bare number as a duration",
			json:        strings.Replace(goodPool, `"pendingTimeout":"10m"`, `"pendingTimeout":"600"`, 1),
			wantProblem: []string{"spec.recovery.pendingTimeout", `"600"`},
			check: func(t *testing.T, p *RunnerPool) {
				// The bad field is left out, not half-decoded to zero; its siblings stay.
				if p.Spec.Recovery.PendingTimeout != nil {
					t.Errorf("pendingTimeout = %v, want it left out", p.Spec.Recovery.PendingTimeout)
				}
				if p.Spec.Recovery.NodeLostTimeoutOrDefault() != 5*time.Minute {
					t.Errorf("nodeLostTimeout lost: %+v", p.Spec.Recovery)
				}
				want := objectMeta("ci", "good", "gantry.dev/pool-drain")
				if diff := cmp.Diff(want, p.ObjectMeta); diff != "" {
					t.Errorf("metadata (-want +got):\n%s", diff)
				}
				if p.Spec.MaxRunners != 3 || len(p.Spec.Labels) != 1 || p.Spec.GitHub.URL != "https://github.com/acme" || p.Status.BusyRunners != 2 {
					t.Errorf("fields beside the bad one were lost: %+v", p.Spec)
				}
			},
		},
		{
			name:        "words as a duration",
			json:        strings.Replace(goodPool, `"nodeLostTimeout":"5m"`, `"nodeLostTimeout":"10 minutes"`, 1),
			wantProblem: []string{"spec.recovery.nodeLostTimeout", "10 minutes"},
		},
		{
			name:        "a status field of the wrong type",
			json:        strings.Replace(goodPool, `"busyRunners":2`, `"busyRunners":"two"`, 1),
			wantProblem: []string{"status.busyRunners"},
			check: func(t *testing.T, p *RunnerPool) {
				if p.Spec.MaxRunners != 3 {
					t.Errorf("the spec was lost with the status: %+v", p.Spec)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p RunnerPool
			if err := p.UnmarshalJSON([]byte(tt.json)); err != nil {
				t.Fatalf("UnmarshalJSON: %v", err)
			}
			if len(tt.wantProblem) == 0 && p.DecodeError != "" {
				t.Errorf("DecodeError = %q, want none", p.DecodeError)
			}
			if len(tt.wantProblem) > 0 && p.DecodeError == "" {
				t.Errorf("DecodeError is empty, want it to name %q", tt.wantProblem)
			}
			for _, w := range tt.wantProblem {
				if !strings.Contains(p.DecodeError, w) {
					t.Errorf("DecodeError %q does not say %q", p.DecodeError, w)
				}
			}
			if tt.check != nil {
				tt.check(t, &p)
			}
		})
	}
}

func TestARunnerPoolWithoutMetadataIsStillAnError(t *testing.T) {
	var p RunnerPool
	if err := p.UnmarshalJSON([]byte(`{"metadata":"not an object","spec":{"maxRunners":"x"}}`)); err == nil {
		t.Error("a pool whose metadata cannot be decoded was accepted")
	}
}

// The informer's list goes through the API machinery's codec: one bad item must not
// fail the list.
func TestAListWithOneUndecodablePoolDecodes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(strings.Replace(goodPool, `"good"`, `"bad"`, 1), `"10m"`, `"10 minutes"`, 1)
	list := `{"apiVersion":"gantry.dev/v1alpha1","kind":"RunnerPoolList","metadata":{"resourceVersion":"7"},"items":[` + goodPool + `,` + bad + `]}`
	obj, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(list), nil, nil)
	if err != nil {
		t.Fatalf("decoding the list: %v", err)
	}
	got := obj.(*RunnerPoolList)
	if len(got.Items) != 2 || got.Items[0].DecodeError != "" || !strings.Contains(got.Items[1].DecodeError, "pendingTimeout") {
		t.Errorf("items: %d; decode errors %q, %q", len(got.Items), got.Items[0].DecodeError, got.Items[1].DecodeError)
	}
	// A copy keeps the word.
	if cp := got.Items[1].DeepCopy(); cp.DecodeError != got.Items[1].DecodeError {
		t.Errorf("DeepCopy dropped DecodeError")
	}
}

func objectMeta(ns, name string, finalizers ...string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers}
}

func TestRunnersDecodeAroundFieldsThatDoNot(t *testing.T) {
	var r Runner
	data := `{"apiVersion":"gantry.dev/v1alpha1","kind":"Runner","metadata":{"name":"r","namespace":"ci"},
	 "spec":{"poolName":"p"},"status":{"phase":"Idle","registeredAt":"yesterday","githubRunnerID":7}}`
	if err := r.UnmarshalJSON([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.DecodeError, "status.registeredAt") || r.Status.RegisteredAt != nil {
		t.Errorf("DecodeError %q, registeredAt %v: want the field named and left out", r.DecodeError, r.Status.RegisteredAt)
	}
	if r.Spec.PoolName != "p" || r.Status.GitHubRunnerID != 7 || r.Status.Phase != RunnerIdle || r.Name != "r" {
		t.Errorf("fields beside the bad one were lost: %+v %+v", r.ObjectMeta, r.Status)
	}
}
