package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/github"
)

// finalize removes a deleted Runner from GitHub and the cluster. Contract: a runner
// GitHub says is busy (422) is kept, pod and all, and checked again later — a scale-down
// never kills a job. A Succeeded runner, one whose pod exited 0, or one whose job GitHub
// said completed (it ran its job) removed itself from GitHub (ephemeral), so no call is
// made for it. A registration already gone (404) is done. A runner whose pod exited 0
// and that holds no cache volume has its pod and Secret deleted with other such
// runners' (exitedReaper: one request of each kind a batch, not the garbage
// collector's one each); otherwise the pod and the Secret are deleted, and the cache
// volumes the runner held
// released once the pod is gone; a pod stuck terminating on a lost node is force-deleted
// after nodeLostTimeout (removePod), and the finalizer removed once the pod is gone. An
// idle or pending runner whose pod has not exited shows phase Deleting meanwhile.
func (r *Reconciler) finalize(ctx context.Context, runner *v1alpha1.Runner) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(runner, v1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx)
	stored := runner.DeepCopy()
	if e := r.unwritten.get(runner); e != nil {
		e.applyTo(&runner.Status, runner.Name)
	}
	r.notePodUsage(ctx, runner) // usage.go
	exitedPod, err := r.podExited(ctx, runner)
	if err != nil {
		return reconcile.Result{}, err
	}
	exited := exitedPod != nil
	if !exited {
		if err := r.markDeleting(ctx, runner, stored); err != nil {
			return reconcile.Result{}, err
		}
	}
	// Succeeded means the runner ran its job, or its container exited 0: an ephemeral
	// runner exits 0 only after its one job (or once removed from GitHub), and removes
	// itself from GitHub as it does — even when the job's in_progress word was missed.
	// GitHub's word that its job completed (a completed webhook, a scale set's
	// JobCompleted) says the same before its pod has exited: no call is made for it.
	selfRemoved := runner.Status.Phase == v1alpha1.RunnerSucceeded || exited ||
		(r.Tracker != nil && r.Tracker.Finished(runner.Name))
	registered := runner.Status.GitHubRunnerID != 0 || runner.Status.RegisteredAt != nil
	if !registered && !selfRemoved && !r.Births.Ours(runnerKey(runner)) {
		// Neither its status nor this process knows of a registration: an earlier
		// process may have made one and not recorded it. Its Secret says.
		found, id, err := r.readRegistration(ctx, runner)
		if err != nil {
			return reconcile.Result{}, err
		}
		registered, runner.Status.GitHubRunnerID = found, id
	}
	if registered && !selfRemoved && !r.unregistered.has(runner) {
		res, err := r.unregister(ctx, runner)
		if err != nil || !res.IsZero() {
			return res, err
		}
		// Once is enough: the passes that wait for the pod to go make no call again.
		r.unregistered.add(runner)
	}

	if exited && len(runner.Status.Caches) == 0 {
		// The pod has exited and holds nothing: it and the Secret go with the other
		// exited runners' in one request of each kind (reap.go), not one by one through
		// the garbage collector.
		logger.V(1).Info("Runner exited; deleting its pod and Secret with the batch")
		if err := r.exited.reap(ctx, r.Client, r.Clock, runner.Namespace, runner.Name); err != nil {
			return reconcile.Result{}, err
		}
	} else {
		if left, err := r.removePod(ctx, runner); err != nil || left > 0 {
			return reconcile.Result{RequeueAfter: left}, err
		}
		// The pod is gone: nothing mounts the runner's cache volumes any more.
		if err := r.releaseCaches(ctx, runner); err != nil {
			return reconcile.Result{}, err
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: runner.Namespace, Name: runner.Name}}
		if err := r.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("deleting runner secret: %w", err)
		}
	}
	if err := r.removeHookObjects(ctx, runner, r.poolOf(ctx, runner), exitedPod); err != nil { // hookpods.go
		return reconcile.Result{}, err
	}
	// The Tracker keeps the runner's finished job until the Runner is gone from the
	// cache (Reconcile's NotFound): till then the pool still lists it, deleted and Busy,
	// and counts it busy unless the Tracker says its job is done — against maxRunners,
	// where a runner just made for a queued job would be retired to make room.
	logger.V(1).Info("Runner removed")
	controllerutil.RemoveFinalizer(runner, v1alpha1.Finalizer)
	patch := controller.FinalizersPatch(runner)
	if err := r.Client.Patch(ctx, runner, patch); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	r.writes.finalized(runner, r.Clock.Now())
	r.forgetRegistration(runnerKey(runner))
	r.recordUsage(ctx, runner) // usage.go: once, the finalizer gone
	return reconcile.Result{}, nil
}

