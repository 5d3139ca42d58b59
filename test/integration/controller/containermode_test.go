package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/controller/runnerpool"
	"github.com/gantry-dev/gantry/internal/hookrelease"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
	"github.com/gantry-dev/gantry/internal/testutil/stack"
)

// hookPermissions are the SelfSubjectAccessReviews GitHub's no-volume Kubernetes hook
// makes before each command, in the namespace it works in: requiredPermissions of
// actions/runner-container-hooks v0.8.1 (packages/k8s/src/k8s/index.ts), as
// hookrelease.Permissions holds them.
var hookPermissions = func() []authorizationv1.ResourceAttributes {
	var out []authorizationv1.ResourceAttributes
	for _, p := range hookrelease.Permissions {
		for _, v := range p.Verbs {
			out = append(out, authorizationv1.ResourceAttributes{Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Verb: v})
		}
	}
	return out
}()

var installFence sync.Once

// installContainerHookFence applies, once per package, what an install ships for
// Kubernetes mode: the gantry-container-hook ClusterRole and the admission policy.
func installContainerHookFence(t *testing.T) {
	t.Helper()
	var err error
	installFence.Do(func() {
		root, rerr := testenv.RepoRoot()
		if rerr != nil {
			err = rerr
			return
		}
		for _, f := range []string{"config/rbac/container_hook_role.yaml", "config/container-hooks/admission-policy.yaml"} {
			b, rerr := os.ReadFile(filepath.Join(root, f))
			if rerr != nil {
				err = rerr
				return
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
			for {
				var u map[string]any
				if derr := dec.Decode(&u); derr != nil {
					if derr.Error() != "EOF" {
						err = derr
					}
					break
				}
				if u == nil {
					continue
				}
				var obj client.Object
				switch u["kind"] {
				case "ClusterRole":
					obj = &rbacv1.ClusterRole{}
				case "ValidatingAdmissionPolicy":
					obj = &admissionv1.ValidatingAdmissionPolicy{}
				case "ValidatingAdmissionPolicyBinding":
					obj = &admissionv1.ValidatingAdmissionPolicyBinding{}
				}
				if err = convert(u, obj); err != nil {
					return
				}
				if err = env.Client.Create(context.Background(), obj); err != nil {
					return
				}
			}
		}
		// The API server loads a new policy asynchronously: wait until it refuses a
		// write of a hook identity (impersonated, as system:masters so that RBAC lets the
		// request reach admission) whose token names no pod.
		probeCfg := rest.CopyConfig(env.Config)
		probeCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:probe:probe-container-hook", Groups: []string{"system:masters"}}
		probe := kubernetes.NewForConfigOrDie(probeCfg)
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			_, perr := probe.CoreV1().ConfigMaps("default").Create(context.Background(),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if apierrors.IsForbidden(perr) && strings.Contains(perr.Error(), "names no pod") {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		err = errors.New("the admission policy is not enforced 30s after it was created")
	})
	if err != nil {
		t.Fatalf("installing the container hook fence: %v", err)
	}
}

// slotPools are the pools of these tests whose runners get hook namespaces of their own
// (isolation Runner), with their containerMode.namespace ("" for the world's jobs
// namespace); containerModeWorld's manager watches their first slots'.
var slotPools = map[string]string{"k8s": "", "missing": "no-such-namespace"}

// containerModeWorld is a world whose manager also watches jobs, the pool's
// containerMode.namespace, labeled with a Pod Security level as the docs ask, and the
// first hook namespaces of slotPools: the test controller watches named namespaces
// only (tests share one API server).
func containerModeWorld(t *testing.T, alsoWatched ...string) (*world, string) {
	t.Helper()
	installContainerHookFence(t)
	jobs := jobsNamespace(t)
	w := &world{t: t, ns: env.Namespace(t), c: env.Client}
	watched := append([]string{jobs}, alsoWatched...)
	for name, base := range slotPools {
		if base == "" {
			base = jobs
		}
		watched = append(watched, slotNamespaces(t, w.ns, name, base)...)
	}
	st := stack.Start(t, env, w.ns, stack.Options{
		Token: testToken, CredentialsSecret: "github-creds", WebhookSecret: webhookSecret,
		RateLimits: simgithub.RateLimits{Disabled: true}, ExtraNamespaces: watched,
	})
	w.sim, w.simURL, w.gantry, w.hookURL = st.Sim, st.SimURL, st.Gantry, st.HookURL
	return w, jobs
}

// jobsNamespace is a fresh namespace for containerMode.namespace, labeled with a Pod
// Security level as the docs ask.
func jobsNamespace(t *testing.T) string {
	t.Helper()
	jobs := env.Namespace(t)
	nsObj := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: jobs}, nsObj); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(nsObj.DeepCopy())
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if err := env.Client.Patch(context.Background(), nsObj, patch); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// slotNamespaces are the first hook namespaces of pool ns/name with containerMode.namespace
// jobs, deleted when the test ends (tests share one API server).
func slotNamespaces(t *testing.T, ns, name, jobs string) []string {
	t.Helper()
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.RunnerPoolSpec{ContainerMode: &v1alpha1.ContainerModeSpec{Namespace: jobs}}}
	var out []string
	for n := range 4 {
		slot := v1alpha1.ContainerHookSlotNamespace(pool, n)
		out = append(out, slot)
		t.Cleanup(func() {
			_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: slot}})
		})
	}
	return out
}

