package run

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

const (
	// cacheMountPath is where the runner container mounts the scenario's cache.
	cacheMountPath = "/cache"
	// cacheWarmUp is the share of the arrivals' window, from its start, whose jobs the
	// hit rates leave out: the volumes are being made then.
	cacheWarmUp = 0.2
	// pendingOnCacheAfter is how long a runner pod may wait unscheduled on its volume
	// before it counts in pods_pending_on_cache.
	pendingOnCacheAfter = 10 * time.Second
)

// cacheUse is what a job's runner found in its cache volume when the job started.
type cacheUse struct {
	Job   int64
	Repo  string
	Claim string // "" without a volume: no cache, or started uncached at maxVolumes
	// Hit: an earlier runner had used the volume; RepoHit: the job's own repository
	// was the last to.
	Hit, RepoHit bool
	Setup        time.Duration
}

// cacheMeter plays and measures the caches of a run. Its setup is the agents'
// Options.Setup: a job's setup is warm when the pod's volume of the cache was last
// released by a runner of the job's repository — what the volume's
// gantry.dev/cache-repository annotation says, written by the controller when that
// runner ended and left alone while the volume is held. Its sampler looks at the
// pool's pods every second for volumes mounted twice and pods held back by a volume.
type cacheMeter struct {
	c          client.Client
	cache      string // the cache's name, "" when the pool has none
	cold, warm time.Duration

	mu         sync.Mutex
	uses       map[int64]cacheUse
	shared     map[string]bool // claim + pods seen mounting it together
	pending    map[string]bool // pods held back by a volume
	maxVolumes int
}

func newCacheMeter(c client.Client, sc Scenario) *cacheMeter {
	m := &cacheMeter{c: c, cold: sc.CacheSetup, warm: sc.WarmSetup,
		uses: map[int64]cacheUse{}, shared: map[string]bool{}, pending: map[string]bool{}}
	if sc.Cache != nil {
		m.cache = sc.Cache.Name
	}
	return m
}

// setup is how long the job's setup takes on pod: warm on a volume its repository
// used last, else cold.
func (m *cacheMeter) setup(ctx context.Context, pod *corev1.Pod, job *runnerapi.Job) time.Duration {
	u := cacheUse{Job: job.ID, Repo: job.Repository, Setup: m.cold}
	for _, v := range pod.Spec.Volumes {
		if v.Name == m.cache && m.cache != "" && v.PersistentVolumeClaim != nil {
			u.Claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	if u.Claim != "" {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := m.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: u.Claim}, pvc); err == nil {
			last := pvc.Annotations[v1alpha1.AnnotationCacheRepository]
			u.Hit = pvc.Annotations[v1alpha1.AnnotationCacheLastUsed] != ""
			u.RepoHit = u.Hit && last != "" && strings.EqualFold(last, job.Repository)
		}
	}
	if u.RepoHit {
		u.Setup = m.warm
	}
	m.mu.Lock()
	m.uses[job.ID] = u
	m.mu.Unlock()
	return u.Setup
}

// sample watches the pool's pods and volumes every second until ctx ends.
func (m *cacheMeter) sample(ctx context.Context, pool string, log io.Writer) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if err := m.sampleOnce(ctx, pool); err != nil && ctx.Err() == nil {
			fmt.Fprintf(log, "Cache sampler: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleOnce records the live pods (Pending or Running) mounting one claim together,
// and the pods unscheduled for longer than pendingOnCacheAfter because of a volume:
// kube-scheduler blames one, or the claim is still unbound.
func (m *cacheMeter) sampleOnce(ctx context.Context, pool string) error {
	var pods corev1.PodList
	if err := m.c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		return err
	}
	var vols corev1.PersistentVolumeClaimList
	if err := m.c.List(ctx, &vols, client.InNamespace(namespace), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
		return err
	}
	bound := map[string]bool{}
	for _, v := range vols.Items {
		bound[v.Name] = v.Status.Phase == corev1.ClaimBound
	}
	mounts := map[string][]string{}
	var pending []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning {
			continue
		}
		var claims []string
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims = append(claims, v.PersistentVolumeClaim.ClaimName)
				mounts[v.PersistentVolumeClaim.ClaimName] = append(mounts[v.PersistentVolumeClaim.ClaimName], p.Name)
			}
		}
		if len(claims) == 0 || p.Spec.NodeName != "" || time.Since(p.CreationTimestamp.Time) < pendingOnCacheAfter {
			continue
		}
		blamed := slices.ContainsFunc(claims, func(c string) bool { return !bound[c] })
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && cluster.VolumeBlocked(c.Message) {
				blamed = true
			}
		}
		if blamed {
			pending = append(pending, p.Name)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for claim, ps := range mounts {
		if len(ps) > 1 {
			slices.Sort(ps)
			m.shared[claim+" "+strings.Join(ps, ",")] = true
		}
	}
	for _, p := range pending {
		m.pending[p] = true
	}
	m.maxVolumes = max(m.maxVolumes, len(vols.Items))
	return nil
}