// unregister removes a runner from GitHub through its pool's demand source: one place
// for every source's answers. Done (nothing to do) when the runner is gone or the pool's
// configuration cannot be used (an event says so); a busy runner is kept (keepBusy); a
// rate limit waits as long as GitHub asks.
func (r *Reconciler) unregister(ctx context.Context, runner *v1alpha1.Runner) (reconcile.Result, error) {
	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: runner.Namespace, Name: runner.Spec.PoolName}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			// Pools drain before they go, so this is a pool deleted around its finalizer.
			r.Events.Eventf(runner, nil, corev1.EventTypeWarning, "UnregisterSkipped", "Unregister",
				"pool %s is gone: runner %s could not be unregistered from GitHub (GitHub removes offline runners itself)", runner.Spec.PoolName, runner.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	err := r.Sources.For(pool).Unregister(ctx, pool, runner.Name, runner.Status.GitHubRunnerID)
	var cfg *controller.ConfigError
	switch {
	case err == nil:
		return reconcile.Result{}, nil
	case errors.As(err, &cfg):
		r.Events.Eventf(runner, pool, corev1.EventTypeWarning, "UnregisterSkipped", "Unregister",
			"cannot unregister runner %s from GitHub: %s", runner.Name, cfg.Message)
		return reconcile.Result{}, nil
	case github.IsBusy(err):
		return r.keepBusy(ctx, runner)
	case github.IsRateLimited(err):
		return reconcile.Result{RequeueAfter: github.RetryAfter(err)}, nil
	}
	return reconcile.Result{}, err
}

// markDeleting sets phase Deleting on an idle or pending runner being finalized. A busy
// runner stays Busy (it finishes its job), a finished one keeps Succeeded or Failed.
// stored is the Runner as read: the write also records what this process remembered
// of it (unwritten.go) and runner shows.
func (r *Reconciler) markDeleting(ctx context.Context, runner, stored *v1alpha1.Runner) error {
	switch runner.Status.Phase {
	case "", v1alpha1.RunnerPending, v1alpha1.RunnerIdle:
	default:
		return nil
	}
	runner.Status.Phase = v1alpha1.RunnerDeleting
	patch, err := controller.StatusPatch(stored.Status, runner.Status)
	if err != nil {
		return err
	}
	if err := r.Client.Status().Patch(ctx, runner, patch); err != nil {
		return ctrl.IgnoreNotFound(err)
	}
	r.writes.wrote(runner, stored.ResourceVersion, r.Clock.Now())
	return nil
}

// removePod deletes the runner's pod and returns how long to wait for it to be gone: 0
// once it is. A pod bound to a node stays terminating until its kubelet confirms it;
// one whose node is lost never is, so it is force-deleted nodeLostTimeout after its
// grace period ended (the pool's, or the default when the pool is gone). Without this
// the Runner would go and leave the pod terminating with nothing to remove it.
func (r *Reconciler) removePod(ctx context.Context, runner *v1alpha1.Runner) (time.Duration, error) {
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: runner.Namespace, Name: runner.Name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading runner pod: %w", err)
	case !metav1.IsControlledBy(pod, runner):
		return 0, nil
	}
	if pod.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("deleting runner pod: %w", err)
		}
		if pod.Spec.NodeName == "" {
			return 0, nil // never bound: the API server removes it at once
		}
		// The pod's deletion event brings the runner back; the requeue is a backstop.
		return podGoneRecheck, nil
	}
	timeout := v1alpha1.DefaultNodeLostTimeout
	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: runner.Namespace, Name: runner.Spec.PoolName}, pool); err == nil {
		timeout = pool.Spec.Recovery.NodeLostTimeoutOrDefault()
	}
	left, err := r.reapStuckPod(ctx, pod, timeout)
	if err != nil || left > 0 {
		return min(max(left, time.Second), podGoneRecheck), err
	}
	return 0, nil
}

// podExited is the runner's own pod if it is there and exited 0, not being deleted;
// nil otherwise.
func (r *Reconciler) podExited(ctx context.Context, runner *v1alpha1.Runner) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: runner.Namespace, Name: runner.Name}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading runner pod: %w", err)
	}
	if metav1.IsControlledBy(pod, runner) && pod.DeletionTimestamp.IsZero() && pod.Status.Phase == corev1.PodSucceeded {
		return pod, nil
	}
	return nil, nil
}

// podGoneRecheck is how often a finalizing runner looks again at a pod still terminating.
const podGoneRecheck = 30 * time.Second

// keepBusy keeps a runner GitHub says runs a job: it is marked Busy and looked at again
// after busyRetry, pod and all.
func (r *Reconciler) keepBusy(ctx context.Context, runner *v1alpha1.Runner) (reconcile.Result, error) {
	if runner.Status.Phase != v1alpha1.RunnerBusy {
		before := runner.DeepCopy()
		runner.Status.Phase = v1alpha1.RunnerBusy
		patch, err := controller.StatusPatch(before.Status, runner.Status)
		if err != nil {
			return reconcile.Result{}, err
		}
		if perr := r.Client.Status().Patch(ctx, runner, patch); perr != nil {
			return reconcile.Result{}, ctrl.IgnoreNotFound(perr)
		}
		r.writes.wrote(runner, before.ResourceVersion, r.Clock.Now())
	}
	return reconcile.Result{RequeueAfter: busyRetry}, nil
}

// unregisteredRunners remembers the finalizing Runners this process removed from
// GitHub (by name, with their UID), until they are gone: a runner whose pod takes a
// while to go is finalized several times (each pod event), and removing it from GitHub
// once is enough. After a restart the removal is made once more, and answered "already
// gone". Its zero value is ready.
type unregisteredRunners struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

func (u *unregisteredRunners) add(rn *v1alpha1.Runner) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.uids == nil {
		u.uids = map[types.NamespacedName]types.UID{}
	}
	u.uids[runnerKey(rn)] = rn.UID
}

func (u *unregisteredRunners) has(rn *v1alpha1.Runner) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	uid, ok := u.uids[runnerKey(rn)]
	return ok && uid == rn.UID
}

func (u *unregisteredRunners) forget(key types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.uids, key)
}
