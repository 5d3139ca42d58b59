package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// annotationTemplateHash on the runner's pod is the hash of the pool template it was
// made from (TemplateHash), for a restart that finds the pod before its status shows it.
const annotationTemplateHash = "gantry.dev/template-hash"

// EnvJITConfig is the variable the official runner image reads its JIT configuration from.
const EnvJITConfig = "ACTIONS_RUNNER_INPUT_JITCONFIG"

// ensurePod makes sure the runner has its pod, named like the Runner. Contract: at most
// one pod per Runner, ever: the deterministic name makes the API server refuse a
// duplicate, and a pod that existed (status.podName is set, or this process remembers
// making it: unwritten.go) and is gone — confirmed by an uncached read — fails the
// runner with PodDeleted instead of being recreated. So does a missing pod whose runner
// an earlier process registered: that process may have made it. Done when s.pod is set.
func (r *Reconciler) ensurePod(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	key := types.NamespacedName{Namespace: s.runner.Namespace, Name: s.runner.Name}
	unknown := r.podUnknown(s)
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) && (s.runner.Status.PodName != "" || unknown) {
		// Created before, or maybe: confirm it is really gone, not just missing from the
		// cache.
		err = r.APIReader.Get(ctx, key, pod)
	}
	switch {
	case err == nil:
		s.pod = pod
		if s.runner.Status.PodName == "" {
			// Made by an earlier pass whose record is not in this status.
			s.runner.Status.PodName = pod.Name
			if s.runner.Status.TemplateHash == "" {
				s.runner.Status.TemplateHash = pod.Annotations[annotationTemplateHash]
			}
			r.unwritten.rememberPod(s.runner, &s.runner.Status, r.Clock.Now())
		}
		podCreated(s)
		return reconcile.Result{}, true, nil
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, false, fmt.Errorf("reading runner pod: %w", err)
	}
	if s.runner.Status.PodName != "" || unknown {
		// The cache may be behind our own status write: a runner failed a moment ago
		// deleted its pod itself. Decide on the stored Runner, not the cached one.
		fresh := &v1alpha1.Runner{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.runner.Namespace, Name: s.runner.Name}, fresh); err != nil {
			return reconcile.Result{}, false, ctrl.IgnoreNotFound(err)
		}
		if fresh.Status.Phase == v1alpha1.RunnerFailed || fresh.Status.Phase == v1alpha1.RunnerSucceeded || !fresh.DeletionTimestamp.IsZero() {
			s.runner, s.before = fresh, fresh.DeepCopy()
			return reconcile.Result{RequeueAfter: time.Second}, false, nil
		}
		if s.runner.Status.Job != nil {
			if reason, msg := r.vanishedUnder(ctx, s); reason != "" {
				// Its node was deleted under it, or it was evicted (killed.go).
				return r.fail(ctx, s, reason, msg)
			}
			// The job ran and the pod is gone: nothing is lost, the runner is done.
			s.runner.Status.Phase = v1alpha1.RunnerSucceeded
			return r.complete(ctx, s)
		}
		if s.runner.Status.PodName == "" {
			return r.fail(ctx, s, v1alpha1.ReasonPodDeleted, "the runner's pod is not there, and whether it ever ran cannot be told: "+
				"the controller restarted after registering the runner and before recording its pod. It is not given a second pod; the pool replaces it")
		}
		return r.fail(ctx, s, v1alpha1.ReasonPodDeleted, "the runner's pod was deleted before the runner ran a job")
	}

	pod = buildPod(s.runner, s.pool)
	hash := PoolTemplateHash(s.pool)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[annotationTemplateHash] = hash
	if err := controllerutil.SetControllerReference(s.runner, pod, r.Client.Scheme()); err != nil {
		return reconcile.Result{}, false, err
	}
	log.FromContext(ctx).V(1).Info("Creating runner pod", "pod", pod.Name)
	// The name is the Runner's, so the API server itself refuses a second pod: a create
	// on a stale cache fails with AlreadyExists and nothing is duplicated.
	if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			// Refused, not failed: a quota, a LimitRange or an admission policy says no
			// until someone changes it. Say so (the pool turns Degraded) and ask again
			// at a steady pace rather than with a backoff that grows to many minutes.
			meta.SetStatusCondition(&s.runner.Status.Conditions, metav1.Condition{
				Type: ConditionPodRefused, Status: metav1.ConditionTrue, Reason: "Refused",
				Message: err.Error(), ObservedGeneration: s.runner.Generation,
			})
			s.runner.Status.Message = "the API server refuses the runner pod: " + err.Error()
			return reconcile.Result{RequeueAfter: podRefusedRetry}, false, nil
		}
		return reconcile.Result{}, false, fmt.Errorf("creating runner pod: %w", err)
	}
	s.runner.Status.PodName = pod.Name
	s.runner.Status.TemplateHash = hash
	r.unwritten.rememberPod(s.runner, &s.runner.Status, r.Clock.Now())
	podCreated(s)
	// The pod watch brings the runner back when the pod changes.
	return reconcile.Result{}, false, nil
}

