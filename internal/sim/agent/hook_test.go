package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	containerhooks "github.com/gantry-dev/gantry/config/container-hooks"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// hookRules are the Role rules that grant HookPermissions, minus the verbs in drop
// ("verb resource[/subresource]").
func hookRules(drop ...string) []rbacv1.PolicyRule { return rulesOf(HookPermissions, drop...) }

func rulesOf(perms []HookPermission, drop ...string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, p := range perms {
		res := p.Resource
		if p.Subresource != "" {
			res += "/" + p.Subresource
		}
		if slices.Contains(drop, p.Verb+" "+res) {
			continue
		}
		i := slices.IndexFunc(rules, func(r rbacv1.PolicyRule) bool { return r.APIGroups[0] == p.Group && r.Resources[0] == res })
		if i < 0 {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{res}})
			i = len(rules) - 1
		}
		rules[i].Verbs = append(rules[i].Verbs, p.Verb)
	}
	return rules
}

// hookIdentity makes ServiceAccount name, a Role with rules and its RoleBinding: what
// any controller running the Kubernetes hook makes for its runners.
func (w *world) hookIdentity(name string, rules []rbacv1.PolicyRule) {
	w.t.Helper()
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: w.ns, Name: name}}},
	}
	for _, o := range objs {
		if err := env.Client.Create(w.t.Context(), o); err != nil {
			w.t.Fatal(err)
		}
	}
}

// hooked configures a runner pod for the no-volume Kubernetes hook, as the official
// runner image is configured: the hook script, the pod's name from the downward API,
// the pod's ServiceAccount sa, and extra literal variables.
func hooked(sa string, extra ...corev1.EnvVar) func(*corev1.Pod) {
	return hookedWith("/home/runner/k8s-novolume/index.js", sa, extra...)
}

func hookedWith(script, sa string, extra ...corev1.EnvVar) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ServiceAccountName = sa
		c := &p.Spec.Containers[0]
		c.Env = append(c.Env,
			corev1.EnvVar{Name: EnvContainerHooks, Value: script},
			corev1.EnvVar{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
		c.Env = append(c.Env, extra...)
	}
}

// kubelet plays the kubelet for the namespace's workflow pods (envtest has none): a
// pod whose images all pull runs; one with an image of cluster.UnpullableRegistry
// waits in ImagePullBackOff. It keeps a copy of each workflow pod as created.
type kubelet struct {
	mu   sync.Mutex
	seen map[string]corev1.Pod
}

func (w *world) kubelet() *kubelet {
	k := &kubelet{seen: map[string]corev1.Pod{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var pods corev1.PodList
			_ = env.Client.List(ctx, &pods, client.InNamespace(w.ns), client.HasLabels{LabelRunnerPod})
			for i := range pods.Items {
				p := &pods.Items[i]
				if len(p.Status.ContainerStatuses) > 0 || p.DeletionTimestamp != nil {
					continue
				}
				k.mu.Lock()
				k.seen[p.Name] = *p.DeepCopy()
				k.mu.Unlock()
				p.Status.Phase = corev1.PodRunning
				for _, c := range p.Spec.Containers {
					st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
					if cluster.Unpullable(c.Image) {
						p.Status.Phase = corev1.PodPending
						st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + c.Image + `"`}}
					}
					p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st)
				}
				_ = env.Client.Status().Update(ctx, p)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return k
}

// all are the pods it saw, by name.
func (k *kubelet) all() map[string]corev1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.seen)
}

func (k *kubelet) pod(name string) (corev1.Pod, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.seen[name]
	return p, ok
}

// leftovers are the names of the namespace's workflow pods and hook Secrets.
func (w *world) leftovers() (pods, secrets []string) {
	var pl corev1.PodList
	var sl corev1.SecretList
	if err := env.Client.List(w.t.Context(), &pl, client.InNamespace(w.ns), client.HasLabels{LabelRunnerPod}); err != nil {
		w.t.Fatal(err)
	}
	if err := env.Client.List(w.t.Context(), &sl, client.InNamespace(w.ns), client.HasLabels{LabelRunnerPod}); err != nil {
		w.t.Fatal(err)
	}
	for _, p := range pl.Items {
		pods = append(pods, p.Name)
	}
	for _, s := range sl.Items {
		secrets = append(secrets, s.Name)
	}
	return pods, secrets
}

