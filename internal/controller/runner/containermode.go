package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Environment of the runner container in Kubernetes mode: what GitHub's Kubernetes
// container hooks read (actions/runner-container-hooks, packages/k8s and k8s-novolume).
const (
	EnvContainerHooks        = "ACTIONS_RUNNER_CONTAINER_HOOKS"
	EnvRunnerPodName         = "ACTIONS_RUNNER_POD_NAME"
	EnvKubernetesNamespace   = "ACTIONS_RUNNER_KUBERNETES_NAMESPACE"
	EnvContainerHookTemplate = "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE"
	EnvPrepareJobTimeout     = "ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS"
	EnvRequireJobContainer   = "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER"
	EnvUseKubeScheduler      = "ACTIONS_RUNNER_USE_KUBE_SCHEDULER"
)

// Volumes Kubernetes mode adds to the runner pod.
const (
	// hookTokenVolume is the ServiceAccount token the hook calls the API server with,
	// mounted where in-cluster clients look for it, in the runner container only.
	hookTokenVolume = "gantry-container-hook-token"
	// HookTokenExpirationSeconds is the token's lifetime; the kubelet renews it at 80%.
	// The API server's minimum is 600.
	HookTokenExpirationSeconds = 3600
	// hookTemplateVolume is the pool's ConfigMap holding the hook's workflow-pod template.
	hookTemplateVolume = "gantry-container-hook-template"
	// HookTemplateDir and HookTemplateKey: the template file is HookTemplateDir/HookTemplateKey.
	HookTemplateDir = "/etc/gantry/container-hook"
	HookTemplateKey = "workflow-pod.yaml"
	// workVolumeName is the runner's work directory volume (workVolume type Ephemeral).
	workVolumeName = "gantry-work"
	// ServiceAccountTokenDir is where in-cluster clients read the token, CA and namespace.
	ServiceAccountTokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// applyContainerMode makes a runner pod of a Kubernetes-mode pool able to run the hook:
// the ServiceAccount of the runner's hook (hookOf: its slot's, or with isolation Pool
// the pool's) and a projected token of it, valid HookTokenExpirationSeconds,
// in the runner container alone (no other container, no other pool, gets a token); the
// hook's environment; the hook template from the pool's ConfigMap; and the work volume.
// A template's automountServiceAccountToken is turned off: the projected token takes the
// place of the automatic one, at the same path. Pools in other modes are left alone.
func applyContainerMode(pod *corev1.Pod, runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) {
	cm := pool.Spec.ContainerMode
	if !cm.IsKubernetes() {
		return
	}
	hook := hookOf(runner, pool)
	pod.Spec.ServiceAccountName = hook.ServiceAccount
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: hookTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o444),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](HookTokenExpirationSeconds)}},
				{ConfigMap: &corev1.ConfigMapProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
				}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
					Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
				}}}},
			},
		}}},
		corev1.Volume{Name: hookTemplateVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: v1alpha1.ContainerHookServiceAccountName(pool.Name)},
		}}},
	)
	wv := cm.WorkVolume
	var work *corev1.VolumeMount
	switch {
	case wv != nil && wv.Type == v1alpha1.WorkVolumeEphemeral && wv.Ephemeral != nil:
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: workVolumeName, VolumeSource: corev1.VolumeSource{
			Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: wv.Ephemeral.StorageClassName,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: wv.Ephemeral.Size,
					}},
				},
			}},
		}})
		work = &corev1.VolumeMount{Name: workVolumeName, MountPath: wv.MountPathOrDefault()}
	case wv != nil && wv.Type == v1alpha1.WorkVolumeCache:
		// cacheVolumes added the pod volume named after the cache.
		work = &corev1.VolumeMount{Name: wv.Cache, MountPath: wv.MountPathOrDefault()}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != v1alpha1.RunnerContainerName {
			continue
		}
		c.Env = append(c.Env, HookEnv(cm, hook.Namespace)...)
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: hookTokenVolume, MountPath: ServiceAccountTokenDir, ReadOnly: true},
			corev1.VolumeMount{Name: hookTemplateVolume, MountPath: HookTemplateDir, ReadOnly: true},
		)
		if work != nil {
			c.VolumeMounts = append(c.VolumeMounts, *work)
		}
	}
}

