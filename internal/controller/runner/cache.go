package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/github"
)

// leaseCaches claims, for a runner whose pod is not made yet, one volume of each of the
// pool's caches (docs/caches.md), and records them in status.caches for buildPod.
// Contract: a volume is held by at most one runner, and mounted by at most one live pod:
//
//   - A claim is the label gantry.dev/runner=RUNNER on the PersistentVolumeClaim,
//     written by a patch carrying the resourceVersion read by an uncached list: of two
//     runners claiming the same volume, the API server lets one write and refuses the
//     other (409), which moves on to the next volume.
//   - A volume is free when no runner holds it (or the one named is gone) and no pod
//     of the pool mounts it.
//   - A new volume is named POOL-CACHE-N with the lowest N below maxVolumes not taken,
//     created already claimed: the API server's AlreadyExists keeps two runners from
//     making the same one, and the names keep the cache within maxVolumes.
//   - At maxVolumes with none free, the runner starts without the cache (an emptyDir in
//     its place): a job never waits for a cache.
//
// A volume whose PersistentVolume is pinned to a node that is gone is deleted; one pinned
// to a NotReady or cordoned node is passed over. A runner that already holds volumes
// (an earlier reconcile claimed them) keeps them. Always done.
func (r *Reconciler) leaseCaches(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	if len(s.pool.Spec.Caches) == 0 || s.runner.Status.PodName != "" {
		return reconcile.Result{}, true, nil
	}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: s.runner.Namespace, Name: s.runner.Name}, &corev1.Pod{}); err == nil {
		return reconcile.Result{}, true, nil // made already: ensurePod takes it up
	}
	var vols corev1.PersistentVolumeClaimList
	if err := r.APIReader.List(ctx, &vols, ctrl.InNamespace(s.runner.Namespace),
		ctrl.MatchingLabels{v1alpha1.LabelPool: s.pool.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}); err != nil {
		return reconcile.Result{}, false, fmt.Errorf("listing cache volumes: %w", err)
	}
	mounted, err := r.mountedVolumes(ctx, s.runner.Namespace, s.pool.Name)
	if err != nil {
		return reconcile.Result{}, false, err
	}
	leased := make([]v1alpha1.RunnerCacheVolume, 0, len(s.pool.Spec.Caches))
	for _, c := range s.pool.Spec.Caches {
		var mine []corev1.PersistentVolumeClaim
		for _, v := range vols.Items {
			if v.Labels[v1alpha1.LabelCache] == c.Name {
				mine = append(mine, v)
			}
		}
		v, err := r.leaseCache(ctx, s, c, mine, mounted)
		if err != nil {
			return reconcile.Result{}, false, err
		}
		leased = append(leased, v)
	}
	s.runner.Status.Caches = leased
	return reconcile.Result{}, true, nil
}

// mountedVolumes are the claims the pool's pods mount, whatever their phase: a pod still
// terminating may still write to its volume.
func (r *Reconciler) mountedVolumes(ctx context.Context, ns, pool string) (map[string]string, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, ctrl.InNamespace(ns), ctrl.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		return nil, fmt.Errorf("listing the pool's pods: %w", err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				out[v.PersistentVolumeClaim.ClaimName] = p.Name
			}
		}
	}
	return out, nil
}