func completed(a *Agents, pod string) *Event {
	for _, e := range a.Events() {
		if e.Kind == EventJobCompleted && e.Pod == pod {
			return &e
		}
	}
	return nil
}

func (w *world) queue(spec simgithub.JobSpec) simgithub.Job {
	w.t.Helper()
	spec.Repo, spec.Labels = "acme/app", []string{"self-hosted", "linux"}
	j, err := w.sim.QueueJob(spec)
	if err != nil {
		w.t.Fatal(err)
	}
	return j
}

// A container job on a runner configured for the hook: the workflow pod is made with
// the runner pod's own token (its Role is all that lets it), named, labeled and
// placed as the official hook makes it, with the template from the runner's ConfigMap
// volume merged in; the job runs and everything the hook made is gone after it.
func TestHookRunsAContainerJob(t *testing.T) {
	w := newWorld(t, 0)
	w.hookIdentity("runner-sa", hookRules())
	tmpl := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "hook-template"}, Data: map[string]string{"workflow.yaml": `
metadata:
  labels: {team: ci}
spec:
  nodeSelector: {disk: ssd}
  containers:
  - name: $job
    resources: {limits: {cpu: "2"}}
    env: [{name: FROM_TEMPLATE, value: "yes"}]
  - name: sidecar
    image: busybox
`}}
	if err := env.Client.Create(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	k := w.kubelet()
	a := w.start(Options{})
	job := w.queue(simgithub.JobSpec{Duration: simgithub.Duration(200 * time.Millisecond), Container: "node:22",
		Services: map[string]string{"db": "docker.io/library/postgres:17"}})
	w.runnerPod("r1", "node-a", hooked("runner-sa", corev1.EnvVar{Name: EnvHookTemplate, Value: "/home/runner/templates/workflow.yaml"}),
		func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "templates", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hook-template"}}}})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "templates", MountPath: "/home/runner/templates"})
		})
	eventually(t, "the job to complete", func() bool { return w.jobStatus(job.ID) == simgithub.StatusCompleted })
	if j, _ := w.sim.Job(job.ID); j.Conclusion != simgithub.ConclusionSuccess {
		t.Fatalf("job concluded %q (%+v), want success", j.Conclusion, completed(a, "r1"))
	}
	wp, ok := k.pod("r1-workflow")
	if !ok {
		t.Fatal("no workflow pod r1-workflow was made")
	}
	type container struct {
		Name, Image string
		CPU         string
		Env         []string
	}
	var got []container
	for _, c := range wp.Spec.Containers {
		gc := container{Name: c.Name, Image: c.Image}
		if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			gc.CPU = q.String()
		}
		for _, e := range c.Env {
			gc.Env = append(gc.Env, e.Name)
		}
		got = append(got, gc)
	}
	want := []container{
		{Name: "job", Image: "node:22", CPU: "2", Env: []string{"GITHUB_ACTIONS", "CI", "FROM_TEMPLATE"}},
		{Name: "postgres", Image: "docker.io/library/postgres:17", Env: []string{"GITHUB_ACTIONS", "CI"}},
		{Name: "sidecar", Image: "busybox"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workflow pod containers (-want +got):\n%s", diff)
	}
	// The no-volume hook leaves placement to the scheduler.
	if wp.Labels[LabelRunnerPod] != "r1" || wp.Labels["team"] != "ci" || wp.Spec.NodeName != "" ||
		wp.Spec.NodeSelector["disk"] != "ssd" || wp.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("workflow pod labels %v, node %q, nodeSelector %v, restartPolicy %q: want runner-pod=r1 and team=ci, no node, disk=ssd, Never",
			wp.Labels, wp.Spec.NodeName, wp.Spec.NodeSelector, wp.Spec.RestartPolicy)
	}
	if ic := wp.Spec.InitContainers; len(ic) != 1 || ic[0].Name != "fs-init" || ic[0].Image != DefaultRunnerImage {
		t.Errorf("workflow pod init containers %+v: want fs-init of %s", ic, DefaultRunnerImage)
	}
	// The hook's volumes first; admission adds the token of the pod's ServiceAccount.
	if v := wp.Spec.Volumes; len(v) < 2 || v[0].Name != "externals" || v[0].EmptyDir == nil || v[1].Name != "github" || v[1].EmptyDir == nil {
		t.Errorf("workflow pod volumes %+v: want the emptyDirs externals and github", v)
	}
	// Made by the runner's ServiceAccount: admission gave the pod that identity's
	// namespace defaults, and only the Role let it.
	eventually(t, "the runner to report the job", func() bool { return completed(a, "r1") != nil })
	e := completed(a, "r1")
	// prepare_job: 13 reviews, the pod, 3 execs (copy in, its hash, alpine); the step:
	// 13, 7 execs (mkdir, copy in, hash, merge, the script, copy out, hash) and no Secret;
	// cleanup_job: 13 and the pod.
	if !e.Hooked || e.Writes != 51 || e.Cause != "" {
		t.Errorf("completion %+v: want hooked, 51 writes, no failure", e)
	}
	pods, secrets := w.leftovers()
	if len(pods)+len(secrets) != 0 {
		t.Errorf("left behind: workflow pods %v, Secrets %v", pods, secrets)
	}
	var kinds []string
	for _, ev := range a.Events() {
		if strings.HasPrefix(ev.Kind, "workflow-pod") && ev.Pod == "r1" {
			kinds = append(kinds, ev.Kind)
		}
	}
	if diff := cmp.Diff([]string{EventWorkflowPodCreated, EventWorkflowPodRunning, EventWorkflowPodDeleted}, kinds); diff != "" {
		t.Errorf("workflow pod events (-want +got):\n%s", diff)
	}
	if errs := a.Errors(); len(errs) != 0 {
		t.Errorf("agent errors: %v", errs)
	}
}