// hookOf is where the runner's hook works: status.containerHook (claimHookSlot), or,
// for a runner of a pool with isolation Pool that has none recorded, the pool's
// ServiceAccount and containerMode.namespace.
func hookOf(runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) v1alpha1.RunnerContainerHook {
	if runner != nil && runner.Status.ContainerHook != nil {
		return *runner.Status.ContainerHook
	}
	return v1alpha1.RunnerContainerHook{
		Namespace:      pool.Spec.ContainerMode.Namespace,
		ServiceAccount: v1alpha1.ContainerHookServiceAccountName(pool.Name),
	}
}

// HookEnv is the runner container's environment for the hook of a Kubernetes-mode pool
// working in namespace.
func HookEnv(cm *v1alpha1.ContainerModeSpec, namespace string) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: EnvContainerHooks, Value: cm.HookPathOrDefault()},
		{Name: EnvRunnerPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{Name: EnvKubernetesNamespace, Value: namespace},
		{Name: EnvContainerHookTemplate, Value: HookTemplateDir + "/" + HookTemplateKey},
		{Name: EnvPrepareJobTimeout, Value: strconv.Itoa(int(cm.PrepareJobTimeoutOrDefault().Seconds()))},
		{Name: EnvRequireJobContainer, Value: strconv.FormatBool(cm.RequireJobContainerOrDefault())},
	}
	if cm.UseKubeScheduler {
		env = append(env, corev1.EnvVar{Name: EnvUseKubeScheduler, Value: "true"})
	}
	return env
}

// AnchorImage is the image named by an anchor pod, which never runs it: its node
// selector matches no node, so the kubelet of the node it is bound to refuses it at
// admission, before pulling anything.
const AnchorImage = "registry.k8s.io/pause:3.10"

// anchorNodeSelector is the anchor's node selector, which no node carries.
var anchorNodeSelector = map[string]string{v1alpha1.LabelWorkflowPod: "anchor-never-runs"}

// containerHooks is the phase of a Kubernetes-mode runner once its pod exists. Contract:
//
//   - Once the runner pod is bound to a node, its anchor exists in containerMode.namespace:
//     a pod of the runner pod's name, bound to the same node, that never runs. The hook
//     reads "its runner pod" (ACTIONS_RUNNER_POD_NAME) in the namespace it works in, to
//     place the workflow pod on the runner's node; the real runner pod stays in the
//     pool's namespace, beside the JIT configurations the hook's token cannot read there.
//   - The workflow pod is watched: Running sets the Runner's WorkflowPodReady condition
//     True; an invalid image, an image pull failing past recovery.imagePullGracePeriod,
//     or a pod unschedulable past recovery.pendingTimeout (the runner pod's own stuck
//     detection, diagnose) sets it False with a Warning event naming the image or the
//     scheduler's message, and deletes the WORKFLOW pod — not the runner pod. The hook's
//     prepare_job, polling that pod, finds it gone and fails at once; the runner reports
//     the job failed with the hook's message and exits: the job ends within seconds,
//     not after the hook's prepare-job timeout nor GitHub's runner-lost timeout.
//   - Backstop: a runner still not ended backstopAfter that deletion (its
//     hook did not give up: not GitHub's) is failed as any stuck runner, its pod
//     deleted.
//   - The anchor, workflow pods and hook Secrets go when the runner fails (fail) or is
//     removed (finalize), whatever ended it: removeHookObjects.
//
// Done unless it failed the runner. Other pools: done at once.
func (r *Reconciler) containerHooks(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	cm := s.pool.Spec.ContainerMode
	if !cm.IsKubernetes() || s.pod == nil || s.pod.Spec.NodeName == "" {
		return reconcile.Result{}, true, nil
	}
	if s.pod.Status.Phase == corev1.PodSucceeded || s.pod.Status.Phase == corev1.PodFailed || s.pod.DeletionTimestamp != nil {
		// Ended: observe completes or fails the runner, and that removes the hook's objects.
		return reconcile.Result{}, true, nil
	}
	hook := hookOfPod(s.pod)
	if hook == nil {
		return reconcile.Result{}, true, nil // made before the pool took Kubernetes mode
	}
	if err := r.ensureAnchor(ctx, s, hook.Namespace); err != nil {
		return reconcile.Result{}, false, err
	}
	wf := &corev1.Pod{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: hook.Namespace, Name: v1alpha1.WorkflowPodName(s.pod.Name)}, wf)
	if apierrors.IsNotFound(err) || (err == nil && wf.DeletionTimestamp != nil) {
		return r.workflowPodBackstop(ctx, s)
	}
	if err != nil {
		return reconcile.Result{}, false, fmt.Errorf("reading the workflow pod: %w", err)
	}
	return r.observeWorkflowPod(ctx, s, wf)
}

