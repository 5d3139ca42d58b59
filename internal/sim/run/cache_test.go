package run

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

func TestCacheReport(t *testing.T) {
	start := time.Unix(1000, 0)
	in := cacheInputs{
		enabled: true, cold: 20 * time.Second, warmUpEnd: start.Add(10 * time.Second), shared: 0, pending: 1, volumesMax: 3,
		uses: []cacheUse{
			{Job: 1, Setup: 20 * time.Second},                          // in the warm-up: setup counted, rates not
			{Job: 2, Hit: true, Setup: 20 * time.Second},               // another repository's volume
			{Job: 3, Hit: true, RepoHit: true, Setup: 2 * time.Second}, // warm
			{Job: 4, Hit: true, RepoHit: true, Setup: 2 * time.Second}, // warm
			{Job: 5, Setup: 20 * time.Second},                          // a fresh volume
			{Job: 6, Hit: true, RepoHit: true, Setup: 2 * time.Second}, // never queued (unknown): left out of the rates
		},
	}
	queued := map[int64]time.Time{1: start, 2: start.Add(11 * time.Second), 3: start.Add(12 * time.Second),
		4: start.Add(13 * time.Second), 5: start.Add(14 * time.Second)}
	got := cacheReport(in, queued, 10*time.Second)
	want := &CacheReport{
		Enabled: true, WarmUpSeconds: 10, Jobs: 4, HitRate: 0.75, RepoHitRate: 0.5,
		SetupSeconds: 66, SetupSecondsSaved: 54, PodsPendingOnCache: 1, VolumesMax: 3,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cacheReport (-want +got):\n%s", diff)
	}
	if got.Clean() {
		t.Error("a cache with a pod pending on it reported clean")
	}
}

func TestCacheMeter(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Minute))
	pvc := func(name string, bound bool, ann map[string]string) *corev1.PersistentVolumeClaim {
		p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{v1alpha1.LabelPool: poolName}, Annotations: ann}}
		if bound {
			p.Status.Phase = corev1.ClaimBound
		}
		return p
	}
	pod := func(name, claim, node string, phase corev1.PodPhase, why string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: old,
				Labels: map[string]string{v1alpha1.LabelPool: poolName}},
			Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "build-cache", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
			Status: corev1.PodStatus{Phase: phase},
		}
		if why != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: why}}
		}
		return p
	}
	c := fake.NewClientBuilder().WithScheme(manager.Scheme()).WithObjects(
		pvc("v0", true, map[string]string{v1alpha1.AnnotationCacheLastUsed: "2026-01-01T00:00:00Z", v1alpha1.AnnotationCacheRepository: "acme/repo-1"}),
		pvc("v1", true, nil),
		pvc("v2", false, nil),
		pod("a", "v0", "n1", corev1.PodRunning, ""),
		pod("b", "v0", "n1", corev1.PodPending, ""),   // a second live pod on v0: a violation
		pod("c", "v1", "n1", corev1.PodSucceeded, ""), // done: not live
		pod("d", "v1", "", corev1.PodPending, "0/3 nodes are available: 3 node(s) didn't match PersistentVolume's node affinity."),
		pod("e", "v2", "", corev1.PodPending, ""), // its claim unbound
	).Build()
	m := newCacheMeter(c, Scenario{Cache: &v1alpha1.CacheSpec{Name: "build-cache"}, CacheSetup: 20 * time.Second, WarmSetup: 2 * time.Second})
	ctx := context.Background()
	if err := m.sampleOnce(ctx, poolName); err != nil {
		t.Fatal(err)
	}
	if err := m.sampleOnce(ctx, poolName); err != nil { // seen again: counted once
		t.Fatal(err)
	}
	for _, tc := range []struct {
		job       int64
		repo, pod string
		want      time.Duration
	}{
		{1, "acme/repo-1", "a", 2 * time.Second},  // last used by the same repository: warm
		{2, "acme/repo-2", "a", 20 * time.Second}, // by another: a hit, set up cold
		{3, "acme/repo-1", "d", 20 * time.Second}, // never used
	} {
		p := &corev1.Pod{}
		if err := c.Get(ctx, keyOf(tc.pod), p); err != nil {
			t.Fatal(err)
		}
		if got := m.setup(ctx, p, &runnerapi.Job{ID: tc.job, Repository: tc.repo}); got != tc.want {
			t.Errorf("job %d of %s on pod %s: setup %s; want %s", tc.job, tc.repo, tc.pod, got, tc.want)
		}
	}
	in := m.inputs()
	wantUses := []cacheUse{
		{Job: 1, Repo: "acme/repo-1", Claim: "v0", Hit: true, RepoHit: true, Setup: 2 * time.Second},
		{Job: 2, Repo: "acme/repo-2", Claim: "v0", Hit: true, Setup: 20 * time.Second},
		{Job: 3, Repo: "acme/repo-1", Claim: "v1", Setup: 20 * time.Second},
	}
	if diff := cmp.Diff(wantUses, in.uses); diff != "" {
		t.Errorf("uses (-want +got):\n%s", diff)
	}
	if in.shared != 1 || in.pending != 2 || in.volumesMax != 3 {
		t.Errorf("shared %d, pending %d, volumes %d; want 1, 2 (d, e), 3", in.shared, in.pending, in.volumesMax)
	}
}

func keyOf(name string) client.ObjectKey { return client.ObjectKey{Namespace: namespace, Name: name} }
