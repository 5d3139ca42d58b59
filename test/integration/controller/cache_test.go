package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// envtest has no PersistentVolume controller: cache volumes stay Pending, and a deleted
// one stays terminating (the API server's pvc-protection finalizer is never removed).
// These tests check the PersistentVolumeClaim objects and the pod specs that mount them.

// cacheVolumes lists a pool's cache volumes by name.
func (w *world) cacheVolumes(pool string) map[string]corev1.PersistentVolumeClaim {
	w.t.Helper()
	var list corev1.PersistentVolumeClaimList
	if err := w.c.List(w.ctx(), &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]corev1.PersistentVolumeClaim{}
	for _, v := range list.Items {
		out[v.Name] = v
	}
	return out
}

// livePods maps each cache volume the pool's pods mount to the pods that mount it, and
// each pod to its volume (or "" for an emptyDir in the cache's place).
func (w *world) cacheMounts(pool, cache string) (byVolume map[string][]string, byPod map[string]string) {
	w.t.Helper()
	var pods corev1.PodList
	if err := w.c.List(w.ctx(), &pods, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		w.t.Fatal(err)
	}
	byVolume, byPod = map[string][]string{}, map[string]string{}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.Name != cache {
				continue
			}
			byPod[p.Name] = ""
			if v.PersistentVolumeClaim != nil {
				byPod[p.Name] = v.PersistentVolumeClaim.ClaimName
				byVolume[v.PersistentVolumeClaim.ClaimName] = append(byVolume[v.PersistentVolumeClaim.ClaimName], p.Name)
			}
		}
	}
	return byVolume, byPod
}

// queueAndRun queues n jobs of repo and plays kubelet and agent for each runner of the
// pool until they completed and the runners are gone. check runs at each poll.
func (w *world) queueAndRun(pool, repo string, n int, check func()) {
	w.t.Helper()
	queued := map[int64]bool{}
	for range n {
		j, err := w.sim.QueueJob(simgithub.JobSpec{Repo: repo, Labels: []string{"linux"}, Duration: simgithub.Duration(300 * time.Millisecond)})
		if err != nil {
			w.t.Fatal(err)
		}
		queued[j.ID] = true
	}
	w.playRunners(pool, fmt.Sprintf("%d jobs of %s to run", n, repo), func(completed map[int64]bool) bool {
		for id := range queued {
			if !completed[id] {
				return false
			}
		}
		return true
	}, check)
	w.eventually("the runners to be gone", func() (bool, error) { return len(w.runners(pool)) == 0, nil })
}

// A burst of runners claims volumes concurrently: no two live pods ever mount the same
// volume, each volume is held by the runner whose pod mounts it, and every volume is
// released, marked with the repository it served, once the jobs are done.
func TestCacheVolumesAreExclusiveUnderABurst(t *testing.T) {
	const jobs = 6
	w := newWorld(t)
	w.create(w.pool("burst").MaxRunners(jobs).Cache(testutil.CacheSpec("deps"), "/deps").Obj())
	violations := map[string][]string{}
	check := func() {
		byVolume, _ := w.cacheMounts("burst", "deps")
		for name, pods := range byVolume {
			if len(pods) > 1 {
				violations[name] = pods
			}
		}
	}
	w.queueAndRun("burst", "acme/api", jobs, check)
	if len(violations) > 0 {
		t.Errorf("volumes mounted by more than one live pod: %v", violations)
	}
	vols := w.cacheVolumes("burst")
	if len(vols) == 0 || len(vols) > jobs {
		t.Errorf("%d cache volumes for %d concurrent jobs, want 1 to %d", len(vols), jobs, jobs)
	}
	served := 0
	for name, v := range vols {
		if h := v.Labels[v1alpha1.LabelRunner]; h != "" {
			t.Errorf("volume %s is still held by %s after its runner ended", name, h)
		}
		// A volume whose runner was retired before it took a job served no repository.
		switch r := v.Annotations[v1alpha1.AnnotationCacheRepository]; r {
		case "acme/api":
			served++
		case "":
		default:
			t.Errorf("volume %s served repository %q, want acme/api", name, r)
		}
		if v.Spec.Resources.Requests.Storage().String() != "1Gi" {
			t.Errorf("volume %s requests %s, want the template's 1Gi", name, v.Spec.Resources.Requests.Storage())
		}
	}
	if served == 0 {
		t.Errorf("no volume records that it served acme/api")
	}
	w.eventually("status.caches to count the free volumes", func() (bool, error) {
		st := w.getPool("burst").Status.Caches
		return len(st) == 1 && st[0].Volumes == int32(len(vols)) && st[0].Free == int32(len(vols)) && st[0].InUse == 0 &&
			st[0].Hits+st[0].Misses >= jobs, nil
	})
}