// workflowPodGrace is how long after the hook's own prepare-job timeout a runner whose
// workflow pod Gantry deleted may take to end before Gantry ends it.
const workflowPodGrace = 30 * time.Second

// backstopAfter is the time after Gantry deleted a runner's workflow pod that
// could not start by which the runner must have ended: the hook's prepare-job timeout
// (any hook gives up by then, having started waiting before the deletion) plus
// workflowPodGrace. The official hook ends within seconds of the deletion.
func backstopAfter(cm *v1alpha1.ContainerModeSpec) time.Duration {
	return cm.PrepareJobTimeoutOrDefault() + workflowPodGrace
}

// isWorkflowPodFailure reports whether reason is one for which containerHooks deletes
// a workflow pod that cannot start.
func isWorkflowPodFailure(reason string) bool {
	switch reason {
	case v1alpha1.ReasonWorkflowPodInvalidImage, v1alpha1.ReasonWorkflowPodImagePullFailed, v1alpha1.ReasonWorkflowPodUnschedulable:
		return true
	}
	return false
}

// workflowPodBackstop is containerHooks with no workflow pod, or one going: after
// Gantry deleted a workflow pod that could not start (WorkflowPodReady False with a
// workflow-pod reason), the runner is expected to end on its own; once
// workflowPodBackstop has passed since that deletion, it is failed with that reason.
func (r *Reconciler) workflowPodBackstop(ctx context.Context, s *scope) (reconcile.Result, bool, error) {
	c := meta.FindStatusCondition(s.runner.Status.Conditions, v1alpha1.ConditionWorkflowPodReady)
	if c == nil || c.Status != metav1.ConditionFalse || !isWorkflowPodFailure(c.Reason) {
		return reconcile.Result{}, true, nil
	}
	backstop := backstopAfter(s.pool.Spec.ContainerMode)
	if left := backstop - r.Clock.Since(c.LastTransitionTime.Time); left > 0 {
		return reconcile.Result{RequeueAfter: left}, true, nil
	}
	return r.fail(ctx, s, c.Reason, fmt.Sprintf(
		"%s; the runner had not ended %s after Gantry deleted that workflow pod, so its runner pod is deleted",
		c.Message, humanDuration(backstop)))
}

// observeWorkflowPod is containerHooks' look at the runner's workflow pod.
func (r *Reconciler) observeWorkflowPod(ctx context.Context, s *scope, wf *corev1.Pod) (reconcile.Result, bool, error) {
	cond := metav1.Condition{Type: v1alpha1.ConditionWorkflowPodReady, ObservedGeneration: s.runner.Generation}
	switch wf.Status.Phase {
	case corev1.PodRunning:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, v1alpha1.ReasonWorkflowPodRunning, "the workflow pod "+wf.Name+" runs"
		meta.SetStatusCondition(&s.runner.Status.Conditions, cond)
		return reconcile.Result{}, true, nil
	case corev1.PodPending:
	default:
		return reconcile.Result{}, true, nil
	}
	v := diagnose(wf, s.pool.Spec.Recovery, r.Clock.Now(), false)
	reason, message := workflowPodVerdict(wf, v, s.pool.Spec.Recovery)
	if reason == "" {
		return reconcile.Result{RequeueAfter: v.wait}, true, nil
	}
	cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, message
	meta.SetStatusCondition(&s.runner.Status.Conditions, cond)
	log.FromContext(ctx).Info("Deleting the workflow pod that cannot start", "pod", klog.KObj(wf), "reason", reason, "message", message)
	if err := r.Client.Delete(ctx, wf, ctrl.GracePeriodSeconds(0), ctrl.Preconditions{UID: &wf.UID}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Gone already, or a new pod of that name: the next look decides.
			return reconcile.Result{RequeueAfter: time.Second}, true, nil
		}
		return reconcile.Result{}, false, fmt.Errorf("deleting the workflow pod %s/%s: %w", wf.Namespace, wf.Name, err)
	}
	r.Events.Eventf(s.runner, wf, corev1.EventTypeWarning, reason, "DeleteWorkflowPod",
		"%s; the workflow pod is deleted, so the hook fails the job at once", message)
	return reconcile.Result{RequeueAfter: backstopAfter(s.pool.Spec.ContainerMode)}, true, nil
}