// boundRunnerPods waits for n runner pods of pool and binds each to node, as the
// scheduler would; it returns their names, sorted.
func (w *world) boundRunnerPods(pool string, n int, node string) []string {
	w.t.Helper()
	var names []string
	w.eventually("runner pods of "+pool, func() (bool, error) {
		var pods corev1.PodList
		if err := w.c.List(w.ctx(), &pods, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelPool: pool}); err != nil {
			return false, err
		}
		names = nil
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return len(names) == n, nil
	})
	sort.Strings(names)
	for _, name := range names {
		w.bindPod(name, node)
	}
	return names
}

// hookNamespace is where the hook of runner pod pod works, as its environment says.
func (w *world) hookNamespace(pod string) string {
	w.t.Helper()
	p, err := w.getPod(pod)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == runner.EnvKubernetesNamespace {
				return e.Value
			}
		}
	}
	w.t.Fatalf("runner pod %s has no %s", pod, runner.EnvKubernetesNamespace)
	return ""
}

// runnerToken is the token the kubelet mounts in a runner pod: a TokenRequest for the
// pod's ServiceAccount bound to the pod, valid an hour.
func (w *world) runnerToken(pod string) string {
	w.t.Helper()
	p, err := w.getPod(pod)
	if err != nil {
		w.t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	tr, err := cs.CoreV1().ServiceAccounts(w.ns).CreateToken(w.ctx(), p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("requesting the token of pod %s: %v", pod, err)
	}
	return tr.Status.Token
}

// as is a clientset calling the API server with token only.
func as(t *testing.T, token string) *kubernetes.Clientset {
	t.Helper()
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	return kubernetes.NewForConfigOrDie(cfg)
}

// workflowPod is the pod the hook creates for runner pod runnerPod, merged with the
// pool's template as the hook merges it.
func workflowPod(runnerPod, node string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: hookrelease.WorkflowPodName(runnerPod), Labels: map[string]string{
			v1alpha1.LabelHookRunnerPod: runnerPod, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelRunner: "",
			v1alpha1.LabelWorkflowPod: v1alpha1.ContainerHookWorkflow,
		}},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
			Containers: []corev1.Container{
				{Name: "job", Image: "node:22", Command: []string{"tail"}, Args: []string{"-f", "/dev/null"},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}},
				{Name: "postgres", Image: "postgres:17"},
			},
			Volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// stepPod is a step pod the hook creates for an image action of runner pod runnerPod,
// merged with the pool's template as the hook merges it.
func stepPod(runnerPod, suffix string) *corev1.Pod {
	p := workflowPod(runnerPod, "", nil)
	p.Name = hookrelease.StepPodPrefix(runnerPod) + suffix
	p.Spec.Containers = []corev1.Container{{Name: "job", Image: "alpine:3.20", Command: []string{"tail"}, Args: []string{"-f", "/dev/null"},
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}}}
	return p
}

// hookBound sets runner pod pod Running, as a kubelet would, and waits until the hook's
// role is bound in namespace ns and the namespace has its default ServiceAccount (no
// kube-controller-manager makes it here: the controller does, once the runner pod
// runs): the runner's token may make pods there.
func (w *world) hookBound(pod, ns string) {
	w.t.Helper()
	w.setPodRunning(pod)
	w.eventually("the hook's role bound in "+ns, func() (bool, error) {
		var rbs rbacv1.RoleBindingList
		if err := w.c.List(w.ctx(), &rbs, client.InNamespace(ns)); err != nil || len(rbs.Items) == 0 {
			return false, err
		}
		err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	})
}

// hookSecret is the registry Secret the hook of runner pod runnerPod makes for a job
// container's credentials (v0.8.1's createDockerSecret: the only Secret it makes).
func hookSecret(runnerPod, suffix string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: hookrelease.SecretPrefix(runnerPod) + suffix, Labels: map[string]string{v1alpha1.LabelHookRunnerPod: runnerPod}},
		Immutable:  ptr.To(true),
		Type:       corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(
			`{"auths":{"ghcr.io":{"username":"octocat","password":"registry-password","auth":"b2N0b2NhdDpyZWdpc3RyeS1wYXNzd29yZA=="}}}`)},
	}
}

