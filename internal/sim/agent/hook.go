package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
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

	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// HookPermission is one access the Kubernetes hook asks for: a verb on a resource
// (and subresource) of the core ("") or batch group, in the hook's namespace.
type HookPermission struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
}

// HookPermissions are the accesses the official Kubernetes hook of the latest release
// — the no-volume hook, which the official runner image ships as
// /home/runner/k8s-novolume — checks with SelfSubjectAccessReview before every command
// (runner-container-hooks packages/k8s, requiredPermissions), and so the verbs a
// runner's Role must grant for a container job to run. The simulated hook checks
// exactly these, in this order; it then uses pods create/list/delete (get to wait),
// pods/exec create (asked per exec by SelfSubjectAccessReview: kwok has no kubelet to
// exec into) and secrets create/list/delete.
var HookPermissions = []HookPermission{
	{"get", "", "pods", ""}, {"list", "", "pods", ""}, {"create", "", "pods", ""}, {"delete", "", "pods", ""},
	{"get", "", "pods", "exec"}, {"create", "", "pods", "exec"},
	{"get", "", "pods", "log"}, {"list", "", "pods", "log"}, {"watch", "", "pods", "log"},
	{"create", "", "secrets", ""}, {"delete", "", "secrets", ""}, {"get", "", "secrets", ""}, {"list", "", "secrets", ""},
}

// VolumeHookPermissions are those of the older hook with the shared work volume (the
// image's /home/runner/k8s), which runs container steps as batch Jobs: HookPermissions
// and jobs get/list/create/delete.
var VolumeHookPermissions = slices.Concat(HookPermissions[:9], []HookPermission{
	{"get", "batch", "jobs", ""}, {"list", "batch", "jobs", ""}, {"create", "batch", "jobs", ""}, {"delete", "batch", "jobs", ""},
}, HookPermissions[9:])

// DefaultRunnerImage is the image of the no-volume hook's fs-init container when
// ACTIONS_RUNNER_IMAGE is unset.
const DefaultRunnerImage = "ghcr.io/actions/actions-runner:latest"

// Names the hook gives what it creates.
const (
	// LabelRunnerPod labels the workflow pod and the hook's Secrets with the runner
	// pod's name.
	LabelRunnerPod = "runner-pod"
	// JobContainerName is the workflow pod's job container.
	JobContainerName = "job"
	// containerExtensionPrefix marks a template container merged into the hook's
	// container of that name ("$job").
	containerExtensionPrefix = "$"
	maxPodNameLength         = 63
	secretSuffixLength       = 8
)

// WorkflowPodName is the workflow pod the hook creates for runner pod runnerPod.
func WorkflowPodName(runnerPod string) string {
	const suffix = "-workflow"
	return truncate(runnerPod, maxPodNameLength-len(suffix)) + suffix
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

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

// prepareJob is the hook's prepare_job: prune what a previous job left, read the
// template, create the workflow pod (the job container and one container per service)
// and wait until it runs, then exec into it: the no-volume hook copies the workspace
// in, and both check whether the job image is alpine. It returns the workflow pod's
// name.
func (h *hook) prepareJob(ctx context.Context, j *runnerapi.Job) (string, error) {
	if err := h.checkPermissions(ctx); err != nil {
		return "", err
	}
	if j.Container == "" {
		return "", hookFailed("Job Container is required.")
	}
	if err := h.prunePods(ctx); err != nil {
		return "", hookFailed("pruning the runner's pods: %v", err)
	}
	raw, err := hookTemplate(ctx, h.admin, h.pod, h.env.template)
	if err != nil {
		return "", hookFailed("%v", err)
	}
	pod, err := h.workflowPod(ctx, j, raw)
	if err != nil {
		return "", err
	}
	created, err := h.kube.CoreV1().Pods(h.env.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		_ = h.prunePods(ctx)
		return "", hookFailed("failed to create job pod: %s", apiMessage(err))
	}
	if err := h.waitRunning(ctx, created.Name); err != nil {
		if ctx.Err() == nil {
			_ = h.prunePods(ctx)
		}
		return "", err
	}
	if h.env.noVolume {
		// execCpToPod: the workspace, by tar through exec.
		if ok, err := h.exec(ctx, created.Name); err != nil || !ok {
			return "", hookFailed("failed to copy the workspace into pod %s: exec refused (%v)", created.Name, err)
		}
	}
	// isPodContainerAlpine: a failed exec only means "not alpine".
	if _, err := h.exec(ctx, created.Name); err != nil {
		return "", hookFailed("failed to determine if the pod is alpine: %v", err)
	}
	return created.Name, nil
}

// workflowPod builds the workflow pod as the hook does, with the template merged. The
// volume hook reads its own runner pod to place the workflow pod on the runner's node
// (nodeName, or node affinity with ACTIONS_RUNNER_USE_KUBE_SCHEDULER) and mounts the
// runner's work claim; the no-volume hook leaves placement to the scheduler and gives
// the pod emptyDir volumes that an fs-init container fills.
func (h *hook) workflowPod(ctx context.Context, j *runnerapi.Job, template []byte) (*corev1.Pod, error) {
	ciEnv := []corev1.EnvVar{{Name: "GITHUB_ACTIONS", Value: "true"}, {Name: "CI", Value: "true"}}
	vol := "work"
	jobMounts := []corev1.VolumeMount{{Name: vol, MountPath: "/__w"}, {Name: vol, MountPath: "/__e", SubPath: "externals"},
		{Name: vol, MountPath: "/github/home", SubPath: "_temp/_github_home"}, {Name: vol, MountPath: "/github/workflow", SubPath: "_temp/_github_workflow"}}
	serviceMounts := []corev1.VolumeMount{{Name: vol, MountPath: "/__w"}}
	if h.env.noVolume {
		jobMounts = []corev1.VolumeMount{{Name: "externals", MountPath: "/__e"}, {Name: "github", MountPath: "/github"}}
		serviceMounts = nil
	}
	containers := []corev1.Container{{Name: JobContainerName, Image: j.Container, Command: []string{"tail"}, Args: []string{"-f", "/dev/null"},
		Env: ciEnv, VolumeMounts: jobMounts}}
	for _, n := range slices.Sorted(maps.Keys(j.Services)) {
		image := j.Services[n]
		containers = append(containers, corev1.Container{Name: serviceContainerName(image), Image: image, Env: ciEnv, VolumeMounts: serviceMounts})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: WorkflowPodName(h.env.podName), Namespace: h.env.namespace,
			Labels: map[string]string{LabelRunnerPod: h.env.podName}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: containers, RestartPolicy: corev1.RestartPolicyNever},
	}
	if h.env.noVolume {
		image := h.env.runnerImage
		if image == "" {
			image = DefaultRunnerImage
		}
		pod.Spec.InitContainers = []corev1.Container{{Name: "fs-init", Image: image,
			Command:         []string{"sh", "-c", "sudo mv /home/runner/externals/* /mnt/externals"},
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1001), RunAsGroup: ptr.To[int64](1001)},
			VolumeMounts:    []corev1.VolumeMount{{Name: "externals", MountPath: "/mnt/externals"}}}}
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "externals", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "github", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	} else {
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
	}
	if len(template) > 0 {
		if err := mergeTemplate(pod, template); err != nil {
			return nil, hookFailed("merging %s: %v", h.env.template, err)
		}
	}
	return pod, nil
}

