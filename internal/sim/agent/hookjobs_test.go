package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/hookrelease"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// baseline makes the world's namespace enforce Pod Security baseline, as Gantry asks of
// the namespaces where hooks work.
func (w *world) baseline() {
	w.t.Helper()
	ns := &corev1.Namespace{}
	if err := env.Client.Get(w.t.Context(), client.ObjectKey{Name: w.ns}, ns); err != nil {
		w.t.Fatal(err)
	}
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if err := env.Client.Patch(w.t.Context(), ns, patch); err != nil {
		w.t.Fatal(err)
	}
}

// wrapped configures a runner pod as Gantry does in Kubernetes mode: the runner runs
// Gantry's wrapper, which runs the no-volume hook, with the template (JSON) of ConfigMap
// "hook" at runner.HookTemplateDir, made here with template. direct is the same without
// the wrapper: the runner runs GitHub's hook itself.
func (w *world) wrapped(sa, template string) func(*corev1.Pod) {
	return w.hookConfig(template, hookedWith(runner.HookWrapperPath, sa,
		corev1.EnvVar{Name: EnvWrappedHook, Value: "/home/runner/k8s-novolume/index.js"}, templateEnv))
}

func (w *world) direct(sa, template string) func(*corev1.Pod) {
	return w.hookConfig(template, hooked(sa, templateEnv))
}

var templateEnv = corev1.EnvVar{Name: EnvHookTemplate, Value: runner.HookTemplateDir + "/" + runner.HookTemplateKey}

func (w *world) hookConfig(template string, withEnv func(*corev1.Pod)) func(*corev1.Pod) {
	w.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "hook"}, Data: map[string]string{runner.HookTemplateKey: template}}
	if err := env.Client.Create(w.t.Context(), cm); err != nil {
		w.t.Fatal(err)
	}
	return func(p *corev1.Pod) {
		withEnv(p)
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "hook", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hook"}}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "hook", MountPath: runner.HookTemplateDir})
	}
}

// noToken is the part of Gantry's template the tests need: no ServiceAccount token.
const noToken = `{"spec":{"automountServiceAccountToken":false}}`

// portMappedJob has a job container and two services, one mapping its port to the
// node's, the other declaring none, and registry credentials.
var portMappedJob = simgithub.JobSpec{Container: "node:22", Services: map[string]string{"postgres": "postgres:17", "redis": "docker.io/library/redis:7"},
	ContainerOptions: &runnerapi.ContainerOptions{Ports: []string{"8080:80"}, ServicePorts: map[string][]string{"postgres": {"5432:5432"}}, Credentials: true}}

