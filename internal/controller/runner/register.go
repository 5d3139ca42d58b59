package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/controller/source"
	"github.com/gantry-dev/gantry/internal/github"
)

// JITConfigKey is the key of the runner's Secret that holds its JIT configuration; the
// runner container gets it as ACTIONS_RUNNER_INPUT_JITCONFIG.
const JITConfigKey = "jitconfig"

// RegistrationTokenKey is the key of the runner's Secret that holds the pool's shared
// registration token (registrationMode RegistrationToken); the runner container gets
// it as GANTRY_RUNNER_TOKEN.
const RegistrationTokenKey = "registration-token"

// annotationRunnerID on the runner's Secret records the GitHub runner id registered with
// it, so a restart that lost the status write recovers the id without another call.
const annotationRunnerID = "gantry.dev/github-runner-id"

// register gives the runner its GitHub registration: a JIT configuration kept only in a
// Secret the Runner owns (or the pool's registration token, with registrationMode
// RegistrationToken), from the pool's demand source. Contract: it registers at most once per Runner — a
// registration this process made is remembered until the status shows it
// (unwritten.go), the Secret is looked up uncached before GitHub is called (unless this
// process created the Runner: RunnerBirths), and a duplicate name (a registration whose
// Secret was never written) is removed from GitHub and registered again. Done when the
// working status shows the registration.
func (r *Reconciler) register(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	key := runnerKey(s.runner)
	if s.before.Status.GitHubRunnerID != 0 || s.before.Status.RegisteredAt != nil {
		r.Births.Forget(key)
	}
	if s.runner.Status.GitHubRunnerID != 0 || s.runner.Status.RegisteredAt != nil {
		return reconcile.Result{}, true, nil
	}
	if s.runner.Status.Phase == "" {
		s.runner.Status.Phase = v1alpha1.RunnerPending
	}
	// A Secret already there means an earlier process registered the runner and did not
	// record it (a restart): recover the id, never register twice. A Runner this process
	// created and has not registered has none: no other process can have registered it
	// (RunnerBirths), so it is not looked up.
	if !r.Births.Ours(key) {
		if found, err := r.recoverRegistration(ctx, s); found || err != nil {
			return reconcile.Result{}, found, err
		}
	}

	src := r.Sources.For(s.pool)
	reg, err := src.Register(ctx, s.pool, s.runner.Name)
	if github.IsAlreadyExists(err) {
		// Registered before. If its Secret was written after all (a create that failed
		// on the way back), recover from it; if not, the JIT configuration is lost:
		// remove that registration and register again on the next pass.
		if found, err := r.recoverRegistration(ctx, s); found || err != nil {
			return reconcile.Result{}, found, err
		}
		if err := src.RemoveStale(ctx, s.pool, s.runner.Name); err != nil {
			return r.waitOn(s, err)
		}
		return reconcile.Result{RequeueAfter: time.Second}, false, nil
	}
	if err != nil {
		return r.waitOn(s, err)
	}
	data, annotations := map[string][]byte{JITConfigKey: []byte(reg.JITConfig)}, map[string]string{annotationRunnerID: strconv.FormatInt(reg.RunnerID, 10)}
	if reg.Token != "" {
		// The runner registers itself with the pool's token (config.sh --ephemeral); its
		// GitHub id is learned from the in_progress webhook, or looked up by name when it
		// is needed earlier.
		data, annotations = map[string][]byte{RegistrationTokenKey: []byte(reg.Token)}, nil
	}
	if err := r.createSecret(ctx, s, data, annotations); err != nil {
		return reconcile.Result{}, false, err
	}
	r.setRegistered(s, reg.RunnerID, false)
	s.runner.Status.Message = ""
	return reconcile.Result{}, true, nil
}

// createSecret creates the Runner's Secret, owned by the Runner and labeled for
// Gantry's cache. An existing one (a retried reconcile) is fine.
func (r *Reconciler) createSecret(ctx context.Context, s *scope, data map[string][]byte, annotations map[string]string) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.runner.Namespace,
			Name:      s.runner.Name,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
				v1alpha1.LabelPool:      s.pool.Name,
				v1alpha1.LabelRunner:    s.runner.Name,
			},
			Annotations: annotations,
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	if err := controllerutil.SetControllerReference(s.runner, secret, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating runner secret: %w", err)
	}
	return nil
}