// A second job after the first starts on the volume the first left: a hit.
func TestCacheVolumeIsReusedByTheNextJob(t *testing.T) {
	w := newWorld(t)
	w.create(w.pool("reuse").MaxRunners(1).Cache(testutil.CacheSpec("deps"), "/deps").Obj())
	var first string
	w.queueAndRun("reuse", "acme/api", 1, func() {
		if _, byPod := w.cacheMounts("reuse", "deps"); len(byPod) == 1 {
			for _, v := range byPod {
				first = v
			}
		}
	})
	if first == "" {
		t.Fatal("the first runner's pod mounted no cache volume")
	}
	var second string
	var hit bool
	w.queueAndRun("reuse", "acme/api", 1, func() {
		for _, rn := range w.runners("reuse") {
			if len(rn.Status.Caches) == 1 && rn.Status.PodName != "" {
				second, hit = rn.Status.Caches[0].ClaimName, rn.Status.Caches[0].Hit
			}
		}
	})
	if second != first || !hit {
		t.Errorf("second runner got volume %q (hit %v), want %q, a hit", second, hit, first)
	}
	w.eventually("status.caches to count one hit and one miss", func() (bool, error) {
		st := w.getPool("reuse").Status.Caches
		return len(st) == 1 && st[0].Hits == 1 && st[0].Misses == 1 && st[0].Volumes == 1, nil
	})
}

// At maxVolumes with every volume in use, a runner starts at once without the cache.
func TestRunnerStartsUncachedAtTheLimit(t *testing.T) {
	w := newWorld(t)
	c := testutil.CacheSpec("deps")
	c.MaxVolumes = ptr.To[int32](1)
	w.create(w.pool("limit").MinIdle(2).MaxRunners(2).Cache(c, "/deps").Obj())
	w.eventually("two runner pods", func() (bool, error) {
		_, byPod := w.cacheMounts("limit", "deps")
		return len(byPod) == 2, nil
	})
	byVolume, byPod := w.cacheMounts("limit", "deps")
	uncached := 0
	for _, v := range byPod {
		if v == "" {
			uncached++
		}
	}
	if len(byVolume) != 1 || uncached != 1 {
		t.Errorf("pods mount %v, want one on the single volume and one with an emptyDir", byPod)
	}
	if n := len(w.cacheVolumes("limit")); n != 1 {
		t.Errorf("%d cache volumes, want maxVolumes 1", n)
	}
}

