package runnerpool

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
)

// How often a held credentials Secret is looked at again (someone may have removed the
// finalizer by hand), and how soon one that could not be held (not created yet).
const (
	credentialsRecheck     = 10 * time.Minute
	credentialsRetryUnheld = 30 * time.Second
)

// credentialsGuard remembers which credentials Secrets were seen held, so that a pool
// reconcile reads a Secret only now and then: once per Secret, however many pools name
// it. Pools reconciled at once that find the same Secret due share one read (and one
// patch, if it must be held).
type credentialsGuard struct {
	mu      sync.Mutex
	checked map[types.NamespacedName]credentialsCheck
	holds   singleflight.Group
}

type credentialsCheck struct {
	at   time.Time
	held bool
}

// guardCredentials keeps the pool's credentials Secret from going away under its
// runners: it adds CredentialsFinalizer to the Secret and names the Secret in the
// pool's AnnotationCredentialsSecret. Contract: a Secret deleted while a pool uses it
// stays (Terminating, still readable) until no pool names it — the pools' runners can
// still be unregistered from GitHub; a Secret the pool no longer names is let go once no
// other pool names it. A Secret that does not exist yet is looked for again later. The
// Secret is read when it is due (credentialsDue), not for each pool that names it: one
// seen held a moment ago by another pool is held.
func (r *Reconciler) guardCredentials(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	want := pool.Spec.GitHub.CredentialsSecretRef.Name
	if want == "" {
		return nil // undecodable: reported as InvalidSpec
	}
	key := types.NamespacedName{Namespace: pool.Namespace, Name: want}
	had := pool.Annotations[v1alpha1.AnnotationCredentialsSecret]
	if r.credentialsDue(key) {
		if err := r.holdSecret(ctx, key); err != nil {
			return err
		}
	}
	if had == want {
		return nil
	}
	patch := client.MergeFromWithOptions(pool.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if pool.Annotations == nil {
		pool.Annotations = map[string]string{}
	}
	pool.Annotations[v1alpha1.AnnotationCredentialsSecret] = want
	if err := r.Client.Patch(ctx, pool, patch); err != nil {
		return fmt.Errorf("recording the pool's credentials secret: %w", err)
	}
	if had != "" {
		return r.releaseSecret(ctx, pool, had)
	}
	return nil
}

// takeUp is a new pool's one write of its metadata: the drain finalizer and, with the
// pool's credentials Secret held, the Secret's name (AnnotationCredentialsSecret), in
// one optimistic-lock patch rather than one each. A Secret that cannot be held now is
// named by holdCredentials in a later pass.
func (r *Reconciler) takeUp(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	patch := client.MergeFromWithOptions(pool.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(pool, Finalizer)
	if want := pool.Spec.GitHub.CredentialsSecretRef.Name; want != "" && pool.Annotations[v1alpha1.AnnotationCredentialsSecret] == "" {
		key := types.NamespacedName{Namespace: pool.Namespace, Name: want}
		if !r.credentialsDue(key) || r.holdSecret(ctx, key) == nil {
			if pool.Annotations == nil {
				pool.Annotations = map[string]string{}
			}
			pool.Annotations[v1alpha1.AnnotationCredentialsSecret] = want
		}
	}
	return r.Client.Patch(ctx, pool, patch)
}

func (r *Reconciler) credentialsDue(key types.NamespacedName) bool {
	r.credentials.mu.Lock()
	defer r.credentials.mu.Unlock()
	c, ok := r.credentials.checked[key]
	if !ok {
		return true
	}
	wait := credentialsRetryUnheld
	if c.held {
		wait = credentialsRecheck
	}
	return r.Clock.Since(c.at) >= wait
}

func (r *Reconciler) credentialsSeen(key types.NamespacedName, held bool) {
	r.credentials.mu.Lock()
	defer r.credentials.mu.Unlock()
	if r.credentials.checked == nil {
		r.credentials.checked = map[types.NamespacedName]credentialsCheck{}
	}
	r.credentials.checked[key] = credentialsCheck{at: r.Clock.Now(), held: held}
}

// holdSecret adds CredentialsFinalizer to the Secret unless it has it, does not exist
// or is already being deleted (no finalizer can be added then). Callers holding the same
// Secret at once share one read and one patch.
func (r *Reconciler) holdSecret(ctx context.Context, key types.NamespacedName) error {
	_, err, _ := r.credentials.holds.Do(key.String(), func() (any, error) { return nil, r.holdSecretNow(ctx, key) })
	return err
}

func (r *Reconciler) holdSecretNow(ctx context.Context, key types.NamespacedName) error {
	s := &corev1.Secret{}
	err := r.APIReader.Get(ctx, key, s)
	switch {
	case apierrors.IsNotFound(err):
		r.credentialsSeen(key, false)
		return nil
	case err != nil:
		return fmt.Errorf("reading credentials secret %s: %w", key, err)
	case controllerutil.ContainsFinalizer(s, v1alpha1.CredentialsFinalizer):
		r.credentialsSeen(key, true)
		return nil
	case !s.DeletionTimestamp.IsZero():
		r.credentialsSeen(key, false)
		return nil
	}
	log.FromContext(ctx).V(1).Info("Holding the credentials secret while the pool uses it", "secret", key.Name)
	controllerutil.AddFinalizer(s, v1alpha1.CredentialsFinalizer)
	patch := controller.FinalizersPatch(s)
	if err := r.Client.Patch(ctx, s, patch); err != nil {
		return fmt.Errorf("holding credentials secret %s: %w", key, client.IgnoreNotFound(err))
	}
	r.credentialsSeen(key, true)
	return nil
}

// releaseSecret removes CredentialsFinalizer from the named Secret of the pool's
// namespace, unless another pool names it (in its spec or as the Secret it holds).
func (r *Reconciler) releaseSecret(ctx context.Context, pool *v1alpha1.RunnerPool, name string) error {
	var pools v1alpha1.RunnerPoolList
	if err := r.Client.List(ctx, &pools, client.InNamespace(pool.Namespace)); err != nil {
		return fmt.Errorf("listing the pools that may use secret %s: %w", name, err)
	}
	for i := range pools.Items {
		other := &pools.Items[i]
		if other.Name == pool.Name {
			continue
		}
		if other.Spec.GitHub.CredentialsSecretRef.Name == name || other.Annotations[v1alpha1.AnnotationCredentialsSecret] == name {
			return nil
		}
	}
	key := types.NamespacedName{Namespace: pool.Namespace, Name: name}
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, s); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(s, v1alpha1.CredentialsFinalizer) {
		return nil
	}
	log.FromContext(ctx).V(1).Info("Letting the credentials secret go: no pool uses it", "secret", name)
	controllerutil.RemoveFinalizer(s, v1alpha1.CredentialsFinalizer)
	patch := controller.FinalizersPatch(s)
	if err := r.Client.Patch(ctx, s, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("letting credentials secret %s go: %w", key, err)
	}
	r.credentials.mu.Lock()
	delete(r.credentials.checked, key)
	r.credentials.mu.Unlock()
	return nil
}

// releaseCredentials lets go of the Secrets a drained pool held.
func (r *Reconciler) releaseCredentials(ctx context.Context, pool *v1alpha1.RunnerPool) error {
	names := []string{pool.Spec.GitHub.CredentialsSecretRef.Name}
	if held := pool.Annotations[v1alpha1.AnnotationCredentialsSecret]; held != names[0] {
		names = append(names, held)
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		if err := r.releaseSecret(ctx, pool, name); err != nil {
			return err
		}
	}
	return nil
}

// holdCredentials keeps the pool's credentials Secret from being deleted while the pool
// uses it (credentials.go). Contract: it never fails the pass — the pool works on, and
// only the Secret's protection waits: a write conflict is tried again after
// credentialsRetry, any other failure at the next reconcile.
func (r *Reconciler) holdCredentials(ctx context.Context, st *state) (reconcile.Result, error) {
	err := r.guardCredentials(ctx, st.pool)
	switch {
	case apierrors.IsConflict(err):
		// Someone else wrote the Secret or the pool meanwhile: an ordinary race, tried
		// again shortly.
		log.FromContext(ctx).V(1).Info("Holding the credentials secret: tried again shortly", "reason", err.Error())
		return reconcile.Result{RequeueAfter: credentialsRetry}, nil
	case err != nil && ctx.Err() == nil: // not the controller shutting down
		log.FromContext(ctx).Error(err, "Holding the credentials secret")
	}
	return reconcile.Result{}, nil
}