// Port mappings as people write them: GitHub's hook alone turns them into hostPorts,
// which Pod Security baseline refuses (the job fails with the API server's word); behind
// Gantry's wrapper no hostPort reaches the cluster, each service is reached at its
// name (hostAliases to the pod's loopback) and container port, and the job is green.
func TestPortMappedServices(t *testing.T) {
	// run runs portMappedJob on runner pod r1 configured by setup, in a namespace that
	// enforces baseline.
	run := func(t *testing.T, setup func(w *world) func(*corev1.Pod)) (*world, *kubelet, *Agents, simgithub.Job) {
		w := newWorld(t, 0)
		w.baseline()
		w.hookIdentity("runner-sa", hookRules())
		k := w.kubelet()
		a := w.start(Options{})
		job := w.queue(portMappedJob)
		w.runnerPod("r1", "node-a", setup(w))
		eventually(t, "the runner to report the job", func() bool { return completed(a, "r1") != nil })
		return w, k, a, job
	}
	t.Run("the hook alone", func(t *testing.T) {
		t.Parallel()
		w, k, a, job := run(t, func(*world) func(*corev1.Pod) { return hooked("runner-sa") })
		e := completed(a, "r1")
		if j, _ := w.sim.Job(job.ID); j.Conclusion != simgithub.ConclusionFailure || !strings.HasPrefix(e.Cause, hookrelease.MsgCreateJobPodFailed) ||
			!strings.Contains(e.Cause, `violates PodSecurity "baseline:latest": hostPort`) || !strings.Contains(e.Cause, `"postgres"`) || !strings.Contains(e.Cause, "5432") {
			t.Errorf("job concluded %q with %+v: want failure, Pod Security's refusal of the hostPorts", j.Conclusion, e)
		}
		if _, made := k.pod("r1-workflow"); made {
			t.Error("a workflow pod was made")
		}
		if pods, secrets := w.leftovers(); len(pods)+len(secrets) != 0 {
			t.Errorf("left behind after cleanup_job: workflow pods %v, Secrets %v", pods, secrets)
		}
	})
	t.Run("behind the wrapper", func(t *testing.T) {
		t.Parallel()
		w, k, a, job := run(t, func(w *world) func(*corev1.Pod) { return w.wrapped("runner-sa", noToken) })
		if j, _ := w.sim.Job(job.ID); j.Conclusion != simgithub.ConclusionSuccess {
			t.Fatalf("job concluded %q with %+v, want success", j.Conclusion, completed(a, "r1"))
		}
		wp, ok := k.pod("r1-workflow")
		if !ok {
			t.Fatal("no workflow pod was made")
		}
		ports := map[string][]corev1.ContainerPort{}
		for _, c := range wp.Spec.Containers {
			ports[c.Name] = c.Ports
		}
		want := map[string][]corev1.ContainerPort{
			"job":      {{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
			"postgres": {{ContainerPort: 5432, Protocol: corev1.ProtocolTCP}},
			"redis":    nil,
		}
		if diff := cmp.Diff(want, ports); diff != "" {
			t.Errorf("workflow pod ports (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"postgres", "redis"}}}, wp.Spec.HostAliases); diff != "" {
			t.Errorf("workflow pod hostAliases (-want +got):\n%s", diff)
		}
		if ps := wp.Spec.ImagePullSecrets; len(ps) != 1 || !strings.HasPrefix(ps[0].Name, hookrelease.SecretPrefix("r1")) {
			t.Errorf("imagePullSecrets %v: want the hook's registry Secret", ps)
		}
		for _, e := range a.Events() {
			if e.HostPorts != 0 {
				t.Errorf("event %+v: a pod with a hostPort", e)
			}
		}
		if pods, secrets := w.leftovers(); len(pods)+len(secrets) != 0 {
			t.Errorf("left behind: workflow pods %v, Secrets %v", pods, secrets)
		}
	})
}

// A Secret the hook made before the API server refused its workflow pod (here: the
// template asks for the node's network, which baseline refuses) stays until cleanup_job
// with GitHub's hook alone, and is gone as prepare_job returns behind Gantry's wrapper.
func TestWrapperRemovesTheSecretOfARefusedPod(t *testing.T) {
	for _, wrap := range []bool{false, true} {
		t.Run(map[bool]string{false: "the hook alone", true: "behind the wrapper"}[wrap], func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, 0)
			w.baseline()
			w.hookIdentity("runner-sa", hookRules())
			const template = `{"spec":{"automountServiceAccountToken":false,"hostNetwork":true}}`
			var setup func(*corev1.Pod)
			if wrap {
				setup = w.wrapped("runner-sa", template)
			} else {
				setup = w.direct("runner-sa", template)
			}
			w.runnerPod("r1", "node-a", setup) // no agent runs: prepare_job is called here
			a, err := New(env.Config, w.ns, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := &corev1.Pod{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: w.ns, Name: "r1"}, p); err != nil {
				t.Fatal(err)
			}
			he, _, err := hookEnvOf(p)
			if err != nil {
				t.Fatal(err)
			}
			h, err := a.newHook(t.Context(), p, he)
			if err != nil {
				t.Fatal(err)
			}
			job := runnerapi.Job{Container: portMappedJob.Container, ContainerOptions: &runnerapi.ContainerOptions{Credentials: true}}
			_, err = h.prepareJob(t.Context(), prepareArgs(&job))
			if err == nil || !strings.Contains(err.Error(), "hostNetwork") {
				t.Fatalf("prepare_job: %v; want the refusal of the node's network", err)
			}
			_, secrets := w.leftovers()
			if wrap != (len(secrets) == 0) {
				t.Errorf("registry Secrets after the failed prepare_job: %v", secrets)
			}
		})
	}
}

// Image actions run in step pods, named, labeled and made of the template as the hook
// makes them, deleted after the step; a Dockerfile action fails its job at once, with
// GitHub's hook's message alone and with one naming the step, the action and the way
// out behind Gantry's wrapper, which also refuses an image action without entrypoint.
func TestContainerSteps(t *testing.T) {
	lint := runnerapi.ContainerStep{Name: "lint", Image: "alpine:3.20", Entrypoint: "sh"}
	tests := []struct {
		name      string
		wrapped   bool
		steps     []runnerapi.ContainerStep
		wantCause string
		wantSteps int
	}{
		{name: "an image action", wrapped: true, steps: []runnerapi.ContainerStep{lint}, wantSteps: 1},
		{name: "an image action without the wrapper", steps: []runnerapi.ContainerStep{lint}, wantSteps: 1},
		{name: "a Dockerfile action after an image action", wrapped: true,
			steps:     []runnerapi.ContainerStep{lint, {Name: "build-image", Action: "acme/build-image@v1"}},
			wantCause: `step "build-image": ` + refusedStep(stepArgs(runnerapi.ContainerStep{Action: "acme/build-image@v1"})), wantSteps: 1},
		{name: "a Dockerfile action without the wrapper", steps: []runnerapi.ContainerStep{{Name: "build-image", Action: "acme/build-image@v1"}},
			wantCause: `step "build-image": ` + hookrelease.MsgDockerfileAction},
		{name: "an image action without entrypoint", wrapped: true, steps: []runnerapi.ContainerStep{{Name: "lint", Image: "alpine:3.20"}},
			wantCause: `step "lint": ` + refusedStep(hookContainer{Image: "alpine:3.20"})},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A runner pod name of its own: the agents watch every namespace's hook pods.
			r := fmt.Sprintf("steps%d", i)
			w := newWorld(t, 0)
			w.baseline()
			w.hookIdentity("runner-sa", hookRules())
			k := w.kubelet()
			a := w.start(Options{})
			job := w.queue(simgithub.JobSpec{Container: "node:22", ContainerOptions: &runnerapi.ContainerOptions{Steps: tc.steps}})
			const template = `{"metadata":{"labels":{"team":"ci"}},"spec":{"automountServiceAccountToken":false}}`
			var setup func(*corev1.Pod)
			if tc.wrapped {
				setup = w.wrapped("runner-sa", template)
			} else {
				setup = w.direct("runner-sa", template)
			}
			w.runnerPod(r, "node-a", setup)
			eventually(t, "the runner to report the job", func() bool { return completed(a, r) != nil })
			e := completed(a, r)
			j, _ := w.sim.Job(job.ID)
			if tc.wantCause == "" && (j.Conclusion != simgithub.ConclusionSuccess || e.Cause != "") {
				t.Errorf("job concluded %q with %+v, want success", j.Conclusion, e)
			}
			if tc.wantCause != "" && (j.Conclusion != simgithub.ConclusionFailure || e.Cause != tc.wantCause) {
				t.Errorf("job concluded %q with cause %q, want failure with %q", j.Conclusion, e.Cause, tc.wantCause)
			}
			var steps []corev1.Pod
			for name, p := range k.all() {
				if strings.HasPrefix(name, hookrelease.StepPodPrefix(r)) {
					steps = append(steps, p)
				}
			}
			if len(steps) != tc.wantSteps {
				t.Fatalf("%d step pods made, want %d", len(steps), tc.wantSteps)
			}
			for _, sp := range steps {
				c := sp.Spec.Containers
				if len(sp.Name) != len(hookrelease.StepPodPrefix(r))+hookrelease.SuffixLength || sp.Labels[LabelRunnerPod] != r ||
					sp.Labels["team"] != "ci" || sp.Spec.AutomountServiceAccountToken == nil || *sp.Spec.AutomountServiceAccountToken ||
					len(c) != 1 || c[0].Name != "job" || c[0].Image != "alpine:3.20" || strings.Join(c[0].Command, " ") != "tail" {
					t.Errorf("step pod %s: labels %v, automount %v, containers %+v", sp.Name, sp.Labels, sp.Spec.AutomountServiceAccountToken, c)
				}
			}
			kinds := func() []string {
				var out []string
				for _, ev := range a.Events() {
					if strings.HasPrefix(ev.Kind, "step-pod") && ev.Pod == r {
						out = append(out, ev.Kind)
					}
				}
				return out
			}
			var wantKinds []string
			for range tc.wantSteps {
				wantKinds = append(wantKinds, EventStepPodCreated, EventStepPodRunning, EventStepPodDeleted)
			}
			eventually(t, "the step pods' events", func() bool { return len(kinds()) >= len(wantKinds) })
			if diff := cmp.Diff(wantKinds, kinds()); diff != "" {
				t.Errorf("step pod events (-want +got):\n%s", diff)
			}
			if pods, secrets := w.leftovers(); len(pods)+len(secrets) != 0 {
				t.Errorf("left behind: pods %v, Secrets %v", pods, secrets)
			}
		})
	}
}