func (r *Reconciler) leaseCache(ctx context.Context, s *scope, c v1alpha1.CacheSpec, vols []corev1.PersistentVolumeClaim,
	mounted map[string]string) (v1alpha1.RunnerCacheVolume, error) {
	logger := log.FromContext(ctx)
	for _, v := range vols {
		if v.Labels[v1alpha1.LabelRunner] == s.runner.Name && v.DeletionTimestamp.IsZero() {
			return v1alpha1.RunnerCacheVolume{Name: c.Name, ClaimName: v.Name, Hit: usedBefore(&v)}, nil
		}
	}
	repo := poolRepository(s.pool)
	var free []*corev1.PersistentVolumeClaim
	for i := range vols {
		v := &vols[i]
		if !v.DeletionTimestamp.IsZero() || mounted[v.Name] != "" || !r.unclaimed(ctx, v) {
			continue
		}
		if c.Isolation == v1alpha1.CacheIsolationRepository && v.Annotations[v1alpha1.AnnotationCacheRepository] != "" &&
			!strings.EqualFold(v.Annotations[v1alpha1.AnnotationCacheRepository], repo) {
			continue // served another repository (retained from an earlier pool): never mounted here
		}
		free = append(free, v)
	}
	// Most recently used first: the warmest cache. Runners are made for a count of jobs,
	// not a given job, so the job's repository is not known yet.
	slices.SortStableFunc(free, func(a, b *corev1.PersistentVolumeClaim) int {
		return strings.Compare(b.Annotations[v1alpha1.AnnotationCacheLastUsed], a.Annotations[v1alpha1.AnnotationCacheLastUsed])
	})
	for _, v := range free {
		switch r.volumeNodeState(ctx, v) {
		case nodeGone:
			logger.Info("Deleting cache volume: its node is gone", "volume", klog.KObj(v))
			err := r.Client.Delete(ctx, v, ctrl.Preconditions{ResourceVersion: &v.ResourceVersion})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return v1alpha1.RunnerCacheVolume{}, fmt.Errorf("deleting cache volume %s: %w", v.Name, err)
			}
			continue
		case nodeUnusable:
			continue
		}
		patch := ctrl.MergeFromWithOptions(v.DeepCopy(), ctrl.MergeFromWithOptimisticLock{})
		v.Labels[v1alpha1.LabelRunner] = s.runner.Name
		logger.V(1).Info("Claiming cache volume", "cache", c.Name, "volume", v.Name)
		err := r.Client.Patch(ctx, v, patch)
		switch {
		case err == nil:
			hit := usedBefore(v)
			countLease(s.runner.Namespace, s.pool.Name, c.Name, hit)
			return v1alpha1.RunnerCacheVolume{Name: c.Name, ClaimName: v.Name, Hit: hit}, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue // another runner took it, or it changed: try the next
		default:
			return v1alpha1.RunnerCacheVolume{}, fmt.Errorf("claiming cache volume %s: %w", v.Name, err)
		}
	}
	limit := int(c.MaxVolumesOrDefault(s.pool.Spec.MaxRunners))
	taken := map[string]bool{}
	for _, v := range vols {
		taken[v.Name] = true
	}
	for n := 0; n < limit && len(taken) < limit; n++ {
		name := VolumeName(s.pool.Name, c.Name, n)
		if taken[name] {
			continue
		}
		pvc := newVolume(s.pool, c, name, s.runner.Name)
		logger.V(1).Info("Creating cache volume", "cache", c.Name, "volume", name)
		err := r.Client.Create(ctx, pvc)
		switch {
		case err == nil:
			countLease(s.runner.Namespace, s.pool.Name, c.Name, false)
			return v1alpha1.RunnerCacheVolume{Name: c.Name, ClaimName: name}, nil
		case apierrors.IsAlreadyExists(err):
			taken[name] = true // another runner made it a moment ago
			continue
		default:
			return v1alpha1.RunnerCacheVolume{}, fmt.Errorf("creating cache volume %s: %w", name, err)
		}
	}
	logger.V(1).Info("Starting without cache: every volume is in use", "cache", c.Name, "maxVolumes", limit)
	countLease(s.runner.Namespace, s.pool.Name, c.Name, false)
	return v1alpha1.RunnerCacheVolume{Name: c.Name}, nil
}

// unclaimed reports whether no runner holds the volume: no claim label, or one naming a
// Runner that is gone (removed without its finalizer running).
func (r *Reconciler) unclaimed(ctx context.Context, v *corev1.PersistentVolumeClaim) bool {
	holder := v.Labels[v1alpha1.LabelRunner]
	if holder == "" {
		return true
	}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: v.Namespace, Name: holder}, &v1alpha1.Runner{})
	return apierrors.IsNotFound(err)
}

