package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/internal/hookrelease"
)

// HookPermission is one access the Kubernetes hook asks for: a verb on a resource
// (and subresource) of the core ("") or batch group, in the hook's namespace.
type HookPermission struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
}

// HookPermissions are the accesses the hook of the release runner images ship — the
// no-volume hook, /home/runner/k8s-novolume — checks with SelfSubjectAccessReview before
// every command (hookrelease.Permissions, one per verb, in the hook's order), and so the
// verbs a runner's Role must grant for a container job to run. The simulated hook checks
// exactly these; exec is asked per exec by SelfSubjectAccessReview too (kwok has no
// kubelet to exec into).
var HookPermissions = func() []HookPermission {
	var out []HookPermission
	for _, p := range hookrelease.Permissions {
		for _, v := range p.Verbs {
			out = append(out, HookPermission{Verb: v, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource})
		}
	}
	return out
}()

// VolumeHookPermissions are those of the volume hook of v0.7.0 (the image's
// /home/runner/k8s), which runs container steps as batch Jobs: HookPermissions and jobs
// get/list/create/delete (v0.7.0 packages/k8s/src/k8s/index.ts requiredPermissions).
var VolumeHookPermissions = slices.Concat(HookPermissions[:9], []HookPermission{
	{"get", "batch", "jobs", ""}, {"list", "batch", "jobs", ""}, {"create", "batch", "jobs", ""}, {"delete", "batch", "jobs", ""},
}, HookPermissions[9:])

// DefaultRunnerImage is the image of the no-volume hook's fs-init container when
// ACTIONS_RUNNER_IMAGE is unset.
const DefaultRunnerImage = hookrelease.DefaultRunnerImage

// Names the hook gives what it creates.
const (
	// LabelRunnerPod labels the hook's pods and Secrets with the runner pod's name.
	LabelRunnerPod = hookrelease.LabelRunnerPod
	// JobContainerName is the workflow pod's job container.
	JobContainerName = hookrelease.JobContainer
	// containerExtensionPrefix marks a template container merged into the hook's
	// container of that name ("$job").
	containerExtensionPrefix = hookrelease.ExtensionPrefix
)

// WorkflowPodName is the workflow pod the hook creates for runner pod runnerPod.
func WorkflowPodName(runnerPod string) string { return hookrelease.WorkflowPodName(runnerPod) }

// errHook is a hook command that failed: the runner fails the job with its message.
type errHook struct{ msg string }

func (e *errHook) Error() string { return e.msg }

func hookFailed(format string, args ...any) error { return &errHook{msg: fmt.Sprintf(format, args...)} }

// hook is the official Kubernetes hook as one runner runs it: every call made over
// the API server with the runner pod's own ServiceAccount token.
type hook struct {
	env    hookEnv
	pod    *corev1.Pod // the runner pod
	kube   kubernetes.Interface
	admin  kubernetes.Interface // the kubelet's reads: the template's ConfigMap
	writes *atomic.Int64
}

// newHook returns the hook of runner pod p: a client authenticated with a token of
// the pod's ServiceAccount bound to the pod — what the kubelet mounts in the runner
// container (the audience and lifetime of its projected token, else the API server's
// audience and an hour) — and counting its writes.
func (a *Agents) newHook(ctx context.Context, p *corev1.Pod, env hookEnv) (*hook, error) {
	src := mountedToken(p)
	if src == nil {
		return nil, hookFailed("the runner container mounts no ServiceAccount token: the hook cannot reach the API server")
	}
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(ptr.Deref(src.ExpirationSeconds, 3607)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tok, err := a.kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting the token of ServiceAccount %s for pod %s: %w", sa, p.Name, err)
	}
	cfg := rest.AnonymousClientConfig(a.cfg)
	cfg.BearerToken = tok.Status.Token
	cfg.QPS, cfg.Burst = 100, 200
	writes := &atomic.Int64{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countWrites{next: rt, n: writes} })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &hook{env: env, pod: p, kube: kube, admin: a.kube, writes: writes}, nil
}