// workflowPodVerdict turns the runner pod's stuck-pod verdict on a workflow pod into
// the workflow pod's reason, with a message naming the image or the scheduler's word.
// Other verdicts (a pod slow to start, a container failing to start) are left to the
// hook's prepare-job timeout.
func workflowPodVerdict(wf *corev1.Pod, v verdict, rec v1alpha1.RecoverySpec) (string, string) {
	image := func(reasons ...string) (string, string, string) {
		for _, c := range podContainers(wf) {
			if w := c.status.State.Waiting; w != nil {
				for _, r := range reasons {
					if w.Reason == r {
						return c.status.Name, c.status.Image, w.Message
					}
				}
			}
		}
		return "", "", ""
	}
	switch v.reason {
	case v1alpha1.ReasonInvalidImageName:
		name, img, msg := image("InvalidImageName")
		return v1alpha1.ReasonWorkflowPodInvalidImage, fmt.Sprintf(
			"the workflow pod %s cannot start: the image %q of its container %q is not a valid image name%s; fix the job's container: or services: image",
			wf.Name, img, name, detail("", msg))
	case v1alpha1.ReasonImagePullFailed:
		name, img, msg := image("ErrImagePull", "ImagePullBackOff")
		return v1alpha1.ReasonWorkflowPodImagePullFailed, fmt.Sprintf(
			"the workflow pod %s cannot start: the image %q of its container %q could not be pulled for %s%s; check the image name, tag and registry credentials (container.credentials in the workflow)",
			wf.Name, img, name, humanDuration(rec.ImagePullGracePeriodOrDefault()), detail("", msg))
	case v1alpha1.ReasonUnschedulable:
		why := ""
		if c := podCondition(wf, corev1.PodScheduled); c != nil {
			why = c.Message
		}
		return v1alpha1.ReasonWorkflowPodUnschedulable, fmt.Sprintf(
			"the workflow pod %s could not be scheduled for %s%s; check containerMode.workflowPodTemplate (resources, nodeSelector, tolerations) against the runner's node",
			wf.Name, humanDuration(rec.PendingTimeoutOrDefault()), detail("", why))
	}
	return "", ""
}

// ensureAnchor creates the runner pod's anchor in namespace, unless this process made
// it (the runner is reconciled again before the cache shows the anchor) or the cache
// shows it (a create on a stale cache meets AlreadyExists, which is fine).
func (r *Reconciler) ensureAnchor(ctx context.Context, s *scope, namespace string) error {
	key := types.NamespacedName{Namespace: namespace, Name: s.pod.Name}
	if uid, ok := r.anchors.Load(key); ok && uid == s.pod.UID {
		return nil
	}
	existing := &corev1.Pod{}
	err := r.Client.Get(ctx, key, existing)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the runner's anchor pod: %w", err)
	}
	anchor := BuildAnchor(s.pod, s.pool, namespace)
	log.FromContext(ctx).V(1).Info("Creating the runner's anchor pod", "namespace", anchor.Namespace, "node", anchor.Spec.NodeName)
	if err := r.Client.Create(ctx, anchor); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the runner's anchor pod in %s: %w", anchor.Namespace, err)
	}
	r.anchors.Store(key, s.pod.UID)
	return nil
}

// BuildAnchor is the anchor of runnerPod, a runner pod of a Kubernetes-mode pool: a pod
// of the same name in namespace, where its hook works, bound to the same node, that never runs
// (its node selector matches no node: the kubelet refuses it at admission, so it holds
// no resources and pulls nothing), that no token of the hook may delete (it has no
// runner-pod label: the admission policy lets the hook delete only its own pods), and
// that carries nothing secret.
func BuildAnchor(runnerPod *corev1.Pod, pool *v1alpha1.RunnerPool, namespace string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      runnerPod.Name,
			Labels: map[string]string{
				v1alpha1.LabelManagedBy:     v1alpha1.ManagedByValue,
				v1alpha1.LabelPool:          pool.Name,
				v1alpha1.LabelPoolNamespace: pool.Namespace,
				v1alpha1.LabelRunner:        runnerPod.Name,
				v1alpha1.LabelWorkflowPod:   v1alpha1.ContainerHookAnchor,
			},
		},
		Spec: corev1.PodSpec{
			NodeName:                      runnerPod.Spec.NodeName,
			NodeSelector:                  anchorNodeSelector,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65535),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "anchor", Image: AnchorImage,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// removeHookObjects deletes what Kubernetes mode made for a runner in
