// Package examples applies every manifest under examples/ to a real kube-apiserver with
// Gantry's CRDs: the valid examples are accepted as they are written, and each invalid
// one (examples/invalid/) is refused with the message its "# expect:" lines document.
package examples

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// example is one file of examples/.
type example struct {
	path    string
	objects []*unstructured.Unstructured
	// expect are the texts the API server's refusal must contain (invalid examples).
	expect []string
}

var expectLine = regexp.MustCompile(`(?m)^#\s*expect:\s*(.+?)\s*$`)

func load(t *testing.T, path string) example {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ex := example{path: path}
	for _, m := range expectLine.FindAllStringSubmatch(string(src), -1) {
		ex.expect = append(ex.expect, m[1])
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(src), 4096)
	for {
		obj := map[string]any{}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetNamespace() != "" {
			t.Errorf("%s: %s %s sets a namespace; examples are applied with `kubectl apply -n NAMESPACE`", path, u.GetKind(), u.GetName())
		}
		ex.objects = append(ex.objects, u)
	}
	if len(ex.objects) == 0 {
		t.Fatalf("%s holds no object", path)
	}
	return ex
}

func examplePaths(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no examples in %s", dir)
	}
	return paths
}

// apply creates the objects as `kubectl apply` does on a new object: with strict
// field validation, so a misspelled field is refused rather than dropped.
func apply(t *testing.T, ns string, obj *unstructured.Unstructured) error {
	obj = obj.DeepCopy()
	obj.SetNamespace(ns)
	return env.Client.Create(ctx(t), obj, client.FieldValidation("Strict"))
}

func root(t *testing.T) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every valid example is accepted as written, and each of its RunnerPools reads back
// with the spec it wrote (nothing was dropped).
func TestValidExamplesAreAccepted(t *testing.T) {
	paths := examplePaths(t, filepath.Join(root(t), "examples"))
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			ex := load(t, path)
			if len(ex.expect) > 0 {
				t.Fatalf("%s has # expect: lines but is not under examples/invalid/", path)
			}
			ns := env.Namespace(t)
			pools := 0
			for _, obj := range ex.objects {
				if err := apply(t, ns, obj); err != nil {
					t.Fatalf("%s %s was refused: %v", obj.GetKind(), obj.GetName(), err)
				}
				if obj.GetKind() != "RunnerPool" {
					continue
				}
				pools++
				var got v1alpha1.RunnerPool
				if err := env.Client.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: obj.GetName()}, &got); err != nil {
					t.Fatal(err)
				}
				var wrote v1alpha1.RunnerPool
				if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &wrote, true); err != nil {
					t.Errorf("%s does not decode strictly into a RunnerPool: %v", obj.GetName(), err)
				}
				if got.Spec.GitHub.URL != wrote.Spec.GitHub.URL || got.Spec.MinIdle != wrote.Spec.MinIdle ||
					len(got.Spec.Template.Spec.Containers) != len(wrote.Spec.Template.Spec.Containers) {
					t.Errorf("%s read back differs from what the example wrote: %+v", obj.GetName(), got.Spec)
				}
			}
			if pools == 0 {
				t.Errorf("%s has no RunnerPool", path)
			}
		})
	}
}

// Every invalid example is refused, with the message its "# expect:" lines document.
func TestInvalidExamplesAreRefusedWithTheirMessage(t *testing.T) {
	paths := examplePaths(t, filepath.Join(root(t), "examples", "invalid"))
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			ex := load(t, path)
			if len(ex.expect) == 0 {
				t.Fatalf("%s has no '# expect: MESSAGE' line", path)
			}
			if len(ex.objects) != 1 {
				t.Fatalf("%s holds %d objects, want the one that is refused", path, len(ex.objects))
			}
			ns := env.Namespace(t)
			err := apply(t, ns, ex.objects[0])
			if err == nil {
				t.Fatalf("%s was accepted, want it refused with %q", path, ex.expect)
			}
			t.Logf("refused: %v", err)
			for _, want := range ex.expect {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refused with:\n\t%v\nwant the message to contain:\n\t%s", err, want)
				}
			}
		})
	}
}