// mountedToken is the ServiceAccount token projected into the runner container: a
// projected volume's serviceAccountToken source (the admission-made
// kube-api-access-… volume, or one the controller set) that the container mounts.
func mountedToken(p *corev1.Pod) *corev1.ServiceAccountTokenProjection {
	mounted := map[string]bool{}
	for _, c := range runnerContainers(p) {
		for _, e := range c.Env {
			if e.Name == EnvContainerHooks {
				for _, m := range c.VolumeMounts {
					mounted[m.Name] = true
				}
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil || !mounted[v.Name] {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return s.ServiceAccountToken
			}
		}
	}
	return nil
}

// countWrites counts the requests that write (anything but GET).
type countWrites struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c *countWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

// checkPermissions is the hook's first act for every command: one
// SelfSubjectAccessReview per HookPermission, all at once; any refused fails the
// command with the hook's message.
func (h *hook) checkPermissions(ctx context.Context) error {
	perms := h.permissions()
	allowed := make([]bool, len(perms))
	errs := make([]error, len(perms))
	var wg sync.WaitGroup
	for i, perm := range perms {
		wg.Go(func() {
			allowed[i], errs[i] = h.can(ctx, perm, "")
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, ok := range allowed {
		if !ok {
			b, _ := json.Marshal(perms)
			return hookFailed("The Service account needs the following permissions %s on the pod resource in the '%s' namespace. Please contact your self hosted runner administrator.", b, h.env.namespace)
		}
	}
	return nil
}

// permissions are the variant's HookPermissions or VolumeHookPermissions.
func (h *hook) permissions() []HookPermission {
	if h.env.noVolume {
		return HookPermissions
	}
	return VolumeHookPermissions
}

// exec stands for one exec into the workflow pod's job container: kwok has no kubelet
// to exec into, so the hook asks the API server whether it may.
func (h *hook) exec(ctx context.Context, pod string) (bool, error) {
	return h.can(ctx, HookPermission{Verb: "create", Resource: "pods", Subresource: "exec"}, pod)
}

// can asks the API server whether the runner may do perm (on the object name, if set).
func (h *hook) can(ctx context.Context, perm HookPermission, name string) (bool, error) {
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: h.env.namespace, Verb: perm.Verb,
			Group: perm.Group, Resource: perm.Resource, Subresource: perm.Subresource, Name: name}}}
	res, err := h.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SelfSubjectAccessReview of %s %s/%s: %w", perm.Verb, perm.Resource, perm.Subresource, err)
	}
	return res.Status.Allowed, nil
}

func (h *hook) selector() string { return LabelRunnerPod + "=" + h.env.podName }