// serviceContainerName is the hook's name for a service's container: the image's
// last path element without its tag.
func serviceContainerName(image string) string {
	name := image[strings.LastIndex(image, "/")+1:]
	name, _, _ = strings.Cut(name, ":")
	return name
}

// waitRunning polls the workflow pod's phase as the hook does (waitForPodPhases) —
// backing off from 1 s, doubling to at most 20 s — until it runs; Pending goes on until
// the waits add up to more than the prepare-job timeout, any other phase fails at once.
// So does a failed read: the hook reads the pod and, finding it gone (Gantry deletes a
// workflow pod that cannot start), fails at once with the last phase it saw and the
// API server's answer, and the runner reports the job failed with that message.
func (h *hook) waitRunning(ctx context.Context, name string) error {
	backoff, waited := time.Second, time.Duration(0)
	phase := corev1.PodUnknown
	fail := func() error {
		return hookFailed("pod failed to come online with error: Error: Pod %s is unhealthy with phase status %s", name, phase)
	}
	for {
		p, err := h.kube.CoreV1().Pods(h.env.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return hookFailed("pod failed to come online with error: Error: Pod %s is unhealthy with phase status %s: %s", name, phase, apiMessage(err))
		}
		phase = p.Status.Phase
		if phase == "" {
			phase = corev1.PodUnknown
		}
		switch phase {
		case corev1.PodRunning:
			return nil
		case corev1.PodPending:
		default:
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

// runScriptStep is one run_script_step: the permission checks, the step's env Secret
// (created as the hook creates a step's env Secret, labeled with the runner pod and
// kept until cleanup_job), and the exec into the job container — asked by
// SelfSubjectAccessReview, kwok having no kubelet to exec into. The step's time is
// the caller's to wait.
func (h *hook) runScriptStep(ctx context.Context, workflowPod string) error {
	if err := h.checkPermissions(ctx); err != nil {
		return err
	}
	suffix := make([]byte, secretSuffixLength/2)
	_, _ = rand.Read(suffix)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:   truncate(h.env.podName, maxPodNameLength-len("-secret-")-secretSuffixLength) + "-secret-" + hex.EncodeToString(suffix),
			Labels: map[string]string{LabelRunnerPod: h.env.podName}},
		Immutable: ptr.To(true),
		Data:      map[string][]byte{"GITHUB_ACTIONS": []byte("true"), "CI": []byte("true")},
	}
	if _, err := h.kube.CoreV1().Secrets(h.env.namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return hookFailed("failed to create the step's env secret: %s", apiMessage(err))
	}
	// The step's exec; the no-volume hook then copies the workspace back out.
	execs := 1
	if h.env.noVolume {
		execs = 2
	}
	for range execs {
		ok, err := h.exec(ctx, workflowPod)
		if err != nil {
			return hookFailed("failed to run script step: %v", err)
		}
		if !ok {
			return hookFailed(`failed to run script step: pods "%s" is forbidden: cannot create resource "pods/exec" in the namespace %q`, workflowPod, h.env.namespace)
		}
	}
	return nil
}

// cleanupJob is the hook's cleanup_job: the permission checks, then every workflow pod
// and Secret of the runner deleted.
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
