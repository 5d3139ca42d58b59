package runnerpool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/runner"
)

var cacheVolumes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "gantry_cache_volumes",
	Help: "Volumes of a pool's cache by state: total, in_use (claimed by a runner), free.",
}, []string{"namespace", "pool", "cache", "state"})

func init() { metrics.Registry.MustRegister(cacheVolumes) }

// cacheSpecError says why the pool's caches cannot work, for what the API server cannot
// check at admission within its CEL cost budget: every cache mounted by a container
// (volumeMounts[].name is the cache's name), and no template volume named like a cache.
func cacheSpecError(pool *v1alpha1.RunnerPool) error {
	spec := pool.Spec.Template.Spec
	for _, c := range pool.Spec.Caches {
		for _, v := range spec.Volumes {
			if v.Name == c.Name {
				return &controller.ConfigError{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
					"template.spec.volumes declares %q, the name of a cache: Gantry adds that volume itself; "+
						"remove it from volumes and keep only the volumeMount", c.Name)}
			}
		}
		mounted := false
		for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for _, ct := range cs {
				for _, m := range ct.VolumeMounts {
					mounted = mounted || m.Name == c.Name
				}
			}
		}
		if !mounted {
			return &controller.ConfigError{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
				"cache %q is mounted by no container: add a volumeMount named %q to the runner container or a sidecar, "+
					"such as {name: %s, mountPath: /var/lib/docker}", c.Name, c.Name, c.Name)}
		}
	}
	return nil
}

// tendCaches keeps the pool's cache volumes: status.caches and the gantry_cache_volumes
// gauges from the cached volumes, and free volumes deleted once unused for longer than
// their cache's idleTTL, or at once when their cache is no longer in the spec. A delete
// carries the resourceVersion it was decided on, so a volume a runner claimed meanwhile
// is kept. Returns when the next volume expires.
func (r *Reconciler) tendCaches(ctx context.Context, pool *v1alpha1.RunnerPool) (reconcile.Result, error) {
	if len(pool.Spec.Caches) == 0 && len(pool.Status.Caches) == 0 {
		return reconcile.Result{}, nil
	}
	vols, mounted, err := r.cacheVolumes(ctx, pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	specs := map[string]v1alpha1.CacheSpec{}
	for _, c := range pool.Spec.Caches {
		specs[c.Name] = c
	}
	now := r.Clock.Now()
	var (
		next time.Duration
		errs []error
	)
	counts := map[string]*v1alpha1.CacheStatus{}
	for i := range vols {
		v := &vols[i]
		name := v.Labels[v1alpha1.LabelCache]
		c, inSpec := specs[name]
		inUse := v.Labels[v1alpha1.LabelRunner] != "" || mounted[v.Name]
		if inSpec {
			if counts[name] == nil {
				counts[name] = &v1alpha1.CacheStatus{Name: name}
			}
			counts[name].Volumes++
			if inUse {
				counts[name].InUse++
			} else {
				counts[name].Free++
			}
		}
		if inUse || !v.DeletionTimestamp.IsZero() {
			continue
		}
		left := time.Duration(0)
		if inSpec {
			left = c.IdleTTLOrDefault() - now.Sub(lastUsed(v))
		}
		if left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		log.FromContext(ctx).V(1).Info("Deleting idle cache volume", "volume", klog.KObj(v), "cache", name)
		err := r.Client.Delete(ctx, v, client.Preconditions{ResourceVersion: &v.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting idle cache volume %s: %w", v.Name, err))
		}
	}
	pool.Status.Caches = nil
	for _, c := range pool.Spec.Caches {
		st := counts[c.Name]
		if st == nil {
			st = &v1alpha1.CacheStatus{Name: c.Name}
		}
		st.Hits, st.Misses = runner.CacheCounts(pool.Namespace, pool.Name, c.Name)
		pool.Status.Caches = append(pool.Status.Caches, *st)
		for state, n := range map[string]int32{"total": st.Volumes, "in_use": st.InUse, "free": st.Free} {
			cacheVolumes.WithLabelValues(pool.Namespace, pool.Name, c.Name, state).Set(float64(n))
		}
	}
	return reconcile.Result{RequeueAfter: next}, errors.Join(errs...)
}

// cacheVolumes lists the pool's cache volumes and which of them its pods mount.
func (r *Reconciler) cacheVolumes(ctx context.Context, pool *v1alpha1.RunnerPool) ([]corev1.PersistentVolumeClaim, map[string]bool, error) {
	var vols corev1.PersistentVolumeClaimList
	sel := client.MatchingLabels{v1alpha1.LabelPool: pool.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	if err := r.Client.List(ctx, &vols, client.InNamespace(pool.Namespace), sel); err != nil {
		return nil, nil, fmt.Errorf("listing cache volumes: %w", err)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(pool.Namespace), client.MatchingLabels{v1alpha1.LabelPool: pool.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing the pool's pods: %w", err)
	}
	mounted := map[string]bool{}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				mounted[v.PersistentVolumeClaim.ClaimName] = true
			}
		}
	}
	var out []corev1.PersistentVolumeClaim
	for _, v := range vols.Items {
		if _, ok := v.Labels[v1alpha1.LabelCache]; ok {
			out = append(out, v)
		}
	}
	return out, mounted, nil
}

// lastUsed is when a volume was last released, or made when never.
func lastUsed(v *corev1.PersistentVolumeClaim) time.Time {
	if t, err := time.Parse(time.RFC3339, v.Annotations[v1alpha1.AnnotationCacheLastUsed]); err == nil {
		return t
	}
	return v.CreationTimestamp.Time
}

// reclaimCaches, once a deleted pool has no runner left, deletes the volumes of its
// caches whose reclaimPolicy is Delete (and of caches no longer in its spec), and keeps
// those of Retain caches: a pool created again under the same name, with a cache of the
// same name, takes them up. The list is read fresh: the pool's finalizer goes next.
func (r *Reconciler) reclaimCaches(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	retain := map[string]bool{}
	for _, c := range pool.Spec.Caches {
		retain[c.Name] = c.ReclaimPolicy == v1alpha1.CacheReclaimRetain
	}
	var vols corev1.PersistentVolumeClaimList
	if err := r.APIReader.List(ctx, &vols, client.InNamespace(pool.Namespace),
		client.MatchingLabels{v1alpha1.LabelPool: pool.Name, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}); err != nil {
		return fmt.Errorf("listing cache volumes: %w", err)
	}
	var errs []error
	for i := range vols.Items {
		v := &vols.Items[i]
		name, ok := v.Labels[v1alpha1.LabelCache]
		if !ok || retain[name] || !v.DeletionTimestamp.IsZero() {
			continue
		}
		log.FromContext(ctx).V(1).Info("Deleting cache volume with its pool", "volume", klog.KObj(v))
		if err := r.Client.Delete(ctx, v); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting cache volume %s: %w", v.Name, err))
		}
	}
	runner.ForgetCaches(pool.Namespace, pool.Name)
	return errors.Join(errs...)
}

// poolOfVolume is the pool of a cache volume, woken when the volume changes.
func poolOfVolume(_ context.Context, o client.Object) []reconcile.Request {
	pool := o.GetLabels()[v1alpha1.LabelPool]
	if pool == "" || o.GetLabels()[v1alpha1.LabelCache] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: pool}}}
}

func forgetCacheMetrics(ns, pool string) {
	cacheVolumes.DeletePartialMatch(prometheus.Labels{"namespace": ns, "pool": pool})
}