// usedBefore reports whether an earlier runner used the volume: a hit.
func usedBefore(v *corev1.PersistentVolumeClaim) bool {
	return v.Annotations[v1alpha1.AnnotationCacheLastUsed] != ""
}

// VolumeName is the name of a cache's volume number n: POOL-CACHE-N.
func VolumeName(pool, cache string, n int) string { return fmt.Sprintf("%s-%s-%d", pool, cache, n) }

// newVolume is a cache volume made from the cache's template, claimed by runner.
func newVolume(pool *v1alpha1.RunnerPool, c v1alpha1.CacheSpec, name, runner string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pool.Namespace,
			Name:      name,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
				v1alpha1.LabelPool:      pool.Name,
				v1alpha1.LabelCache:     c.Name,
				v1alpha1.LabelRunner:    runner,
			},
		},
		Spec: *c.VolumeClaimTemplate.DeepCopy(),
	}
}

// poolRepository is OWNER/REPO of a repository-scoped pool, else "".
func poolRepository(pool *v1alpha1.RunnerPool) string {
	sc, err := github.ParseURL(pool.Spec.GitHub.URL)
	if err != nil || sc.Kind != github.ScopeRepository {
		return ""
	}
	return sc.Owner + "/" + sc.Repo
}

// cacheVolumes are the pod volumes of the pool's caches: each the claim the runner
// holds, or an emptyDir when it started without one.
func cacheVolumes(runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) []corev1.Volume {
	out := make([]corev1.Volume, 0, len(pool.Spec.Caches))
	for _, c := range pool.Spec.Caches {
		vol := corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
		for _, l := range runner.Status.Caches {
			if l.Name == c.Name && l.ClaimName != "" {
				vol.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: l.ClaimName}}
			}
		}
		out = append(out, vol)
	}
	return out
}

// releaseCaches returns the volumes a runner holds to the free set, once its pod is
// gone: the claim label is removed, and the time and the repository of the runner's job
// recorded. Idempotent; a volume claimed again meanwhile (409) is read again and retried.
func (r *Reconciler) releaseCaches(ctx context.Context, runner *v1alpha1.Runner) error {
	if len(runner.Status.Caches) == 0 {
		// It leased none (most pools have no cache: no read for them). A claim whose
		// record in the status was lost names a Runner that is gone, which does not hold
		// a volume no pod mounts.
		return nil
	}
	var vols corev1.PersistentVolumeClaimList
	if err := r.APIReader.List(ctx, &vols, ctrl.InNamespace(runner.Namespace),
		ctrl.MatchingLabels{v1alpha1.LabelRunner: runner.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}); err != nil {
		return fmt.Errorf("listing the runner's cache volumes: %w", err)
	}
	for i := range vols.Items {
		v := &vols.Items[i]
		if _, ok := v.Labels[v1alpha1.LabelCache]; !ok {
			continue
		}
		patch := ctrl.MergeFromWithOptions(v.DeepCopy(), ctrl.MergeFromWithOptimisticLock{})
		delete(v.Labels, v1alpha1.LabelRunner)
		if v.Annotations == nil {
			v.Annotations = map[string]string{}
		}
		v.Annotations[v1alpha1.AnnotationCacheLastUsed] = r.Clock.Now().UTC().Format(time.RFC3339)
		if runner.Status.Job != nil && runner.Status.Job.Repository != "" {
			v.Annotations[v1alpha1.AnnotationCacheRepository] = runner.Status.Job.Repository
		}
		log.FromContext(ctx).V(1).Info("Releasing cache volume", "volume", v.Name)
		if err := r.Client.Patch(ctx, v, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing cache volume %s: %w", v.Name, err)
		}
	}
	return nil
}

// nodeState is whether a volume's node can run a pod that mounts it.
type nodeState int

const (
	// nodeUsable: not pinned to a node, pinned to a Ready schedulable one, or unknown
	// (the controller may not read PersistentVolumes or Nodes).
	nodeUsable nodeState = iota
	// nodeUnusable: pinned to a node that is NotReady or cordoned.
	nodeUnusable
	// nodeGone: pinned to a node that no longer exists.
	nodeGone
)