// The older volume hook (/home/runner/k8s) reads its runner pod and places the
// workflow pod on the runner's node, mounting the runner's work claim, and needs batch
// Jobs too; with ACTIONS_RUNNER_USE_KUBE_SCHEDULER it places it by node affinity.
func TestVolumeHookPlacesTheWorkflowPodOnTheRunnersNode(t *testing.T) {
	for _, scheduler := range []bool{false, true} {
		t.Run(fmt.Sprintf("kube scheduler %v", scheduler), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, 0)
			w.hookIdentity("runner-sa", rulesOf(VolumeHookPermissions))
			k := w.kubelet()
			a := w.start(Options{})
			job := w.queue(simgithub.JobSpec{Container: "node:22"})
			var env []corev1.EnvVar
			if scheduler {
				env = append(env, corev1.EnvVar{Name: EnvUseKubeScheduler, Value: "true"})
			}
			w.runnerPod("r1", "node-a", hookedWith("/home/runner/k8s/index.js", "runner-sa", env...))
			eventually(t, "the runner to report the job", func() bool { return completed(a, "r1") != nil })
			if j, _ := w.sim.Job(job.ID); j.Conclusion != simgithub.ConclusionSuccess {
				t.Fatalf("job concluded %q with %+v, want success", j.Conclusion, completed(a, "r1"))
			}
			wp, _ := k.pod("r1-workflow")
			node := wp.Spec.NodeName
			if aff := wp.Spec.Affinity; aff != nil && aff.NodeAffinity != nil {
				node = aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0]
				if !scheduler || wp.Spec.NodeName != "" {
					t.Errorf("node affinity %+v and nodeName %q without the scheduler setting", aff, wp.Spec.NodeName)
				}
			}
			if node != "node-a" {
				t.Errorf("workflow pod placed on %q, want the runner's node-a", node)
			}
			if v := wp.Spec.Volumes; len(v) == 0 || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "r1-work" {
				t.Errorf("workflow pod volumes %+v: want the work claim r1-work", v)
			}
			// 17 reviews per command; the runner pod read (not a write); the pod, 1+1 execs,
			// its delete.
			if e := completed(a, "r1"); e.Writes != 55 {
				t.Errorf("completion %+v: want 55 writes", e)
			}
		})
	}
}