// recoverRegistration looks up the Runner's Secret uncached and, when it exists,
// records the registration it holds: found is true. No Secret is found false, nil.
func (r *Reconciler) recoverRegistration(ctx context.Context, s *scope) (found bool, err error) {
	found, id, err := r.readRegistration(ctx, s.runner)
	if found {
		// Made by another process unless this one created the Runner: its pod too, then.
		r.setRegistered(s, id, !r.Births.Ours(runnerKey(s.runner)))
	}
	return found, err
}

// readRegistration reads the Runner's Secret uncached: found is whether it exists, id
// the GitHub runner id it was registered with (0: the runner registers itself with the
// pool's token).
func (r *Reconciler) readRegistration(ctx context.Context, rn *v1alpha1.Runner) (found bool, id int64, err error) {
	var existing corev1.Secret
	err = r.APIReader.Get(ctx, runnerKey(rn), &existing)
	if apierrors.IsNotFound(err) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("reading runner secret: %w", err)
	}
	if _, token := existing.Data[RegistrationTokenKey]; token {
		return true, 0, nil // the runner registers itself; its id comes later
	}
	id, perr := strconv.ParseInt(existing.Annotations[annotationRunnerID], 10, 64)
	if perr != nil || id == 0 {
		return false, 0, fmt.Errorf("runner secret %s has no %s annotation", existing.Name, annotationRunnerID)
	}
	return true, id, nil
}

// forgetRegistration lets go of what this process remembers of a Runner: it is gone.
func (r *Reconciler) forgetRegistration(key types.NamespacedName) {
	r.unwritten.forget(key)
	r.Births.Forget(key)
	r.unregistered.forget(key)
	r.hookPods.forget(key)
}

// setRegistered records the registration in the working status and remembers it until
// the stored status shows it; id is 0 when the runner registers itself. recovered: the
// registration was read back, not made by this process.
func (r *Reconciler) setRegistered(s *scope, id int64, recovered bool) {
	now := metav1.NewTime(r.Clock.Now())
	s.runner.Status.GitHubRunnerID = id
	s.runner.Status.GitHubRunnerName = s.runner.Name
	if s.runner.Status.RegisteredAt == nil {
		s.runner.Status.RegisteredAt = &now
	}
	if s.runner.Status.Phase == "" {
		s.runner.Status.Phase = v1alpha1.RunnerPending
	}
	r.unwritten.rememberRegistration(s.runner, &s.runner.Status, recovered, r.Clock.Now())
}

// waitOn turns an error from GitHub or the pool's configuration into a wait: the demand
// source not ready yet (*source.WaitError) waits as long as it says; a
// configuration problem (including credentials GitHub refuses and a runner group or
// scope GitHub does not know) is written to status.message and looked at again later;
// a rate limit waits exactly as long as GitHub asks; anything else is retried with the
// controller's backoff.
func (r *Reconciler) waitOn(s *scope, err error) (reconcile.Result, bool, error) {
	var cfg *controller.ConfigError
	var wait *source.WaitError
	switch {
	case errors.As(err, &wait):
		s.runner.Status.Message = wait.Message
		return reconcile.Result{RequeueAfter: wait.After}, false, nil
	case errors.As(err, &cfg):
		s.runner.Status.Message = cfg.Message
		return reconcile.Result{RequeueAfter: configRetry}, false, nil
	case github.IsRateLimited(err):
		s.runner.Status.Message = "waiting for GitHub's rate limit to reset"
		return reconcile.Result{RequeueAfter: github.RetryAfter(err)}, false, nil
	case github.IsUnauthorized(err):
		s.runner.Status.Message = "GitHub refused the pool's credentials: " + err.Error()
		return reconcile.Result{RequeueAfter: configRetry}, false, nil
	case github.IsNotFound(err):
		// A runner group that does not exist, or a scope the credentials cannot see:
		// only the pool's owner can fix it, so say what is missing and look again later.
		s.runner.Status.Message = "check the pool's github.url and github.runnerGroup: " + err.Error()
		return reconcile.Result{RequeueAfter: configRetry}, false, nil
	}
	return reconcile.Result{}, false, err
}