// The shipped ClusterRole grants exactly the verbs the hook checks, and the controller
// binds exactly it.
func TestContainerHookRoleIsExactlyTheHooksPermissions(t *testing.T) {
	installContainerHookFence(t)
	var role rbacv1.ClusterRole
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: runnerpool.ContainerHookClusterRole}, &role); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runnerpool.ContainerHookRules, role.Rules); diff != "" {
		t.Errorf("config/rbac/container_hook_role.yaml and runnerpool.ContainerHookRules differ (-code +file):\n%s", diff)
	}
	var granted []string
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				granted = append(granted, res+" "+v)
			}
		}
	}
	var checked []string
	for _, p := range hookPermissions {
		res := p.Resource
		if p.Subresource != "" {
			res += "/" + p.Subresource
		}
		checked = append(checked, res+" "+p.Verb)
	}
	sort.Strings(granted)
	sort.Strings(checked)
	if diff := cmp.Diff(checked, granted); diff != "" {
		t.Errorf("the hook's ClusterRole is not exactly the hook's checks (-hook +role):\n%s", diff)
	}
}

// With a runner pod's own token, job code can do every call the hook makes, on its own
// workflow pod and Secrets, and nothing else: no Secret of the pool's namespace (its own
// and the other runner's JIT configuration, the pool's credentials), no pod but its own
// workflow pod, none privileged, with host namespaces, a hostPath or a token. With
// isolation Runner (the default) it cannot even read the other runner's workflow pod,
// logs or step Secrets: they are in another namespace, bound to another ServiceAccount.
func TestKubernetesModeFencesJobCodeOffWithTheRunnersOwnToken(t *testing.T) {
	for _, isolation := range []v1alpha1.ContainerHookIsolation{v1alpha1.IsolationRunner, v1alpha1.IsolationPool} {
		t.Run(string(isolation), func(t *testing.T) { testFence(t, isolation) })
	}
}

