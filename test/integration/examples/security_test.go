package examples

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// podSecurityLevels is the Pod Security admission level a runner pod of each example
// meets, as docs/security.md's table states it.
var podSecurityLevels = map[string]string{
	"warm-pool.yaml":           "restricted",
	"gpu.yaml":                 "restricted",
	"arm64.yaml":               "restricted",
	"ghes.yaml":                "restricted",
	"multi-org.yaml":           "restricted",
	"dind.yaml":                "privileged",
	"dind-cache.yaml":          "privileged",
	"tool-cache.yaml":          "restricted",
	"runnerpool-scaleset.yaml": "restricted",
	"container-jobs.yaml":      "restricted",
	"spot.yaml":                "restricted",
}

// admitRunnerPod creates, in a new namespace enforcing Pod Security level level, the pod
// Gantry makes for a runner of pool, and returns it as the API server admitted it
// (ServiceAccount admission on, as in a real cluster).
func admitRunnerPod(t *testing.T, pool *v1alpha1.RunnerPool, level string) (*corev1.Pod, error) {
	t.Helper()
	ns := namespaceEnforcing(t, level)
	pool = pool.DeepCopy()
	pool.Namespace = ns
	r := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool.Name + "-abcde"}, Spec: v1alpha1.RunnerSpec{PoolName: pool.Name}}
	pod := runner.BuildPod(r, pool)
	if pool.Spec.ContainerMode.IsKubernetes() {
		// The pool's hook ServiceAccount, which the pool controller makes.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.ContainerHookServiceAccountName(pool.Name)}}
		if err := env.Client.Create(ctx(t), sa); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx(t), pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// namespaceEnforcing makes a namespace for the test whose Pod Security admission
// enforces level.
func namespaceEnforcing(t *testing.T, level string) string {
	t.Helper()
	ns := env.Namespace(t)
	var nsObj corev1.Namespace
	if err := env.Client.Get(ctx(t), client.ObjectKey{Name: ns}, &nsObj); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(nsObj.DeepCopy())
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = level
	if err := env.Client.Patch(ctx(t), &nsObj, patch); err != nil {
		t.Fatal(err)
	}
	return ns
}

func tokenVolumes(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				out = append(out, v.Name)
			}
		}
	}
	return out
}

func examplePool(t *testing.T, path string) *v1alpha1.RunnerPool {
	t.Helper()
	for _, obj := range load(t, path).objects {
		if obj.GetKind() != "RunnerPool" {
			continue
		}
		var pool v1alpha1.RunnerPool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &pool, true); err != nil {
			t.Fatal(err)
		}
		return &pool
	}
	t.Fatalf("%s has no RunnerPool", path)
	return nil
}

// A runner pod of each example template, admitted by an API server with ServiceAccount
// admission on, in a namespace enforcing the Pod Security level docs/security.md gives:
// admitted, with no ServiceAccount token and no service links; and refused one level
// below (what the level is for).
func TestExampleRunnerPodsCarryNoTokenAndMeetTheirPodSecurityLevel(t *testing.T) {
	r := root(t)
	doc, err := os.ReadFile(filepath.Join(r, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths := examplePaths(t, filepath.Join(r, "examples"))
	for _, path := range paths {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			level, ok := podSecurityLevels[name]
			if !ok {
				t.Fatalf("%s has no Pod Security level in this test: add it here and to docs/security.md", name)
			}
			if !docStates(string(doc), name, level) {
				t.Errorf("docs/security.md's table does not give %s level %s", name, level)
			}
			pool := examplePool(t, path)
			pod, err := admitRunnerPod(t, pool, level)
			if err != nil {
				t.Fatalf("the runner pod of %s is refused in a namespace enforcing %s: %v", name, level, err)
			}
			wantTokens := 0
			if pool.Spec.ContainerMode.IsKubernetes() {
				// The hook's own, projected for the runner container alone.
				wantTokens = 1
			}
			if v := tokenVolumes(pod); len(v) != wantTokens {
				t.Errorf("the runner pod was admitted with ServiceAccount token volumes %q, want %d", v, wantTokens)
			}
			if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
				t.Errorf("automountServiceAccountToken = %v, want false", pod.Spec.AutomountServiceAccountToken)
			}
			if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
				t.Errorf("enableServiceLinks = %v, want false", pod.Spec.EnableServiceLinks)
			}
			if below := map[string]string{"privileged": "baseline", "baseline": "restricted"}[level]; below != "" {
				if _, err := admitRunnerPod(t, pool, below); err == nil {
					t.Errorf("the runner pod of %s is admitted under %s too: docs/security.md should say %s", name, below, below)
				}
			}
		})
	}
}

func docStates(doc, example, level string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| [examples/"+example+"]") && strings.Contains(line, "| "+level+" |") {
			return true
		}
	}
	return false
}

// A template's explicit choice wins: asking for the token (IRSA, Workload Identity)
// gets the ServiceAccount's token mounted by admission, and service links stay on when
// asked for.
func TestTemplateChoiceOfTokenAndServiceLinksWins(t *testing.T) {
	pool := examplePool(t, filepath.Join(root(t), "examples", "warm-pool.yaml"))
	pool.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true)
	pool.Spec.Template.Spec.EnableServiceLinks = ptr.To(true)
	pod, err := admitRunnerPod(t, pool, "restricted")
	if err != nil {
		t.Fatal(err)
	}
	if v := tokenVolumes(pod); len(v) != 1 || pod.Spec.ServiceAccountName != "default" {
		t.Errorf("a template asking for the token: ServiceAccount %q, token volumes %q; want default and one", pod.Spec.ServiceAccountName, v)
	}
	if pod.Spec.EnableServiceLinks == nil || !*pod.Spec.EnableServiceLinks {
		t.Errorf("a template asking for service links: enableServiceLinks = %v", pod.Spec.EnableServiceLinks)
	}
}