// isolation: Repository never mounts a volume that served another repository, and a
// volume pinned to a node that is gone is deleted, one on a NotReady node passed over.
func TestCacheIsolationAndTopology(t *testing.T) {
	w := newWorld(t)
	notReady := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cache-notready-" + w.ns}}
	w.create(notReady)
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), notReady) })
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	if err := w.c.Status().Update(w.ctx(), notReady); err != nil {
		t.Fatal(err)
	}
	c := testutil.CacheSpec("deps")
	c.Isolation = v1alpha1.CacheIsolationRepository
	c.MaxVolumes = ptr.To[int32](5)
	used := time.Now().UTC().Format(time.RFC3339)
	preexisting := func(n int, ann map[string]string) {
		ann[v1alpha1.AnnotationCacheLastUsed] = used
		w.create(&corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: runner.VolumeName("strict", "deps", n), Annotations: ann, Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelPool: "strict", v1alpha1.LabelCache: "deps",
			}},
			Spec: c.VolumeClaimTemplate,
		})
	}
	preexisting(0, map[string]string{v1alpha1.AnnotationCacheRepository: "acme/other"})
	preexisting(1, map[string]string{"volume.kubernetes.io/selected-node": "gone-" + w.ns})
	preexisting(2, map[string]string{"volume.kubernetes.io/selected-node": notReady.Name})
	w.create(w.pool("strict").URL(w.simURL+"/acme/api").MinIdle(1).MaxRunners(1).Cache(c, "/deps").Obj())

	w.eventually("a runner pod", func() (bool, error) {
		_, byPod := w.cacheMounts("strict", "deps")
		return len(byPod) == 1, nil
	})
	_, byPod := w.cacheMounts("strict", "deps")
	for pod, v := range byPod {
		if v != runner.VolumeName("strict", "deps", 3) {
			t.Errorf("pod %s mounts %q, want a fresh volume %s: not another repository's, not one on a lost or NotReady node",
				pod, v, runner.VolumeName("strict", "deps", 3))
		}
	}
	vols := w.cacheVolumes("strict")
	if v, ok := vols[runner.VolumeName("strict", "deps", 1)]; ok && v.DeletionTimestamp.IsZero() {
		t.Errorf("the volume whose node is gone was not deleted")
	}
	for _, n := range []int{0, 2} {
		if v, ok := vols[runner.VolumeName("strict", "deps", n)]; !ok || !v.DeletionTimestamp.IsZero() || v.Labels[v1alpha1.LabelRunner] != "" {
			t.Errorf("volume %d was touched: %+v", n, v.ObjectMeta)
		}
	}
}

// Deleting a pool deletes the volumes of its Delete caches and keeps those of Retain
// caches, released.
func TestPoolDeletionHonoursTheReclaimPolicy(t *testing.T) {
	w := newWorld(t)
	keep := testutil.CacheSpec("keep")
	keep.ReclaimPolicy = v1alpha1.CacheReclaimRetain
	pool := w.pool("reclaim").MinIdle(1).MaxRunners(1).Cache(testutil.CacheSpec("drop"), "/drop").Cache(keep, "/keep").Obj()
	w.create(pool)
	w.eventually("a runner pod with both caches", func() (bool, error) {
		byVolume, _ := w.cacheMounts("reclaim", "drop")
		kept, _ := w.cacheMounts("reclaim", "keep")
		return len(byVolume) == 1 && len(kept) == 1, nil
	})
	if err := w.c.Delete(w.ctx(), pool); err != nil {
		t.Fatal(err)
	}
	w.eventually("the pool to be gone", func() (bool, error) {
		err := w.c.Get(w.ctx(), client.ObjectKeyFromObject(pool), &v1alpha1.RunnerPool{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	for name, v := range w.cacheVolumes("reclaim") {
		switch v.Labels[v1alpha1.LabelCache] {
		case "drop":
			if v.DeletionTimestamp.IsZero() {
				t.Errorf("volume %s of a Delete cache was kept", name)
			}
		case "keep":
			if !v.DeletionTimestamp.IsZero() || v.Labels[v1alpha1.LabelRunner] != "" {
				t.Errorf("volume %s of a Retain cache: deleting=%v holder=%q, want kept and released",
					name, !v.DeletionTimestamp.IsZero(), v.Labels[v1alpha1.LabelRunner])
			}
		}
	}
	if len(w.cacheVolumes("reclaim")) != 2 {
		t.Errorf("cache volumes after deletion: %d, want the Retain one and the terminating Delete one", len(w.cacheVolumes("reclaim")))
	}
}
