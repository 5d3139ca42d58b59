package api

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

func TestKubernetesModeIsStoredWithDefaults(t *testing.T) {
	ns := env.Namespace(t)
	pool := testutil.RunnerPool(ns, "k8s").KubernetesMode("ci-jobs").Obj()
	if err := env.Client.Create(ctx(t), pool); err != nil {
		t.Fatalf("valid Kubernetes-mode pool refused: %v", err)
	}
	var got v1alpha1.RunnerPool
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(pool), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Spec.ContainerMode
	type defaults struct {
		Timeout         time.Duration
		RequireJob      bool
		Hook            string
		Mount           string
		IsolatesRunners bool
	}
	want := defaults{5 * time.Minute, true, "/home/runner/k8s-novolume/index.js", "/home/runner/_work", true}
	gotD := defaults{c.PrepareJobTimeoutOrDefault(), c.RequireJobContainerOrDefault(), c.HookPathOrDefault(), c.WorkVolume.MountPathOrDefault(), c.IsolatesRunners()}
	if diff := cmp.Diff(want, gotD); diff != "" {
		t.Errorf("containerMode defaults (-want +got):\n%s", diff)
	}
}

func TestValidContainerModesAreAccepted(t *testing.T) {
	ns := env.Namespace(t)
	k8s := func(mutate func(*v1alpha1.ContainerModeSpec)) v1alpha1.ContainerModeSpec {
		c := v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeKubernetes, Namespace: "ci-jobs"}
		mutate(&c)
		return c
	}
	tests := []struct {
		name string
		pool *v1alpha1.RunnerPool
	}{
		{"none", testutil.RunnerPool(ns, "none").ContainerMode(v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeNone}).Obj()},
		{"ephemeral work volume", testutil.RunnerPool(ns, "eph").ContainerMode(k8s(func(c *v1alpha1.ContainerModeSpec) {
			c.WorkVolume = &v1alpha1.WorkVolumeSpec{Type: v1alpha1.WorkVolumeEphemeral, Ephemeral: &v1alpha1.EphemeralWorkVolume{
				StorageClassName: ptr.To("fast"), Size: resource.MustParse("20Gi")}}
		})).Obj()},
		{"cache work volume", testutil.RunnerPool(ns, "cache").Cache(testutil.CacheSpec("work"), "/unused").ContainerMode(k8s(func(c *v1alpha1.ContainerModeSpec) {
			c.WorkVolume = &v1alpha1.WorkVolumeSpec{Type: v1alpha1.WorkVolumeCache, Cache: "work"}
		})).Obj()},
		{"isolation Pool", testutil.RunnerPool(ns, "shared").ContainerMode(k8s(func(c *v1alpha1.ContainerModeSpec) {
			c.Isolation = v1alpha1.IsolationPool
		})).Obj()},
		{"every field", testutil.RunnerPool(ns, "all").ContainerMode(k8s(func(c *v1alpha1.ContainerModeSpec) {
			c.Isolation = v1alpha1.IsolationRunner
			c.PrepareJobTimeout = dur(2 * time.Minute)
			c.RequireJobContainer = ptr.To(false)
			c.HookPath = "/opt/hooks/index.js"
			c.UseKubeScheduler = true
			c.WorkflowPodTemplate = &v1alpha1.WorkflowPodTemplate{Labels: map[string]string{"team": "a"}, NodeSelector: map[string]string{"pool": "ci"}}
		})).Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := env.Client.Create(ctx(t), tt.pool); err != nil {
				t.Fatalf("valid pool refused: %v", err)
			}
		})
	}
}

func TestContradictoryContainerModesAreRefusedWithTheField(t *testing.T) {
	ns := env.Namespace(t)
	k8s := func(mutate func(*v1alpha1.ContainerModeSpec)) v1alpha1.ContainerModeSpec {
		c := v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeKubernetes, Namespace: "ci-jobs"}
		mutate(&c)
		return c
	}
	tests := []struct {
		name         string
		mode         v1alpha1.ContainerModeSpec
		wantMessages []string
	}{
		{"Kubernetes without a namespace", k8s(func(c *v1alpha1.ContainerModeSpec) { c.Namespace = "" }),
			[]string{"containerMode.namespace must name the namespace where workflow pods run"}},
		{"namespace not a name", k8s(func(c *v1alpha1.ContainerModeSpec) { c.Namespace = "CI_Jobs" }),
			[]string{"containerMode.namespace must be a namespace name"}},
		{"Kubernetes fields with type None", v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeNone, Namespace: "ci-jobs"},
			[]string{"apply only with type: Kubernetes"}},
		{"isolation with type None", v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeNone, Isolation: v1alpha1.IsolationPool},
			[]string{"containerMode: namespace, isolation, workVolume"}},
		{"an isolation that is not one", k8s(func(c *v1alpha1.ContainerModeSpec) { c.Isolation = "Node" }),
			[]string{`supported values: "Runner", "Pool"`}},
		{"Ephemeral without a size", k8s(func(c *v1alpha1.ContainerModeSpec) {
			c.WorkVolume = &v1alpha1.WorkVolumeSpec{Type: v1alpha1.WorkVolumeEphemeral}
		}), []string{"containerMode.workVolume.ephemeral must be set with type: Ephemeral"}},
		{"ephemeral with type None", k8s(func(c *v1alpha1.ContainerModeSpec) {
			c.WorkVolume = &v1alpha1.WorkVolumeSpec{Type: v1alpha1.WorkVolumeNone, Ephemeral: &v1alpha1.EphemeralWorkVolume{Size: resource.MustParse("1Gi")}}
		}), []string{"containerMode.workVolume.ephemeral applies only with type: Ephemeral"}},
		{"Cache naming no cache", k8s(func(c *v1alpha1.ContainerModeSpec) {
			c.WorkVolume = &v1alpha1.WorkVolumeSpec{Type: v1alpha1.WorkVolumeCache, Cache: "work"}
		}), []string{"containerMode.workVolume.cache must name one of the pool's caches"}},
		{"Cache without a name", k8s(func(c *v1alpha1.ContainerModeSpec) {
			c.WorkVolume = &v1alpha1.WorkVolumeSpec{Type: v1alpha1.WorkVolumeCache}
		}), []string{"containerMode.workVolume.cache must name one of the pool's caches with type: Cache"}},
		{"prepare timeout too long", k8s(func(c *v1alpha1.ContainerModeSpec) { c.PrepareJobTimeout = dur(2 * time.Hour) }),
			[]string{"containerMode.prepareJobTimeout must be a duration from 10s to 1h"}},
		{"relative hook path", k8s(func(c *v1alpha1.ContainerModeSpec) { c.HookPath = "k8s/index.js" }),
			[]string{"containerMode.hookPath must be an absolute path"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := testutil.RunnerPool(ns, "bad-"+string(rune('a'+i))).ContainerMode(tt.mode).Obj()
			err := env.Client.Create(ctx(t), pool)
			if err == nil {
				t.Fatal("contradictory pool was accepted")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid (422) admission error, got %v", err)
			}
			for _, want := range tt.wantMessages {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("admission error does not say %q:\n%v", want, err)
				}
			}
		})
	}
}