// examples/README.md lists every example, and every invalid example's message.
func TestExamplesAreListed(t *testing.T) {
	r := root(t)
	readme, err := os.ReadFile(filepath.Join(r, "examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append(examplePaths(t, filepath.Join(r, "examples")), examplePaths(t, filepath.Join(r, "examples", "invalid"))...) {
		rel, _ := filepath.Rel(filepath.Join(r, "examples"), path)
		if !strings.Contains(string(readme), "("+rel+")") {
			t.Errorf("examples/README.md does not link %s", rel)
		}
		for _, want := range load(t, path).expect {
			if !strings.Contains(string(readme), want) {
				t.Errorf("examples/README.md does not give %s's message %q", rel, want)
			}
		}
	}
}

// The Docker-in-Docker example keeps the runner unprivileged, and runs the daemon as a
// native sidecar: a plain second container would keep the pod Running after the job and
// the runner Busy.
func TestDinDExampleShape(t *testing.T) {
	ex := load(t, filepath.Join(root(t), "examples", "dind.yaml"))
	var pool v1alpha1.RunnerPool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(ex.objects[0].Object, &pool, true); err != nil {
		t.Fatal(err)
	}
	spec := pool.Spec.Template.Spec
	var runnerC, dind *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == v1alpha1.RunnerContainerName {
			runnerC = &spec.Containers[i]
		}
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == "dind" {
			dind = &spec.InitContainers[i]
		}
	}
	switch {
	case runnerC == nil || dind == nil:
		t.Fatalf("want a runner container and a dind init container, got %+v", spec)
	case dind.RestartPolicy == nil || *dind.RestartPolicy != corev1.ContainerRestartPolicyAlways:
		t.Errorf("dind is not a native sidecar (restartPolicy: Always)")
	case dind.SecurityContext == nil || dind.SecurityContext.Privileged == nil || !*dind.SecurityContext.Privileged:
		t.Errorf("dind is not privileged")
	case runnerC.SecurityContext == nil || runnerC.SecurityContext.AllowPrivilegeEscalation == nil || *runnerC.SecurityContext.AllowPrivilegeEscalation ||
		runnerC.SecurityContext.RunAsNonRoot == nil || !*runnerC.SecurityContext.RunAsNonRoot:
		t.Errorf("the runner container does not set runAsNonRoot: true and allowPrivilegeEscalation: false: %+v", runnerC.SecurityContext)
	}
	hasDockerHost := false
	for _, e := range runnerC.Env {
		hasDockerHost = hasDockerHost || (e.Name == "DOCKER_HOST" && e.Value == "unix:///var/run/docker.sock")
	}
	if !hasDockerHost {
		t.Errorf("the runner container has no DOCKER_HOST pointing at the sidecar's socket")
	}
}

// The arm64 example's runners register ARM64, not x64, and their pods go to arm64
// nodes: what a job with runs-on [self-hosted, linux, ARM64] needs.
func TestArm64ExampleShape(t *testing.T) {
	ex := load(t, filepath.Join(root(t), "examples", "arm64.yaml"))
	var pool v1alpha1.RunnerPool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(ex.objects[0].Object, &pool, true); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"self-hosted", "linux", "ARM64"}, pool.RunnerLabels()); diff != "" {
		t.Errorf("labels the runners register (-want +got):\n%s", diff)
	}
	pod := pool.Spec.Template.Spec.DeepCopy()
	pool.PinPlatform(pod)
	if got := pod.NodeSelector; got[v1alpha1.NodeLabelArch] != "arm64" || got[v1alpha1.NodeLabelOS] != "linux" {
		t.Errorf("runner pod nodeSelector %v, want kubernetes.io/arch arm64 and kubernetes.io/os linux", got)
	}
}