// volumeNodeState says whether the node a volume is pinned to — its bound
// PersistentVolume's nodeAffinity on kubernetes.io/hostname (local volumes), or the node
// the scheduler chose for a WaitForFirstConsumer claim not yet bound — can run a pod.
func (r *Reconciler) volumeNodeState(ctx context.Context, v *corev1.PersistentVolumeClaim) nodeState {
	node := v.Annotations["volume.kubernetes.io/selected-node"]
	if v.Spec.VolumeName != "" {
		pv := &corev1.PersistentVolume{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: v.Spec.VolumeName}, pv); err == nil {
			node = pinnedNode(pv)
		}
	}
	if node == "" {
		return nodeUsable
	}
	n, err := r.Nodes.Get(ctx, node)
	if apierrors.IsNotFound(err) {
		// The cache may not have seen a node just made: a volume is deleted only for a
		// node the API server says is gone.
		n = &corev1.Node{}
		err = r.APIReader.Get(ctx, types.NamespacedName{Name: node}, n)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nodeGone
	case err != nil:
		return nodeUsable
	case n.Spec.Unschedulable || !n.DeletionTimestamp.IsZero():
		return nodeUnusable
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return nodeUnusable
		}
	}
	return nodeUsable
}

// pinnedNode is the one node a PersistentVolume's nodeAffinity allows, or "".
func pinnedNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil || len(pv.Spec.NodeAffinity.Required.NodeSelectorTerms) != 1 {
		return ""
	}
	for _, e := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
			return e.Values[0]
		}
	}
	return ""
}

var (
	cacheHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_cache_hits_total",
		Help: "Runners that started on a cache volume an earlier runner had used, by pool and cache.",
	}, []string{"namespace", "pool", "cache"})
	cacheMisses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_cache_misses_total",
		Help: "Runners that started on a fresh cache volume or, at maxVolumes, without the cache, by pool and cache.",
	}, []string{"namespace", "pool", "cache"})
)

func init() { metrics.Registry.MustRegister(cacheHits, cacheMisses) }

// cacheCounts are the hits and misses of each cache since the controller started, for
// the pool's status.
var cacheCounts struct {
	sync.Mutex
	m map[cacheKey]*[2]int64
}

type cacheKey struct{ namespace, pool, cache string }

func countLease(ns, pool, cache string, hit bool) {
	cacheCounts.Lock()
	defer cacheCounts.Unlock()
	if cacheCounts.m == nil {
		cacheCounts.m = map[cacheKey]*[2]int64{}
	}
	k := cacheKey{ns, pool, cache}
	if cacheCounts.m[k] == nil {
		cacheCounts.m[k] = &[2]int64{}
	}
	if hit {
		cacheCounts.m[k][0]++
		cacheHits.WithLabelValues(ns, pool, cache).Inc()
		return
	}
	cacheCounts.m[k][1]++
	cacheMisses.WithLabelValues(ns, pool, cache).Inc()
}

// CacheCounts returns a cache's hits and misses since the controller started. The
// counters' series exist, at 0, from the first call: rate() works from the first hit.
func CacheCounts(ns, pool, cache string) (hits, misses int64) {
	cacheHits.WithLabelValues(ns, pool, cache)
	cacheMisses.WithLabelValues(ns, pool, cache)
	cacheCounts.Lock()
	defer cacheCounts.Unlock()
	if c := cacheCounts.m[cacheKey{ns, pool, cache}]; c != nil {
		return c[0], c[1]
	}
	return 0, 0
}

// ForgetCaches drops a deleted pool's hit and miss counts.
func ForgetCaches(ns, pool string) {
	cacheCounts.Lock()
	defer cacheCounts.Unlock()
	for k := range cacheCounts.m {
		if k.namespace == ns && k.pool == pool {
			delete(cacheCounts.m, k)
		}
	}
	cacheHits.DeletePartialMatch(prometheus.Labels{"namespace": ns, "pool": pool})
	cacheMisses.DeletePartialMatch(prometheus.Labels{"namespace": ns, "pool": pool})
}