// A Role without one of the hook's verbs fails the job with the hook's message and
// makes nothing; so does a ServiceAccount bound to nothing, and a job without a
// container on a hook runner. A job without container or services runs as ever.
func TestHookFailsJobs(t *testing.T) {
	tests := []struct {
		name      string
		rules     []rbacv1.PolicyRule
		noBinding bool
		env       []corev1.EnvVar
		job       simgithub.JobSpec
		wantCause string
		wantHook  bool
	}{
		{name: "no exec", rules: hookRules("create pods/exec"), job: simgithub.JobSpec{Container: "node:22"},
			wantCause: "The Service account needs the following permissions", wantHook: true},
		{name: "no secrets delete", rules: hookRules("delete secrets"), job: simgithub.JobSpec{Container: "node:22"},
			wantCause: "The Service account needs the following permissions", wantHook: true},
		{name: "bound to nothing", noBinding: true, job: simgithub.JobSpec{Container: "node:22"},
			wantCause: "The Service account needs the following permissions", wantHook: true},
		{name: "services without a job container", rules: hookRules(), job: simgithub.JobSpec{Services: map[string]string{"db": "postgres:17"}},
			wantCause: "Job Container is required.", wantHook: true},
		{name: "job container required", rules: hookRules(), env: []corev1.EnvVar{{Name: EnvRequireJobContainer, Value: "true"}},
			wantCause: ErrJobContainerRequired},
		{name: "no container runs as ever", rules: hookRules()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, 0)
			if tc.noBinding {
				if err := env.Client.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "runner-sa"}}); err != nil {
					t.Fatal(err)
				}
			} else {
				w.hookIdentity("runner-sa", tc.rules)
			}
			k := w.kubelet()
			a := w.start(Options{})
			job := w.queue(tc.job)
			w.runnerPod("r1", "node-a", hooked("runner-sa", tc.env...))
			eventually(t, "the runner to report the job", func() bool { return completed(a, "r1") != nil })
			e := completed(a, "r1")
			wantConclusion := simgithub.ConclusionSuccess
			if tc.wantCause != "" {
				wantConclusion = simgithub.ConclusionFailure
			}
			if j, _ := w.sim.Job(job.ID); j.Conclusion != wantConclusion || !strings.HasPrefix(e.Cause, tc.wantCause) ||
				(tc.wantCause == "") != (e.Cause == "") || e.Hooked != tc.wantHook {
				t.Errorf("job concluded %q with %+v: want %s, cause starting %q, hooked %v", j.Conclusion, e, wantConclusion, tc.wantCause, tc.wantHook)
			}
			if _, made := k.pod("r1-workflow"); made {
				t.Error("a workflow pod was made")
			}
			if pods, secrets := w.leftovers(); len(pods)+len(secrets) != 0 {
				t.Errorf("left behind: workflow pods %v, Secrets %v", pods, secrets)
			}
		})
	}
}

// A workflow pod whose job image never pulls fails its job once the waits add up to
// more than ACTIONS_RUNNER_PREPARE_JOB_TIMEOUT_SECONDS, with the hook's message, and
// the hook deletes it. The runner renews its job all along, so GitHub, which loses a
// silent runner after 2 s here, does not fail the job first.
func TestHookTimesOutAWorkflowPodThatCannotStart(t *testing.T) {
	w := newWorld(t, 2*time.Second)
	w.hookIdentity("runner-sa", hookRules())
	k := w.kubelet()
	a := w.start(Options{RenewEvery: 200 * time.Millisecond})
	job := w.queue(simgithub.JobSpec{Container: cluster.UnpullableRegistry + "/node:22", Services: map[string]string{"db": "postgres:17"}})
	start := time.Now()
	w.runnerPod("r1", "node-a", hooked("runner-sa", corev1.EnvVar{Name: EnvPrepareJobTimeout, Value: "2"}))
	eventually(t, "the runner to report the job", func() bool { return completed(a, "r1") != nil })
	e := completed(a, "r1")
	if j, _ := w.sim.Job(job.ID); j.Conclusion != simgithub.ConclusionFailure ||
		e.Cause != "pod failed to come online with error: Error: Pod r1-workflow is unhealthy with phase status Pending" {
		t.Errorf("job concluded %q with %+v: want failure, the hook's timeout message", j.Conclusion, e)
	}
	// Waits of 1 s and 2 s add up to more than 2 s.
	if took := e.At.Sub(start); took < 3*time.Second {
		t.Errorf("the job failed after %s, before the prepare-job timeout's waits", took)
	}
	if _, made := k.pod("r1-workflow"); !made {
		t.Error("no workflow pod was made")
	}
	if pods, secrets := w.leftovers(); len(pods)+len(secrets) != 0 {
		t.Errorf("left behind: workflow pods %v, Secrets %v", pods, secrets)
	}
}

