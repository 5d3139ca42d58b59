package api

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

func TestCacheIsStoredWithDefaults(t *testing.T) {
	ns := env.Namespace(t)
	pool := testutil.RunnerPool(ns, "cached").Cache(testutil.CacheSpec("tools"), "/opt/hostedtoolcache").Obj()
	if err := env.Client.Create(ctx(t), pool); err != nil {
		t.Fatalf("valid cached pool refused: %v", err)
	}
	var got v1alpha1.RunnerPool
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(pool), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Spec.Caches[0]
	want := struct {
		IdleTTL   time.Duration
		Reclaim   v1alpha1.CacheReclaimPolicy
		Isolation v1alpha1.CacheIsolation
		Max       int32
	}{24 * time.Hour, v1alpha1.CacheReclaimDelete, v1alpha1.CacheIsolationShared, 10}
	gotD := want
	gotD.IdleTTL, gotD.Reclaim, gotD.Isolation, gotD.Max = c.IdleTTLOrDefault(), c.ReclaimPolicy, c.Isolation, c.MaxVolumesOrDefault(got.Spec.MaxRunners)
	if diff := cmp.Diff(want, gotD); diff != "" {
		t.Errorf("cache defaults (-want +got):\n%s", diff)
	}
}

func TestValidCachesAreAccepted(t *testing.T) {
	ns := env.Namespace(t)
	repo := testutil.CacheSpec("deps")
	repo.Isolation = v1alpha1.CacheIsolationRepository
	retain := testutil.CacheSpec("docker")
	retain.ReclaimPolicy = v1alpha1.CacheReclaimRetain
	retain.MaxVolumes = ptr.To[int32](50)
	retain.IdleTTL = dur(168 * time.Hour)
	tests := []struct {
		name string
		pool *v1alpha1.RunnerPool
	}{
		{"repository isolation on a repository pool", testutil.RunnerPool(ns, "repo").URL("https://github.com/my-org/my-repo").Cache(repo, "/deps").Obj()},
		{"repository isolation on a GHES repository pool", testutil.RunnerPool(ns, "ghes").URL("https://ghe.example.com/team/app/").Cache(repo, "/deps").Obj()},
		{"retained, more volumes than runners", testutil.RunnerPool(ns, "retain").Cache(retain, "/var/lib/docker").Obj()},
		{"mounted by a sidecar", func() *v1alpha1.RunnerPool {
			p := testutil.RunnerPool(ns, "sidecar").Containers(
				corev1.Container{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest"},
				corev1.Container{Name: "dind", Image: "docker:dind", VolumeMounts: []corev1.VolumeMount{{Name: "docker", MountPath: "/var/lib/docker"}}},
			).Obj()
			p.Spec.Caches = []v1alpha1.CacheSpec{testutil.CacheSpec("docker")}
			return p
		}()},
		{"two caches", testutil.RunnerPool(ns, "two").Cache(testutil.CacheSpec("a"), "/a").Cache(testutil.CacheSpec("b"), "/b").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := env.Client.Create(ctx(t), tt.pool); err != nil {
				t.Fatalf("valid pool refused: %v", err)
			}
		})
	}
}

func TestInvalidCachesAreRefusedWithAMessageThatSaysWhatToFix(t *testing.T) {
	ns := env.Namespace(t)
	cache := func(mutate func(*v1alpha1.CacheSpec)) v1alpha1.CacheSpec {
		c := testutil.CacheSpec("deps")
		mutate(&c)
		return c
	}
	tests := []struct {
		name         string
		pool         *v1alpha1.RunnerPool
		wantMessages []string
	}{
		{
			name:         "name not a DNS label",
			pool:         testutil.RunnerPool(ns, "bad-name").Cache(cache(func(c *v1alpha1.CacheSpec) { c.Name = "Docker_Cache" }), "/d").Obj(),
			wantMessages: []string{"caches[].name must be a DNS label"},
		},
		{
			name:         "two caches of one name",
			pool:         testutil.RunnerPool(ns, "dup").Cache(testutil.CacheSpec("deps"), "/a").Cache(testutil.CacheSpec("deps"), "/b").Obj(),
			wantMessages: []string{"caches[].name must be unique in the pool"},
		},
		{
			name:         "no access modes",
			pool:         testutil.RunnerPool(ns, "no-modes").Cache(cache(func(c *v1alpha1.CacheSpec) { c.VolumeClaimTemplate.AccessModes = nil }), "/d").Obj(),
			wantMessages: []string{"caches[].volumeClaimTemplate.accessModes must be set"},
		},
		{
			name:         "no storage request",
			pool:         testutil.RunnerPool(ns, "no-size").Cache(cache(func(c *v1alpha1.CacheSpec) { c.VolumeClaimTemplate.Resources = corev1.VolumeResourceRequirements{} }), "/d").Obj(),
			wantMessages: []string{"caches[].volumeClaimTemplate.resources.requests.storage must be set"},
		},
		{
			name:         "maxVolumes zero",
			pool:         testutil.RunnerPool(ns, "zero").Cache(cache(func(c *v1alpha1.CacheSpec) { c.MaxVolumes = ptr.To[int32](0) }), "/d").Obj(),
			wantMessages: []string{"maxVolumes"},
		},
		{
			name:         "idleTTL below a minute",
			pool:         testutil.RunnerPool(ns, "short-ttl").Cache(cache(func(c *v1alpha1.CacheSpec) { c.IdleTTL = &metav1.Duration{Duration: time.Second} }), "/d").Obj(),
			wantMessages: []string{"caches[].idleTTL must be a duration from 1m to 8760h"},
		},
		{
			name:         "unknown reclaim policy",
			pool:         testutil.RunnerPool(ns, "recycle").Cache(cache(func(c *v1alpha1.CacheSpec) { c.ReclaimPolicy = "Recycle" }), "/d").Obj(),
			wantMessages: []string{"reclaimPolicy", `"Delete", "Retain"`},
		},
		{
			name: "repository isolation on an organization pool",
			pool: testutil.RunnerPool(ns, "org-repo").Cache(cache(func(c *v1alpha1.CacheSpec) {
				c.Isolation = v1alpha1.CacheIsolationRepository
			}), "/d").Obj(),
			wantMessages: []string{"caches[].isolation: Repository needs a repository-scoped pool", "use one pool per repository, or isolation: Shared"},
		},
		{
			name: "repository isolation on an enterprise pool",
			pool: testutil.RunnerPool(ns, "ent-repo").URL("https://github.com/enterprises/acme").Cache(cache(func(c *v1alpha1.CacheSpec) {
				c.Isolation = v1alpha1.CacheIsolationRepository
			}), "/d").Obj(),
			wantMessages: []string{"caches[].isolation: Repository needs a repository-scoped pool"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env.Client.Create(ctx(t), tt.pool)
			if err == nil {
				t.Fatal("invalid pool was accepted")
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