func testFence(t *testing.T, isolation v1alpha1.ContainerHookIsolation) {
	w, jobs := containerModeWorld(t)
	pool := w.pool("k8s").MinIdle(2).KubernetesMode(jobs).Obj()
	pool.Spec.ContainerMode.Isolation = isolation
	w.create(pool)
	// A node, so that the API server can locate the kubelet of an exec.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
	w.create(node)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = 1
	if err := env.Client.Status().Update(w.ctx(), node); err != nil {
		t.Fatal(err)
	}
	pods := w.boundRunnerPods("k8s", 2, node.Name)
	a, b := pods[0], pods[1]
	nsA, nsB := w.hookNamespace(a), w.hookNamespace(b)
	shared := isolation == v1alpha1.IsolationPool
	if shared != (nsA == nsB) || (shared && nsA != jobs) {
		t.Fatalf("isolation %s: the runners' hooks work in %s and %s; want %s", isolation, nsA, nsB,
			map[bool]string{true: "both in " + jobs, false: "namespaces of their own"}[shared])
	}
	w.hookBound(a, nsA)
	w.hookBound(b, nsB)
	// No pod stands for the runner pod where its hook works: v0.8.1 never reads it.
	for _, p := range []struct{ pod, ns string }{{a, nsA}, {b, nsB}} {
		if err := w.c.Get(w.ctx(), types.NamespacedName{Namespace: p.ns, Name: p.pod}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("a pod %s/%s where the hook of runner pod %s works: %v; want none", p.ns, p.pod, p.pod, err)
		}
	}
	// What the other runner's hook made: its workflow pod, a step pod and a Secret.
	if err := w.c.Create(w.ctx(), func() client.Object { p := workflowPod(b, node.Name, nil); p.Namespace = nsB; return p }()); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(w.ctx(), func() client.Object { p := stepPod(b, "bbbbbbbb"); p.Namespace = nsB; return p }()); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(w.ctx(), func() client.Object { s := hookSecret(b, "bbbbbbbb"); s.Namespace = nsB; return s }()); err != nil {
		t.Fatal(err)
	}

	ctx := w.ctx()
	hookToken := w.runnerToken(a)
	hook := as(t, hookToken)
	forbidden := func(what string, err error, wantMsgs ...string) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: want 403 Forbidden, got %v", what, err)
			return
		}
		for _, m := range wantMsgs {
			if strings.Contains(err.Error(), m) {
				return
			}
		}
		if len(wantMsgs) > 0 {
			t.Errorf("%s: refused, but saying none of %q: %v", what, wantMsgs, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: the hook's call was refused: %v", what, err)
		}
	}

	// Every call the hook makes, in order: the permission checks, the pruning lists, a
	// registry Secret, the workflow pod, exec, a step pod and its exec, cleanup.
	for _, p := range hookPermissions {
		p.Namespace = nsA
		r, err := hook.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &p}}, metav1.CreateOptions{})
		if err != nil || !r.Status.Allowed {
			t.Errorf("SelfSubjectAccessReview %s %s/%s in %s: allowed=%v, err=%v", p.Verb, p.Resource, p.Subresource, nsA, r != nil && r.Status.Allowed, err)
		}
	}
	var err error
	_, err = hook.CoreV1().Pods(nsA).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelHookRunnerPod + "=" + a})
	allowed("list its pods", err)
	_, err = hook.CoreV1().Secrets(nsA).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelHookRunnerPod + "=" + a})
	allowed("list its secrets", err)
	_, err = hook.CoreV1().Secrets(nsA).Create(ctx, hookSecret(a, "0a1b2c3d"), metav1.CreateOptions{})
	allowed("create a registry Secret", err)
	_, err = hook.CoreV1().Pods(nsA).Create(ctx, workflowPod(a, node.Name, nil), metav1.CreateOptions{})
	allowed("create its workflow pod", err)
	_, err = hook.CoreV1().Pods(nsA).Get(ctx, hookrelease.WorkflowPodName(a), metav1.GetOptions{})
	allowed("read its workflow pod's phase", err)
	// An exec, as the hook runs each step: the API server authorizes and admits it,
	// then dials the node's kubelet (none here: that part fails for any pod).
	exec := func(ns, pod string) error {
		u := hook.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: "job", Command: []string{"true"}, Stdout: true}, scheme.ParameterCodec).URL()
		hc, err := rest.HTTPClientFor(&rest.Config{Host: env.Config.Host, BearerToken: hookToken,
			TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData, NextProtos: []string{"http/1.1"}}}) // an upgrade needs HTTP/1.1
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "SPDY/3.1")
		req.Header.Set("X-Stream-Protocol-Version", "v4.channel.k8s.io")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil
		}
		return fmt.Errorf("%d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), body)
	}
	execRefused := func(err error) bool {
		return err != nil && strings.HasPrefix(err.Error(), "403 ")
	}
	if err := exec(nsA, hookrelease.WorkflowPodName(a)); err == nil || execRefused(err) {
		t.Errorf("exec into its own workflow pod: want it admitted (then failing to reach a kubelet), got %v", err)
	}
	// A step pod of an image action: made, waited for, exec'd into, deleted.
	step := hookrelease.StepPodPrefix(a) + "0a1b2c3d"
	_, err = hook.CoreV1().Pods(nsA).Create(ctx, stepPod(a, "0a1b2c3d"), metav1.CreateOptions{})
	allowed("create a step pod", err)
	_, err = hook.CoreV1().Pods(nsA).Get(ctx, step, metav1.GetOptions{})
	allowed("read its step pod's phase", err)
	if err := exec(nsA, step); err == nil || execRefused(err) {
		t.Errorf("exec into its own step pod: want it admitted (then failing to reach a kubelet), got %v", err)
	}
	allowed("delete its step pod", hook.CoreV1().Pods(nsA).Delete(ctx, step, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	allowed("delete its registry Secret", hook.CoreV1().Secrets(nsA).Delete(ctx, a+"-secret-0a1b2c3d", metav1.DeleteOptions{}))

	// Reads of the pool's namespace: every Secret there, whatever its name.
	for _, name := range []string{a, b, "github-creds", "gantry-webhook"} {
		_, err := hook.CoreV1().Secrets(w.ns).Get(ctx, name, metav1.GetOptions{})
		forbidden("get Secret "+name+" of the pool's namespace", err)
	}
	_, err = hook.CoreV1().Secrets(w.ns).List(ctx, metav1.ListOptions{})
	forbidden("list the pool's namespace's Secrets", err)
	_, err = hook.CoreV1().Secrets(w.ns).Watch(ctx, metav1.ListOptions{})
	forbidden("watch the pool's namespace's Secrets", err)
	_, err = hook.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	forbidden("list every Secret of the cluster", err)
	_, err = hook.CoreV1().Pods(w.ns).Get(ctx, b, metav1.GetOptions{})
	forbidden("read the other runner's pod (its env names the JIT Secret)", err)

	// Writes: only its own workflow pod, within the namespace's Pod Security level.
	own := hookrelease.WorkflowPodName(a)
	// Pod Security admission (the namespace enforces baseline) refuses some of these
	// before the policy does: either says no.
	bad := []struct {
		what string
		pod  *corev1.Pod
		msgs []string
	}{
		{"a pod that is not its workflow pod", workflowPod(a, node.Name, func(p *corev1.Pod) { p.Name = "miner" }), []string{"may create only its workflow pod"}},
		{"the other runner's workflow pod", workflowPod(b, node.Name, func(p *corev1.Pod) { p.Name = a + "-step-1" }), []string{"may create only its workflow pod"}},
		{"a privileged workflow pod", workflowPod(a, node.Name, func(p *corev1.Pod) {
			p.Name = own + "x"
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), []string{"may create only its workflow pod", "privileged"}},
		{"a privileged pod under its own name", workflowPod(a, node.Name, func(p *corev1.Pod) {
			p.Name = a + "-step-2"
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), []string{"may not run a privileged container", "privileged"}},
		{"a hostPath pod", workflowPod(a, node.Name, func(p *corev1.Pod) {
			p.Name = a + "-step-3"
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}), []string{"may not mount a hostPath volume", "hostPath volumes"}},
		{"a hostNetwork pod", workflowPod(a, node.Name, func(p *corev1.Pod) { p.Name = a + "-step-4"; p.Spec.HostNetwork = true }), []string{"node's network", "hostNetwork"}},
		{"a pod with a token", workflowPod(a, node.Name, func(p *corev1.Pod) { p.Name = a + "-step-5"; p.Spec.AutomountServiceAccountToken = nil }), []string{"may not get a ServiceAccount token"}},
	}
	for _, tc := range bad {
		_, err := hook.CoreV1().Pods(nsA).Create(ctx, tc.pod, metav1.CreateOptions{})
		forbidden("create "+tc.what, err, tc.msgs...)
	}
	_, err = hook.CoreV1().Pods(w.ns).Create(ctx, workflowPod(a, node.Name, nil), metav1.CreateOptions{})
	forbidden("create a pod in the pool's namespace", err)
	_, err = hook.CoreV1().Secrets(nsA).Create(ctx, func() *corev1.Secret { s := hookSecret(a, "ffffffff"); s.Labels = nil; return s }(), metav1.CreateOptions{})
	forbidden("create an unlabeled Secret", err, "may create only Secrets named")
	// Where the runners share a namespace the policy refuses this; apart, RBAC does.
	var policySays []string
	if shared {
		policySays = []string{"may delete only what it made"}
	}
	forbidden("delete the other runner's step pod", hook.CoreV1().Pods(nsB).Delete(ctx, hookrelease.StepPodPrefix(b)+"bbbbbbbb", metav1.DeleteOptions{}), policySays...)
	forbidden("delete the other runner's workflow pod", hook.CoreV1().Pods(nsB).Delete(ctx, hookrelease.WorkflowPodName(b), metav1.DeleteOptions{}), policySays...)
	forbidden("delete the other runner's Secret", hook.CoreV1().Secrets(nsB).Delete(ctx, b+"-secret-bbbbbbbb", metav1.DeleteOptions{}), policySays...)
	if err := exec(nsB, hookrelease.StepPodPrefix(b)+"bbbbbbbb"); !execRefused(err) {
		t.Errorf("exec into the other runner's step pod: want it refused, got %v", err)
	}
	if err := exec(nsB, hookrelease.WorkflowPodName(b)); !execRefused(err) {
		t.Errorf("exec into the other runner's workflow pod: want it refused, got %v", err)
	}
	if !shared {
		// Reads of the other runner's hook namespace: its workflow pod (the job
		// container's environment is in its spec), logs, step Secrets.
		_, err = hook.CoreV1().Secrets(nsB).Get(ctx, b+"-secret-bbbbbbbb", metav1.GetOptions{})
		forbidden("get the other runner's step Secret", err)
		_, err = hook.CoreV1().Secrets(nsB).List(ctx, metav1.ListOptions{})
		forbidden("list the other runner's hook Secrets", err)
		_, err = hook.CoreV1().Secrets(nsB).Watch(ctx, metav1.ListOptions{})
		forbidden("watch the other runner's hook Secrets", err)
		_, err = hook.CoreV1().Pods(nsB).Get(ctx, hookrelease.WorkflowPodName(b), metav1.GetOptions{})
		forbidden("read the other runner's workflow pod", err)
		_, err = hook.CoreV1().Pods(nsB).List(ctx, metav1.ListOptions{})
		forbidden("list the other runner's pods", err)
		err = hook.CoreV1().Pods(nsB).GetLogs(hookrelease.WorkflowPodName(b), &corev1.PodLogOptions{Container: "job"}).Do(ctx).Error()
		forbidden("read the other runner's job logs", err)
		_, err = hook.CoreV1().Secrets(jobs).List(ctx, metav1.ListOptions{})
		forbidden("list the Secrets of containerMode.namespace itself", err)
		_, err = hook.CoreV1().Pods(nsB).Create(ctx, workflowPod(a, node.Name, nil), metav1.CreateOptions{})
		forbidden("create its workflow pod in the other runner's namespace", err)
	}
	_, err = hook.CoreV1().Pods(nsA).Patch(ctx, own, types.MergePatchType, []byte(`{"metadata":{"labels":{"runner-pod":"`+b+`"}}}`), metav1.PatchOptions{})
	forbidden("relabel its workflow pod", err)

	// A token of the ServiceAccount bound to no pod writes nothing.
	cs := kubernetes.NewForConfigOrDie(env.Config)
	podA, err := w.getPod(a)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(w.ns).CreateToken(ctx, podA.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = as(t, tr.Status.Token).CoreV1().Pods(nsA).Create(ctx, workflowPod(a, node.Name, func(p *corev1.Pod) { p.Name = a + "-step-6" }), metav1.CreateOptions{})
	forbidden("create a pod with a token bound to no pod", err, "names no pod")

	allowed("delete its workflow pod", hook.CoreV1().Pods(nsA).Delete(ctx, own, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
}

// A workflow pod whose job image cannot be pulled is dealt with once
// recovery.imagePullGracePeriod passes, not after the hook's prepare-job timeout: a
// WorkflowPodReady condition and a Warning event name the image, and the WORKFLOW pod is
// deleted — the hook's prepare_job then fails at once and the runner reports the job
// failed and exits by itself. The runner pod is not deleted by the controller (that
// would leave GitHub to fail the job only after its runner-lost timeout). Once the
// runner exits, the hook's Secrets go too.
func TestUnpullableJobImageDeletesTheWorkflowPodNotTheRunnerPod(t *testing.T) {
	w, jobs := containerModeWorld(t)
	pool := w.pool("k8s").MinIdle(1).KubernetesMode(jobs).Obj()
	pool.Spec.Recovery.ImagePullGracePeriod = &metav1.Duration{Duration: time.Second}
	w.create(pool)
	a := w.boundRunnerPods("k8s", 1, "node-a")[0]
	hns := w.hookNamespace(a)
	w.hookBound(a, hns)
	hook := as(t, w.runnerToken(a))
	ctx := w.ctx()
	// The registry Secret, which the workflow pod pulls with (v0.8.1's createJobPod).
	secret := hookSecret(a, "12345678")
	if _, err := hook.CoreV1().Secrets(hns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const image = "ghcr.io/acme/does-not-exist:1"
	wf, err := hook.CoreV1().Pods(hns).Create(ctx, workflowPod(a, "node-a", func(p *corev1.Pod) {
		p.Spec.Containers[0].Image = image
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret.Name}}
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's word: the job container's image cannot be pulled. Written once: no
	// later write to the workflow pod brings the controller back, only its own requeue.
	wf.Status.Phase = corev1.PodPending
	wf.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "job", Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + image + `": not found`}}},
		{Name: "postgres", Image: "postgres:17", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
	}
	if err := w.c.Status().Update(ctx, wf); err != nil {
		t.Fatal(err)
	}

	w.eventuallyWithin(20*time.Second, "the workflow pod deleted", func() (bool, error) {
		_, err := hook.CoreV1().Pods(hns).Get(ctx, wf.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	ev := w.warningEvent(a, v1alpha1.ReasonWorkflowPodImagePullFailed)
	if !strings.Contains(ev.Message, image) || !strings.Contains(ev.Message, `container "job"`) {
		t.Errorf("the Warning event says %q; want it to name the image %s and its container", ev.Message, image)
	}
	var rn *v1alpha1.Runner
	w.eventually("WorkflowPodReady False naming the image", func() (bool, error) {
		var err error
		if rn, err = w.getRunner(a); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(rn.Status.Conditions, v1alpha1.ConditionWorkflowPodReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonWorkflowPodImagePullFailed &&
			strings.Contains(c.Message, image), nil
	})
	// The runner ends by itself, its hook having failed the job: the controller neither
	// fails it nor deletes its pod meanwhile.
	for range 6 {
		p, err := w.getPod(a)
		if err != nil || p.DeletionTimestamp != nil {
			t.Fatalf("the runner pod was deleted by the controller (err %v); want it left to end by itself", err)
		}
		if rn, err := w.getRunner(a); err != nil || rn.Status.Phase == v1alpha1.RunnerFailed {
			t.Fatalf("the runner failed (err %v); want it left to end by itself", err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	w.setPodExitedUnlessGone(a, 0)
	w.eventually("the hook's Secrets gone", func() (bool, error) {
		var pods corev1.PodList
		if err := w.c.List(w.ctx(), &pods, client.InNamespace(hns)); err != nil {
			return false, err
		}
		var secrets corev1.SecretList
		if err := w.c.List(w.ctx(), &secrets, client.InNamespace(hns), client.MatchingLabels{v1alpha1.LabelHookRunnerPod: a}); err != nil {
			return false, err
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live++
			}
		}
		return live == 0 && len(secrets.Items) == 0, nil
	})
}

// convert turns a decoded YAML document into obj.
func convert(doc map[string]any, obj client.Object) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, obj)
}

// Whatever ends a runner, its workflow pod, its step pods and the hook's Secrets go: the
// hook sets no owner reference, so nothing else would. The hook's registry Secret is
// named in the workflow pod's imagePullSecrets, as v0.8.1 makes it; a runner of a pool
// that does not require a job container may have run job code next to the token, which
// can make Secrets the workflow pod does not name.
func TestHookObjectsGoWhateverEndsTheRunner(t *testing.T) {
	for _, tc := range []struct {
		name string
		// noJobContainer: the pool's requireJobContainer is false; then the workflow pod
		// does not name the Secret.
		noJobContainer bool
		end            func(w *world, pod string)
	}{
		{name: "its job done (the runner exits 0)", end: func(w *world, pod string) {
			w.setPodRunning(pod)
			w.setPodExitedUnlessGone(pod, 0)
		}},
		{name: "its pod deleted mid-job", end: func(w *world, pod string) {
			w.setPodRunning(pod)
			p, err := w.getPod(pod)
			if err != nil {
				w.t.Fatal(err)
			}
			if err := w.c.Delete(w.ctx(), p, client.GracePeriodSeconds(0)); err != nil {
				w.t.Fatal(err)
			}
		}},
		{name: "a job without a job container done, a Secret of its code's left", noJobContainer: true, end: func(w *world, pod string) {
			w.setPodRunning(pod)
			w.setPodExitedUnlessGone(pod, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, jobs := containerModeWorld(t)
			pool := w.pool("k8s").MinIdle(1).KubernetesMode(jobs).Obj()
			if tc.noJobContainer {
				pool.Spec.ContainerMode.RequireJobContainer = ptr.To(false)
			}
			w.create(pool)
			a := w.boundRunnerPods("k8s", 1, "node-a")[0]
			hns := w.hookNamespace(a)
			w.hookBound(a, hns)
			hook := as(t, w.runnerToken(a))
			secret := hookSecret(a, "aaaabbbb")
			if _, err := hook.CoreV1().Secrets(hns).Create(w.ctx(), secret, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			wf := workflowPod(a, "node-a", func(p *corev1.Pod) {
				if !tc.noJobContainer {
					p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: secret.Name}}
				}
			})
			if _, err := hook.CoreV1().Pods(hns).Create(w.ctx(), wf, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := hook.CoreV1().Pods(hns).Create(w.ctx(), stepPod(a, "cccccccc"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			tc.end(w, a)
			w.eventually("the workflow pod, the step pod and the hook's Secret gone", func() (bool, error) {
				var pods corev1.PodList
				if err := w.c.List(w.ctx(), &pods, client.InNamespace(hns)); err != nil {
					return false, err
				}
				var secrets corev1.SecretList
				if err := w.c.List(w.ctx(), &secrets, client.InNamespace(hns)); err != nil {
					return false, err
				}
				live := 0
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil {
						live++
					}
				}
				return live == 0 && len(secrets.Items) == 0, nil
			})
		})
	}
}

// A Kubernetes-mode pool whose containerMode.namespace is its own, is not among the
// namespaces the controller watches (--namespaces) — with isolation Runner: whose
// runners' hook namespaces are not —, or does not exist, creates no runner and says why: not Ready and Degraded, with a message naming what to fix.
func TestKubernetesModePoolRefusesItsOwnAnUnwatchedOrAMissingNamespace(t *testing.T) {
	// "no-such-namespace" is watched, so that the pool naming it meets its absence.
	w, _ := containerModeWorld(t, "no-such-namespace")
	unwatched := env.Namespace(t) // exists, but the controller does not watch it
	shared := func(b *testutil.RunnerPoolBuilder) *v1alpha1.RunnerPool {
		p := b.Obj()
		p.Spec.ContainerMode.Isolation = v1alpha1.IsolationPool
		return p
	}
	w.create(w.pool("same").MinIdle(1).KubernetesMode(w.ns).Obj())
	w.create(w.pool("missing").MinIdle(1).KubernetesMode("no-such-namespace").Obj())
	w.create(shared(w.pool("missing-shared").MinIdle(1).KubernetesMode("no-such-namespace")))
	w.create(w.pool("unwatched").MinIdle(1).KubernetesMode(unwatched).Obj())
	w.create(shared(w.pool("unwatched-shared").MinIdle(1).KubernetesMode(unwatched)))
	for _, tc := range []struct {
		pool, reason string
		wantInMsg    []string
	}{
		{"same", v1alpha1.ReasonSameNamespace, []string{w.ns}},
		{"missing", v1alpha1.ReasonNamespaceNotFound, []string{"no-such-namespace"}},
		{"missing-shared", v1alpha1.ReasonNamespaceNotFound, []string{"no-such-namespace"}},
		{"unwatched", v1alpha1.ReasonNamespaceNotWatched, []string{unwatched, "--namespaces", "watchNamespaces", "isolation: Pool"}},
		{"unwatched-shared", v1alpha1.ReasonNamespaceNotWatched, []string{unwatched, "--namespaces", "watchNamespaces"}},
	} {
		w.eventually("pool "+tc.pool+" not Ready and Degraded with "+tc.reason, func() (bool, error) {
			p := w.getPool(tc.pool)
			ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			degraded := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionDegraded)
			return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == tc.reason &&
				degraded != nil && degraded.Status == metav1.ConditionTrue && degraded.Reason == tc.reason, nil
		})
		degraded := meta.FindStatusCondition(w.getPool(tc.pool).Status.Conditions, v1alpha1.ConditionDegraded)
		for _, want := range tc.wantInMsg {
			if !strings.Contains(degraded.Message, want) {
				t.Errorf("pool %s: Degraded message %q does not name %q", tc.pool, degraded.Message, want)
			}
		}
		if n := len(w.runners(tc.pool)); n != 0 {
			t.Errorf("pool %s (%s) created %d runners, want none", tc.pool, tc.reason, n)
		}
	}
}

// A pool with isolation Runner takes its runners' hook namespaces with it: they are
// reused while it lives, and deleted once it is gone.
func TestHookNamespacesGoWithThePool(t *testing.T) {
	w, jobs := containerModeWorld(t)
	w.create(w.pool("k8s").MinIdle(1).KubernetesMode(jobs).Obj())
	a := w.boundRunnerPods("k8s", 1, "node-a")[0]
	hns := w.hookNamespace(a)
	w.hookBound(a, hns)
	ns := &corev1.Namespace{}
	if err := w.c.Get(w.ctx(), types.NamespacedName{Name: hns}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "baseline" {
		t.Errorf("hook namespace %s labels %v: want containerMode.namespace's Pod Security level", hns, ns.Labels)
	}
	// The runner ends (no kubelet here would confirm its pod's graceful deletion), then
	// the pool goes.
	w.setPodRunning(a)
	w.setPodExitedUnlessGone(a, 0)
	if err := w.c.Delete(w.ctx(), w.getPool("k8s")); err != nil {
		t.Fatal(err)
	}
	w.eventually("the hook namespace "+hns+" deleted with the pool", func() (bool, error) {
		err := w.c.Get(w.ctx(), types.NamespacedName{Name: hns}, ns)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		// No namespace controller runs here: a deleted namespace stays Terminating.
		return err == nil && ns.DeletionTimestamp != nil, err
	})
}

// containerMode.useKubeScheduler stays valid but is ignored: GitHub's hook never reads
// ACTIONS_RUNNER_USE_KUBE_SCHEDULER, so the runner pod does not get it, and the pool's
// owner is told by a Warning event on the pool. The runner runs Gantry's wrapper, which
// runs the hook.
func TestUseKubeSchedulerIsIgnoredAndSaysSo(t *testing.T) {
	w, jobs := containerModeWorld(t)
	pool := w.pool("k8s").MinIdle(1).KubernetesMode(jobs).Obj()
	pool.Spec.ContainerMode.UseKubeScheduler = true
	w.create(pool)
	ev := w.warningEvent("k8s", runnerpool.ReasonIgnoredField)
	for _, want := range []string{"useKubeScheduler", "ignored", "ACTIONS_RUNNER_USE_KUBE_SCHEDULER", "Remove the field"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("the event says %q; want it to say %q", ev.Message, want)
		}
	}
	a := w.boundRunnerPods("k8s", 1, "node-a")[0]
	p, err := w.getPod(a)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	if _, set := env[hookrelease.EnvUseKubeScheduler]; set {
		t.Errorf("the runner pod sets %s", hookrelease.EnvUseKubeScheduler)
	}
	if env[runner.EnvContainerHooks] != runner.HookWrapperPath || env[runner.EnvWrappedHook] != v1alpha1.DefaultContainerHookPath {
		t.Errorf("the runner runs %q wrapping %q; want Gantry's wrapper %s wrapping %s",
			env[runner.EnvContainerHooks], env[runner.EnvWrappedHook], runner.HookWrapperPath, v1alpha1.DefaultContainerHookPath)
	}
}