// A runner killed mid-job cleans nothing: its workflow pod and registry Secret stay for
// its controller to delete.
func TestHookKilledMidJobLeavesItsObjects(t *testing.T) {
	w := newWorld(t, 0)
	w.hookIdentity("runner-sa", hookRules())
	w.kubelet()
	a := w.start(Options{})
	w.queue(simgithub.JobSpec{Container: "node:22", ContainerOptions: &runnerapi.ContainerOptions{Credentials: true}, Duration: simgithub.Duration(time.Hour)})
	w.runnerPod("r1", "node-a", hooked("runner-sa"))
	eventually(t, "the workflow pod and its registry Secret", func() bool { p, s := w.leftovers(); return len(p) == 1 && len(s) == 1 })
	if err := env.Client.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "r1"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the runner to be killed", func() bool { return killed(a, "r1") != nil })
	time.Sleep(300 * time.Millisecond)
	if pods, secrets := w.leftovers(); len(pods) != 1 || len(secrets) != 1 {
		t.Errorf("after the kill: workflow pods %v, Secrets %v; want one of each left", pods, secrets)
	}
}

// What the API server refuses past the hook's own checks reaches the job as the
// server's message: here an admission policy on the workflow pod's image.
func TestHookReportsTheAPIServersRefusal(t *testing.T) {
	w := newWorld(t, 0)
	w.hookIdentity("runner-sa", hookRules())
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: w.ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `object.spec.containers.all(c, !c.image.startsWith("blocked.example/"))`,
				Message:    "images of blocked.example are not allowed"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: w.ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: w.ns,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: w.ns}}}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	a := w.start(Options{})
	job := w.queue(simgithub.JobSpec{Container: "blocked.example/node:22"})
	// The policy takes a moment to be loaded: a pod created before it would pass.
	time.Sleep(2 * time.Second)
	w.runnerPod("r1", "node-a", hooked("runner-sa"))
	eventually(t, "the runner to report the job", func() bool { return completed(a, "r1") != nil })
	e := completed(a, "r1")
	if j, _ := w.sim.Job(job.ID); j.Conclusion != simgithub.ConclusionFailure ||
		!strings.HasPrefix(e.Cause, "failed to create job pod: ") || !strings.Contains(e.Cause, "images of blocked.example are not allowed") {
		t.Errorf("job concluded %q with %+v: want failure with the policy's message", j.Conclusion, e)
	}
}