// deletePool deletes the pool once it has drained and waits for it and its cache
// volumes to go (timeout at most); it returns the volumes (claims) of the pool left and
// the PersistentVolumes of the simulated StorageClass left.
func deletePool(ctx context.Context, c client.Client, pool *v1alpha1.RunnerPool, timeout time.Duration) (claims, volumes int, err error) {
	if err := c.Delete(ctx, pool.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		return 0, 0, fmt.Errorf("deleting pool %s: %w", pool.Name, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		gone, err := isGone(ctx, c, pool)
		if err != nil {
			return 0, 0, err
		}
		var pvcs corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &pvcs, client.InNamespace(namespace), client.MatchingLabels{v1alpha1.LabelPool: pool.Name}); err != nil {
			return 0, 0, err
		}
		var pvs corev1.PersistentVolumeList
		if err := c.List(ctx, &pvs); err != nil {
			return 0, 0, err
		}
		volumes = 0
		for _, pv := range pvs.Items {
			if pv.Spec.StorageClassName == cluster.StorageClass {
				volumes++
			}
		}
		claims = len(pvcs.Items)
		if gone && claims == 0 && volumes == 0 || !time.Now().Before(deadline) {
			return claims, volumes, nil
		}
		if err := ctx.Err(); err != nil {
			return claims, volumes, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// isGone reports whether obj is gone from the API server.
func isGone(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", obj.GetName(), err)
	}
	return false, nil
}

// CacheReport is report.json's caches: what the pool's cache saved, and whether it kept
// its promises.
type CacheReport struct {
	// Enabled: the pool had the cache (false: the same jobs without it, every setup
	// cold).
	Enabled bool `json:"enabled"`
	// WarmUpSeconds: jobs queued in the first WarmUpSeconds of the workload are left
	// out of the rates (the first 20 % of the arrivals' window).
	WarmUpSeconds float64 `json:"warm_up_seconds"`
	// Jobs: jobs queued after the warm-up that a runner started, the rates' base.
	Jobs int `json:"jobs"`
	// HitRate: of those, the share whose runner mounted a volume an earlier runner had
	// used; RepoHitRate: the share whose volume was last used by the job's own
	// repository (the warm setups).
	HitRate     float64 `json:"hit_rate"`
	RepoHitRate float64 `json:"repo_hit_rate"`
	// SetupSeconds: the setup every started job played; SetupSecondsSaved: what the
	// warm ones saved against a cold setup each (all jobs, warm-up included).
	SetupSeconds      float64 `json:"setup_seconds"`
	SetupSecondsSaved float64 `json:"setup_seconds_saved"`
	// SharedMountViolations: claims seen (sampled every second) mounted by two live
	// pods (Pending or Running) at once, each set of pods counted once.
	SharedMountViolations int `json:"shared_mount_violations"`
	// PodsPendingOnCache: runner pods unscheduled for more than 10 s because of a
	// volume (kube-scheduler blamed one, or the claim was unbound).
	PodsPendingOnCache int `json:"pods_pending_on_cache"`
	// VolumesMax: the most claims the cache had at once.
	VolumesMax int `json:"volumes_max"`
	// VolumesLeft: the pool's claims left after the pool was deleted and drained;
	// PersistentVolumesLeft: the provisioner's volumes left.
	VolumesLeft           int `json:"volumes_left"`
	PersistentVolumesLeft int `json:"persistent_volumes_left"`
}

// cacheInputs is what a run measured of its caches.
type cacheInputs struct {
	uses                []cacheUse
	shared, pending     int
	volumesMax          int
	claimsLeft, pvsLeft int
	deleteErr           error
	cold                time.Duration
	enabled             bool
	warmUpEnd           time.Time
}

func (m *cacheMeter) inputs() cacheInputs {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := cacheInputs{shared: len(m.shared), pending: len(m.pending), volumesMax: m.maxVolumes, cold: m.cold, enabled: m.cache != ""}
	for _, u := range m.uses {
		in.uses = append(in.uses, u)
	}
	slices.SortFunc(in.uses, func(a, b cacheUse) int { return int(a.Job - b.Job) })
	return in
}

// cacheReport builds caches from what the meter saw and the jobs' queue times.
func cacheReport(in cacheInputs, queuedAt map[int64]time.Time, warmUp time.Duration) *CacheReport {
	r := &CacheReport{
		Enabled: in.enabled, WarmUpSeconds: round1(warmUp.Seconds()),
		SharedMountViolations: in.shared, PodsPendingOnCache: in.pending, VolumesMax: in.volumesMax,
		VolumesLeft: in.claimsLeft, PersistentVolumesLeft: in.pvsLeft,
	}
	hits, repoHits := 0, 0
	var setup, saved time.Duration
	for _, u := range in.uses {
		setup += u.Setup
		saved += in.cold - u.Setup
		q, ok := queuedAt[u.Job]
		if !ok || q.Before(in.warmUpEnd) {
			continue
		}
		r.Jobs++
		if u.Hit {
			hits++
		}
		if u.RepoHit {
			repoHits++
		}
	}
	if r.Jobs > 0 {
		r.HitRate = round3(float64(hits) / float64(r.Jobs))
		r.RepoHitRate = round3(float64(repoHits) / float64(r.Jobs))
	}
	r.SetupSeconds, r.SetupSecondsSaved = round1(setup.Seconds()), round1(saved.Seconds())
	return r
}

// Clean reports whether the cache kept its promises: no volume mounted twice, no pod
// held back by one, none left after the pool.
func (r *CacheReport) Clean() bool {
	return r == nil || !r.Enabled || r.SharedMountViolations == 0 && r.PodsPendingOnCache == 0 && r.VolumesLeft == 0
}