// podCreated clears what a refused pod left in the runner's status.
func podCreated(s *scope) {
	if meta.FindStatusCondition(s.runner.Status.Conditions, ConditionPodRefused) == nil {
		return
	}
	meta.RemoveStatusCondition(&s.runner.Status.Conditions, ConditionPodRefused)
	if strings.HasPrefix(s.runner.Status.Message, "the API server refuses the runner pod") {
		s.runner.Status.Message = ""
	}
}

// buildPod is the runner's pod: the pool's template, the Runner's name and labels, and
// the runner container reading its JIT configuration from the Runner's Secret.
func buildPod(runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) *corev1.Pod {
	tmpl := pool.Spec.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name = runner.Name
	pod.Namespace = runner.Namespace
	pod.GenerateName = ""
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	pod.Labels[v1alpha1.LabelPool] = pool.Name
	pod.Labels[v1alpha1.LabelRunner] = runner.Name
	// One job, then the pod is done: never restart the runner in place.
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	// The runner registers the OS and architecture labels: run it where they are true.
	pool.PinPlatform(&pod.Spec)
	// Each cache the containers mount by name: the volume the runner claimed, or an
	// emptyDir when it starts without one (cache.go).
	pod.Spec.Volumes = append(pod.Spec.Volumes, cacheVolumes(runner, pool)...)
	applySecurityDefaults(&pod.Spec)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != v1alpha1.RunnerContainerName {
			continue
		}
		if pool.Spec.RegistrationMode == v1alpha1.RegistrationModeRegistrationToken {
			c.Env = append(c.Env, tokenEnv(runner, pool)...)
			continue
		}
		c.Env = append(c.Env, secretEnv(EnvJITConfig, runner.Name, JITConfigKey))
	}
	applyContainerMode(pod, runner, pool) // containermode.go
	return pod
}

// RunnerUID is the user the official runner image (ghcr.io/actions/actions-runner)
// runs as: "runner", uid 1001. Pods get it by default because the kubelet can only
// verify runAsNonRoot for a numeric user, and the image names its user.
const RunnerUID = 1001

// applySecurityDefaults is the least privilege a runner pod gets by default, field by
// field; docs/security.md says why and which template field turns each back on.
//
//   - automountServiceAccountToken: false, unless the template sets it. Job code runs
//     in the pod: a mounted token would let it call the Kubernetes API as the pod's
//     ServiceAccount. A template that needs the token (IRSA, Workload Identity) sets
//     automountServiceAccountToken: true.
//   - enableServiceLinks: false, unless the template sets it: no variables naming every
//     Service of the namespace in the job's environment.
//   - A template that says nothing about security gets the restricted Pod Security
//     profile: not root (uid RunnerUID), no privilege escalation, no capabilities, the
//     runtime's default seccomp profile. A template that sets any securityContext — the
//     pod's, or any container's or init container's, as a docker-in-docker sidecar must
//     (privileged: true) — has taken charge of its security and is left exactly as
//     written: defaults mixed into it would break it (a pod-wide runAsNonRoot stops a
//     root sidecar from starting). A Windows pod (spec.os.name: windows) gets none of
//     these Linux settings: the API server refuses seccomp, capabilities, uids and
//     allowPrivilegeEscalation on Windows pods.
//
// User namespaces (hostUsers: false) stay the template's choice: they need a recent
// cluster with the feature on.
func applySecurityDefaults(spec *corev1.PodSpec) {
	if spec.AutomountServiceAccountToken == nil {
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(false)
	}
	if spec.OS != nil && spec.OS.Name == corev1.Windows {
		return
	}
	if spec.SecurityContext != nil {
		return
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if cs[i].SecurityContext != nil {
				return
			}
		}
	}
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](RunnerUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			cs[i].SecurityContext = &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}
		}
	}
}

// Environment of the runner container in registrationMode RegistrationToken: what
// config.sh needs to register the runner itself. Only the token comes from the Secret.
const (
	EnvRunnerToken     = "GANTRY_RUNNER_TOKEN"
	EnvRunnerURL       = "GANTRY_RUNNER_URL"
	EnvRunnerName      = "GANTRY_RUNNER_NAME"
	EnvRunnerLabels    = "GANTRY_RUNNER_LABELS"
	EnvRunnerGroup     = "GANTRY_RUNNER_GROUP"
	EnvRunnerEphemeral = "GANTRY_RUNNER_EPHEMERAL"
)

func tokenEnv(runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) []corev1.EnvVar {
	return []corev1.EnvVar{
		secretEnv(EnvRunnerToken, runner.Name, RegistrationTokenKey),
		{Name: EnvRunnerURL, Value: strings.TrimRight(pool.Spec.GitHub.URL, "/")},
		{Name: EnvRunnerName, Value: runner.Name},
		{Name: EnvRunnerLabels, Value: strings.Join(pool.RunnerLabels(), ",")},
		{Name: EnvRunnerGroup, Value: pool.Spec.GitHub.RunnerGroup},
		{Name: EnvRunnerEphemeral, Value: "true"},
	}
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret},
		Key:                  key,
	}}}
}