// prunePods deletes the runner's workflow pods (by label), at once.
func (h *hook) prunePods(ctx context.Context) error {
	pods, err := h.kube.CoreV1().Pods(h.env.namespace).List(ctx, metav1.ListOptions{LabelSelector: h.selector()})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		err := h.kube.CoreV1().Pods(h.env.namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// pruneSecrets deletes the Secrets the hook created for the runner (by label).
func (h *hook) pruneSecrets(ctx context.Context) error {
	secrets, err := h.kube.CoreV1().Secrets(h.env.namespace).List(ctx, metav1.ListOptions{LabelSelector: h.selector()})
	if err != nil {
		return err
	}
	for _, s := range secrets.Items {
		if err := h.kube.CoreV1().Secrets(h.env.namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// prepareJob is prepare_job as the runner runs it: through Gantry's wrapper when the
// runner pod names it (wrapper.go: no host port, the services' names aliased; after a
// failure, the hook's cleanup_job at once), then GitHub's hook (hookPrepareJob). It
// returns the workflow pod's name.
func (h *hook) prepareJob(ctx context.Context, args prepareJobArgs) (string, error) {
	raw, err := hookTemplate(ctx, h.admin, h.pod, h.env.template)
	if err != nil {
		return "", hookFailed("%v", err)
	}
	if h.env.wrapped {
		if args, raw, err = wrapPrepareJob(args, raw); err != nil {
			return "", hookFailed("%v", err)
		}
	}
	name, err := h.hookPrepareJob(ctx, args, raw)
	if err != nil && h.env.wrapped && ctx.Err() == nil {
		_ = h.cleanupJob(ctx) // what the hook made before it failed goes now
	}
	return name, err
}

// hookPrepareJob is the hook's prepare_job (hookrelease): prune what a previous job left,
// make the registry Secret of a job container with credentials, create the workflow pod
// (the job container and one container per service, the template merged) and wait until
// it runs, then exec into it: the no-volume hook copies the workspace in and checks its
// hash, and both check whether the job image is alpine. A refused pod leaves the Secret.
func (h *hook) hookPrepareJob(ctx context.Context, args prepareJobArgs, template []byte) (string, error) {
	if err := h.checkPermissions(ctx); err != nil {
		return "", err
	}
	if args.Container == nil {
		return "", hookFailed(hookrelease.MsgJobContainerRequired)
	}
	if err := h.prunePods(ctx); err != nil {
		return "", hookFailed("pruning the runner's pods: %v", err)
	}
	pod, err := h.workflowPod(ctx, args)
	if err != nil {
		return "", err
	}
	if args.Container.Registry != nil {
		secret, err := h.kube.CoreV1().Secrets(h.env.namespace).Create(ctx, h.registrySecret(args.Container.Registry), metav1.CreateOptions{})
		if err != nil {
			_ = h.prunePods(ctx)
			return "", hookFailed("%s%s", hookrelease.MsgCreateJobPodFailed, apiMessage(err))
		}
		pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret.Name}}
	}
	if len(template) > 0 {
		if err := mergeTemplate(pod, template); err != nil {
			return "", hookFailed("merging %s: %v", h.env.template, err)
		}
	}
	created, err := h.kube.CoreV1().Pods(h.env.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		_ = h.prunePods(ctx)
		return "", hookFailed("%s%s", hookrelease.MsgCreateJobPodFailed, apiMessage(err))
	}
	if err := h.waitRunning(ctx, created.Name); err != nil {
		if ctx.Err() == nil {
			_ = h.prunePods(ctx)
		}
		return "", err
	}
	execs := []string{"the alpine check"}
	if h.env.noVolume {
		execs = []string{"the workspace copy", "the workspace's hash", "the alpine check"}
	}
	for i, what := range execs {
		ok, err := h.exec(ctx, created.Name)
		switch {
		case i == len(execs)-1 && err != nil:
			// isPodContainerAlpine: a refused exec only means "not alpine".
			return "", hookFailed("failed to determine if the pod is alpine: %v", err)
		case i < len(execs)-1 && (err != nil || !ok):
			return "", hookFailed("failed to exec into pod %s for %s: exec refused (%v)", created.Name, what, err)
		}
	}
	return created.Name, nil
}

// workflowPod builds the workflow pod as the hook does, before the template. The
// no-volume hook leaves placement to the scheduler and gives the pod emptyDir volumes
// that an fs-init container fills (noVolumeWorkflowPod). The volume hook reads its own
// runner pod to place the workflow pod on the runner's node (nodeName, or node affinity
// with ACTIONS_RUNNER_USE_KUBE_SCHEDULER) and mounts the runner's work claim.
func (h *hook) workflowPod(ctx context.Context, args prepareJobArgs) (*corev1.Pod, error) {
	if h.env.noVolume {
		return h.noVolumeWorkflowPod(args)
	}
	ciEnv := []corev1.EnvVar{{Name: "GITHUB_ACTIONS", Value: "true"}, {Name: "CI", Value: "true"}}
	vol := "work"
	jobMounts := []corev1.VolumeMount{{Name: vol, MountPath: "/__w"}, {Name: vol, MountPath: "/__e", SubPath: "externals"},
		{Name: vol, MountPath: "/github/home", SubPath: "_temp/_github_home"}, {Name: vol, MountPath: "/github/workflow", SubPath: "_temp/_github_workflow"}}
	containers := []corev1.Container{{Name: JobContainerName, Image: args.Container.Image, Command: []string{"tail"}, Args: []string{"-f", "/dev/null"},
		Env: ciEnv, VolumeMounts: jobMounts}}
	for _, svc := range args.Services {
		containers = append(containers, corev1.Container{Name: serviceContainerName(svc.Image), Image: svc.Image, Env: ciEnv,
			VolumeMounts: []corev1.VolumeMount{{Name: vol, MountPath: "/__w"}}})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: WorkflowPodName(h.env.podName), Namespace: h.env.namespace,
			Labels: map[string]string{LabelRunnerPod: h.env.podName}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: containers, RestartPolicy: corev1.RestartPolicyNever},
	}
	self, err := h.kube.CoreV1().Pods(h.env.namespace).Get(ctx, h.env.podName, metav1.GetOptions{})
	if err != nil {
		return nil, hookFailed("reading the runner pod %s: %s", h.env.podName, apiMessage(err))
	}
	node := self.Spec.NodeName
	if node == "" {
		return nil, hookFailed("Failed to determine node name")
	}
	if h.env.useKubeScheduler {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	} else {
		pod.Spec.NodeName = node
	}
	claim := h.env.claimName
	if claim == "" {
		claim = h.env.podName + "-work"
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: vol, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	return pod, nil
}

// waitRunning polls a pod's phase as the hook does (waitForPodPhases) — backing off
// from 1 s, doubling to at most 20 s — until it runs; Pending (and, for a step pod,
// Unknown) goes on until the waits add up to more than the prepare-job timeout, any
// other phase fails at once. So does a failed read: the hook reads the pod and, finding
// it gone (Gantry deletes a pod that cannot start), fails at once with the last phase it
// saw and the API server's answer. prepare_job's message starts "pod failed to come
// online with error: Error: ", a step's does not.
func (h *hook) waitRunning(ctx context.Context, name string) error {
	return h.waitPod(ctx, name, "pod failed to come online with error: Error: ", corev1.PodPending)
}

func (h *hook) waitPod(ctx context.Context, name, prefix string, waitOn ...corev1.PodPhase) error {
	backoff, waited := time.Second, time.Duration(0)
	phase := corev1.PodUnknown
	fail := func() error {
		return hookFailed("%sPod %s is unhealthy with phase status %s", prefix, name, phase)
	}
	for {
		p, err := h.kube.CoreV1().Pods(h.env.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return hookFailed("%sPod %s is unhealthy with phase status %s: %s", prefix, name, phase, apiMessage(err))
		}
		phase = p.Status.Phase
		if phase == "" {
			phase = corev1.PodUnknown
		}
		if phase == corev1.PodRunning {
			return nil
		}
		if !slices.Contains(waitOn, phase) {
			return fail()
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if waited += backoff; waited > h.env.prepareTimeout {
			return fail()
		}
		backoff = min(2*backoff, 20*time.Second)
	}
}

// execAll stands for the hook's execs into pod, in order, each named for its message.
func (h *hook) execAll(ctx context.Context, pod, failure string, what ...string) error {
	for _, w := range what {
		ok, err := h.exec(ctx, pod)
		if err != nil {
			return hookFailed("%s%s: %v", failure, w, err)
		}
		if !ok {
			return hookFailed(`%s%s: pods "%s" is forbidden: cannot create resource "pods/exec" in the namespace %q`, failure, w, pod, h.env.namespace)
		}
	}
	return nil
}

// runScriptStep is one run_script_step of the no-volume hook: the permission checks and
// its execs into the job container (mkdir, the copy of _temp and its hash, the merge, the
// step's script, the copy of the file commands and its hash); no Secret, the step's
// environment being in its script. The volume hook execs the script alone. The step's
// time is the caller's to wait.
func (h *hook) runScriptStep(ctx context.Context, workflowPod string) error {
	if err := h.checkPermissions(ctx); err != nil {
		return err
	}
	if !h.env.noVolume {
		return h.execAll(ctx, workflowPod, hookrelease.MsgContainerStepFailed, "the script")
	}
	return h.execAll(ctx, workflowPod, hookrelease.MsgContainerStepFailed,
		"mkdir", "the copy of _temp", "its hash", "the merge", "the script", "the copy of the file commands", "its hash")
}

// runContainerStep is run_container_step for an action that runs in a container, as the
// runner runs it: through Gantry's wrapper when the runner pod names it (which refuses a
// Dockerfile action, or an image action without an entrypoint, before the hook runs),
// then GitHub's no-volume hook: the permission checks, its own refusals of both, then a
// step pod of the image — created, waited for, the workspace copied out of the workflow
// pod and into it, the entrypoint run, and the pod deleted whatever happened.
func (h *hook) runContainerStep(ctx context.Context, workflowPod string, step hookContainer) error {
	if h.env.wrapped {
		if why := refusedStep(step); why != "" {
			return hookFailed("%s", why)
		}
	}
	if err := h.checkPermissions(ctx); err != nil {
		return err
	}
	switch {
	case !h.env.noVolume:
		return hookFailed("the simulated runner plays the container steps of the no-volume hook only")
	case step.Dockerfile != "":
		return hookFailed(hookrelease.MsgDockerfileAction)
	case step.EntryPoint == "":
		return hookFailed(hookrelease.MsgNoEntrypoint)
	}
	pod := h.stepPod(step)
	raw, err := hookTemplate(ctx, h.admin, h.pod, h.env.template)
	if err != nil {
		return hookFailed("%v", err)
	}
	if len(raw) > 0 {
		if err := mergeTemplate(pod, raw); err != nil {
			return hookFailed("merging %s: %v", h.env.template, err)
		}
	}
	created, err := h.kube.CoreV1().Pods(h.env.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return hookFailed("%s%s", hookrelease.MsgContainerStepFailed, apiMessage(err))
	}
	defer func() {
		if ctx.Err() == nil {
			_ = h.kube.CoreV1().Pods(h.env.namespace).Delete(ctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}()
	if err := h.waitPod(ctx, created.Name, "", corev1.PodPending, corev1.PodUnknown); err != nil {
		return err
	}
	if err := h.execAll(ctx, workflowPod, hookrelease.MsgContainerStepFailed, "the copy out of the workflow pod", "its hash"); err != nil {
		return err
	}
	return h.execAll(ctx, created.Name, hookrelease.MsgContainerStepFailed, "the copy into the step pod", "its hash", "the entrypoint")
}

// cleanupJob is the hook's cleanup_job: the permission checks, then every pod and
// Secret of the runner deleted.
func (h *hook) cleanupJob(ctx context.Context) error {
	if err := h.checkPermissions(ctx); err != nil {
		return err
	}
	return errors.Join(h.prunePods(ctx), h.pruneSecrets(ctx))
}

// apiMessage is what the hook prints of an API error: the server's message.
func apiMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Message
	}
	return err.Error()
}