// containerMode.namespace: its anchor, the pods the hook made (runner-pod label) and the
// hook's Secrets (deleted by that label: they are neither cached nor listed). The hook
// sets no owner reference, so nothing else would. Idempotent; pools in other modes:
// nothing. The namespace is the pool's, or, with the pool gone, that of the runner's
// anchor or workflow pods in the cache.
func (r *Reconciler) removeHookObjects(ctx context.Context, runner *v1alpha1.Runner, pool *v1alpha1.RunnerPool) error {
	var namespaces []string
	switch {
	case runner.Status.ContainerHook != nil:
		namespaces = append(namespaces, runner.Status.ContainerHook.Namespace)
	case pool != nil && pool.Spec.ContainerMode.IsKubernetes() && !pool.Spec.ContainerMode.IsolatesRunners():
		namespaces = append(namespaces, pool.Spec.ContainerMode.Namespace)
	case pool != nil && !pool.Spec.ContainerMode.IsKubernetes():
		return nil
	default:
		var anchors corev1.PodList
		if err := r.Client.List(ctx, &anchors, ctrl.MatchingLabels{
			v1alpha1.LabelPoolNamespace: runner.Namespace, v1alpha1.LabelRunner: runner.Name}); err != nil {
			return fmt.Errorf("listing the runner's anchor: %w", err)
		}
		for _, a := range anchors.Items {
			if a.Namespace != runner.Namespace {
				namespaces = append(namespaces, a.Namespace)
			}
		}
	}
	for _, ns := range namespaces {
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, ctrl.InNamespace(ns), ctrl.MatchingLabels{v1alpha1.LabelHookRunnerPod: runner.Name}); err != nil {
			return fmt.Errorf("listing the runner's workflow pods: %w", err)
		}
		r.anchors.Delete(types.NamespacedName{Namespace: ns, Name: runner.Name})
		toDelete := append(pods.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runner.Name}})
		for i := range toDelete {
			p := &toDelete[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			if err := r.Client.Delete(ctx, p, ctrl.GracePeriodSeconds(0)); ctrl.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the runner's pod %s/%s: %w", ns, p.Name, err)
			}
		}
		if err := r.Client.DeleteAllOf(ctx, &corev1.Secret{}, ctrl.InNamespace(ns),
			ctrl.MatchingLabels{v1alpha1.LabelHookRunnerPod: runner.Name}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the hook's secrets: %w", err)
		}
	}
	return nil
}

// hookPodRunner maps an anchor or a workflow pod to its Runner: the pool's namespace is
// on both (gantry.dev/pool-namespace), the runner's name is the anchor's gantry.dev/runner
// label and the workflow pod's runner-pod label (the runner pod is named after its Runner).
func hookPodRunner(_ context.Context, o ctrl.Object) []reconcile.Request {
	l := o.GetLabels()
	ns := l[v1alpha1.LabelPoolNamespace]
	name := l[v1alpha1.LabelHookRunnerPod]
	if name == "" && l[v1alpha1.LabelWorkflowPod] == v1alpha1.ContainerHookAnchor {
		name = l[v1alpha1.LabelRunner]
	}
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// poolOf is the runner's pool as the cache holds it, nil when it is gone.
func (r *Reconciler) poolOf(ctx context.Context, runner *v1alpha1.Runner) *v1alpha1.RunnerPool {
	pool := &v1alpha1.RunnerPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: runner.Namespace, Name: runner.Spec.PoolName}, pool); err != nil {
		return nil
	}
	return pool
}

// poolPodHash is TemplateHash of the pool's template, and in Kubernetes mode of its
// containerMode too, which shapes the runner pod as much (its environment, token and
// work volume): a changed containerMode makes the pool's idle and pending runners
// outdated, as a changed template does. Pools in other modes keep TemplateHash of their
// template alone, so an upgrade outdates none of their runners.
func poolPodHash(pool *v1alpha1.RunnerPool) string {
	h := TemplateHash(pool.Spec.Template)
	if !pool.Spec.ContainerMode.IsKubernetes() || h == "" {
		return h
	}
	b, err := json.Marshal(pool.Spec.ContainerMode)
	if err != nil {
		return h
	}
	sum := sha256.Sum256(append([]byte(h), b...))
	return hex.EncodeToString(sum[:8])
}