func TestHookEnvOf(t *testing.T) {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	lit := func(name, v string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: v} }
	tests := []struct {
		name    string
		env     []corev1.EnvVar
		want    hookEnv
		wantOK  bool
		wantErr string
	}{
		{name: "no hooks", env: []corev1.EnvVar{lit("OTHER", "x")}},
		{name: "defaults", env: []corev1.EnvVar{lit(EnvContainerHooks, "/home/runner/k8s/index.js"), field(EnvPodName, "metadata.name")}, wantOK: true,
			want: hookEnv{script: "/home/runner/k8s/index.js", podName: "r1", namespace: "ci", prepareTimeout: DefaultPrepareJobTimeout}},
		{name: "every setting", wantOK: true, env: []corev1.EnvVar{lit(EnvContainerHooks, "/home/runner/k8s-novolume/index.js"), lit(EnvPodName, "r1"),
			lit(EnvHookNamespace, "jobs"), lit(EnvUseKubeScheduler, "true"), lit(EnvHookTemplate, "/t/x.yaml"), lit(EnvPrepareJobTimeout, "120"),
			lit(EnvRequireJobContainer, "true"), lit(EnvClaimName, "work")},
			want: hookEnv{script: "/home/runner/k8s-novolume/index.js", podName: "r1", namespace: "jobs", useKubeScheduler: true, template: "/t/x.yaml",
				prepareTimeout: 120 * time.Second, requireJobContainer: true, claimName: "work", noVolume: true}},
		{name: "Gantry's wrapper", wantOK: true, env: []corev1.EnvVar{lit(EnvContainerHooks, runner.HookWrapperPath),
			lit(EnvWrappedHook, "/home/runner/k8s-novolume/index.js"), lit(EnvPodName, "r1")},
			want: hookEnv{script: "/home/runner/k8s-novolume/index.js", podName: "r1", namespace: "ci", prepareTimeout: DefaultPrepareJobTimeout,
				noVolume: true, wrapped: true}},
		{name: "Gantry's wrapper without the hook", env: []corev1.EnvVar{lit(EnvContainerHooks, runner.HookWrapperPath)}, wantErr: "without " + EnvWrappedHook},
		{name: "an invalid timeout keeps the default", wantOK: true, env: []corev1.EnvVar{lit(EnvContainerHooks, "h"), lit(EnvPrepareJobTimeout, "-5")},
			want: hookEnv{script: "h", namespace: "ci", prepareTimeout: DefaultPrepareJobTimeout}},
		{name: "other variables from Secrets are not the hook's", wantOK: true, env: []corev1.EnvVar{lit(EnvContainerHooks, "h"), {Name: "ACTIONS_RUNNER_INPUT_JITCONFIG",
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "jit"}}}},
			want: hookEnv{script: "h", namespace: "ci", prepareTimeout: DefaultPrepareJobTimeout}},
		{name: "a hook setting from a ConfigMap", env: []corev1.EnvVar{lit(EnvContainerHooks, "h"), {Name: EnvHookNamespace,
			ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "ns"}}}}, wantErr: "does not read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r1", Namespace: "ci"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Env: tc.env}}}}
			got, ok, err := hookEnvOf(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.wantOK {
				t.Fatalf("ok, err = %v, %v; want %v", ok, err, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(hookEnv{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceContainerName(t *testing.T) {
	for image, want := range map[string]string{
		"postgres:17": "postgres", "docker.io/library/redis": "redis", "ghcr.io/acme/tools/db:1.2": "db", "localhost:5000/mysql:8": "mysql",
	} {
		if got := serviceContainerName(image); got != want {
			t.Errorf("serviceContainerName(%q) = %q, want %q", image, got, want)
		}
	}
}

// Gantry's fence (config/container-hooks: the admission policy on what a hook token may
// write) lets the hook do everything it does for its own job: the permission reviews,
// its workflow pod (no ServiceAccount token, through the template), its Secret, the
// deletes of cleanup_job.
func TestHookPassesGantrysFence(t *testing.T) {
	w := newWorld(t, 0)
	ns := &corev1.Namespace{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: w.ns}, ns); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if err := env.Client.Patch(t.Context(), ns, patch); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(containerhooks.AdmissionPolicy), "\n---")
	policy, binding := &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if len(docs) != 2 {
		t.Fatalf("config/container-hooks/admission-policy.yaml has %d documents, want the policy and its binding", len(docs))
	}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		t.Fatal(err)
	}
	// Cluster-wide: its own names, so that it meets no other test's.
	policy.Name, binding.Name, binding.Spec.PolicyName = w.ns, w.ns, w.ns
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: w.ns}}}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	// Gantry names a pool's ServiceAccount POOL-container-hook: the policy's subject.
	w.hookIdentity("linux-container-hook", hookRules())
	tmpl := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "hook-template"},
		Data: map[string]string{"workflow.yaml": "spec:\n  automountServiceAccountToken: false\n"}}
	if err := env.Client.Create(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	k := w.kubelet()
	a := w.start(Options{})
	job := w.queue(simgithub.JobSpec{Container: "node:22", Services: map[string]string{"db": "postgres:17"}})
	time.Sleep(2 * time.Second) // the policy takes a moment to be loaded
	w.runnerPod("r1", "node-a", hooked("linux-container-hook", corev1.EnvVar{Name: EnvHookTemplate, Value: "/t/workflow.yaml"}),
		func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "t", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hook-template"}}}})
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "t", MountPath: "/t"})
		})
	eventually(t, "the runner to report the job", func() bool { return completed(a, "r1") != nil })
	if j, _ := w.sim.Job(job.ID); j.Conclusion != simgithub.ConclusionSuccess {
		t.Errorf("job concluded %q with %+v, want success", j.Conclusion, completed(a, "r1"))
	}
	if _, made := k.pod("r1-workflow"); !made {
		t.Error("no workflow pod was made")
	}
	if pods, secrets := w.leftovers(); len(pods)+len(secrets) != 0 {
		t.Errorf("left behind: workflow pods %v, Secrets %v", pods, secrets)
	}
	// The fence was on: without the template, the workflow pod would get a token, and
	// the policy refuses it.
	job2 := w.queue(simgithub.JobSpec{Container: "node:22"})
	w.runnerPod("r2", "node-a", hooked("linux-container-hook"))
	eventually(t, "the second runner to report its job", func() bool { return completed(a, "r2") != nil })
	e := completed(a, "r2")
	if j, _ := w.sim.Job(job2.ID); j.Conclusion != simgithub.ConclusionFailure ||
		!strings.HasPrefix(e.Cause, "failed to create job pod: ") || !strings.Contains(e.Cause, "automountServiceAccountToken") {
		t.Errorf("job concluded %q with %+v: want failure, the policy's refusal of a token-bearing workflow pod", j.Conclusion, e)
	}
}
