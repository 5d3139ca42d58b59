package examples

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/internal/controller/runner"
)

// workflowJob is what a workflow job asks of the hook: its container and services.
type workflowJob struct {
	image    string
	services map[string]string // container name (the hook's: the image's last path element) → image
	ports    map[string][]string
}

// hookWorkflowPod is the workflow pod that actions/runner-container-hooks v0.8.1 (the
// no-volume hook, packages/k8s) creates for a job of runner pod runnerPod, read from
// that release's source:
//   - hooks/prepare-job.ts createContainerSpec: the job container (entrypoint
//     `tail -f /dev/null`, env GITHUB_ACTIONS and CI, the three volume mounts of
//     k8s/utils.ts CONTAINER_VOLUMES), a container per service, `ports` as
//     containerPort or, for "HOST:CONTAINER", hostPort (k8s/index.ts containerPorts); a
//     template container named "$NAME" merged into container NAME
//     (k8s/utils.ts mergeContainerWithOptions: env, volumeMounts and ports appended,
//     name and image kept, anything else replaced);
//   - k8s/index.ts createJobPod: label runner-pod, restartPolicy Never, pod
//     securityContext fsGroup 1001, emptyDir volumes externals, github and work, and the
//     init container fs-init — the runner image (ACTIONS_RUNNER_IMAGE, by default
//     ghcr.io/actions/actions-runner:latest) running `sh -c "mkdir -p … && mv
//     /home/runner/externals/* /mnt/externals/"` with securityContext runAsUser 1001,
//     runAsGroup 1001 and nothing else;
//   - then the hook template (ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE) merged
//     (k8s/utils.ts mergeObjectMeta, mergePodSpecWithOptions: labels and annotations
//     merged; containers appended but "$…" ones; volumes appended; every other spec
//     field replaced).
func hookWorkflowPod(t *testing.T, runnerPod string, job workflowJob, template []byte) *corev1.Pod {
	t.Helper()
	mounts := []corev1.VolumeMount{{Name: "externals", MountPath: "/__e"}, {Name: "work", MountPath: "/__w"}, {Name: "github", MountPath: "/github"}}
	env := []corev1.EnvVar{{Name: "GITHUB_ACTIONS", Value: "true"}, {Name: "CI", Value: "true"}}
	container := func(name, image string, ports []string) corev1.Container {
		c := corev1.Container{Name: name, Image: image, Env: env, VolumeMounts: mounts}
		for _, p := range ports {
			host, ctr, mapped := strings.Cut(p, ":")
			port := corev1.ContainerPort{Protocol: corev1.ProtocolTCP, ContainerPort: atoi(t, host)}
			if mapped {
				port.HostPort, port.ContainerPort = atoi(t, host), atoi(t, ctr)
			}
			c.Ports = append(c.Ports, port)
		}
		return c
	}
	jobContainer := container("job", job.image, job.ports["job"])
	jobContainer.Command, jobContainer.Args = []string{"tail"}, []string{"-f", "/dev/null"}
	containers := []corev1.Container{jobContainer}
	for name, image := range job.services {
		containers = append(containers, container(name, image, job.ports[name]))
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: runnerPod + "-workflow", Labels: map[string]string{"runner-pod": runnerPod}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			Containers:      containers,
			SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1001)},
			InitContainers: []corev1.Container{{
				Name: "fs-init", Image: "ghcr.io/actions/actions-runner:latest",
				Command:         []string{"sh", "-c", "mkdir -p /mnt/externals && mkdir -p /mnt/work && mkdir -p /mnt/github && mv /home/runner/externals/* /mnt/externals/"},
				SecurityContext: &corev1.SecurityContext{RunAsGroup: ptr.To[int64](1001), RunAsUser: ptr.To[int64](1001)},
				VolumeMounts: []corev1.VolumeMount{{Name: "externals", MountPath: "/mnt/externals"}, {Name: "work", MountPath: "/mnt/work"},
					{Name: "github", MountPath: "/mnt/github"}},
			}},
			RestartPolicy: corev1.RestartPolicyNever,
			Volumes: []corev1.Volume{{Name: "externals", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "github", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	mergeHookTemplate(t, pod, template)
	return pod
}

func atoi(t *testing.T, s string) int32 {
	t.Helper()
	var n int32
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		t.Fatalf("port %q: %v", s, err)
	}
	return n
}

// mergeHookTemplate merges a hook template into the workflow pod as v0.8.1 does (see
// hookWorkflowPod), working on the JSON forms so that "a field the template sets" means
// what it means in the hook's TypeScript: present in the template.
func mergeHookTemplate(t *testing.T, pod *corev1.Pod, template []byte) {
	t.Helper()
	var tmpl struct {
		Metadata metav1.ObjectMeta          `json:"metadata"`
		Spec     map[string]json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(template, &tmpl); err != nil {
		t.Fatal(err)
	}
	for k, v := range tmpl.Metadata.Labels {
		pod.Labels[k] = v
	}
	for k, v := range tmpl.Metadata.Annotations {
		pod.Annotations[k] = v
	}
	var ext []corev1.Container
	if raw, ok := tmpl.Spec["containers"]; ok {
		if err := json.Unmarshal(raw, &ext); err != nil {
			t.Fatal(err)
		}
	}
	// createContainerSpec: "$NAME" extends container NAME, before the pod is made.
	var rawExt []map[string]json.RawMessage
	if raw, ok := tmpl.Spec["containers"]; ok {
		if err := json.Unmarshal(raw, &rawExt); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range ext {
		target, isExt := strings.CutPrefix(e.Name, "$")
		for j := range pod.Spec.Containers {
			c := &pod.Spec.Containers[j]
			if !isExt || c.Name != target {
				continue
			}
			for key := range rawExt[i] {
				switch key {
				case "name", "image":
				case "env":
					c.Env = append(c.Env, e.Env...)
				case "volumeMounts":
					c.VolumeMounts = append(c.VolumeMounts, e.VolumeMounts...)
				case "ports":
					c.Ports = append(c.Ports, e.Ports...)
				default:
					replaceField(t, c, key, rawExt[i][key])
				}
			}
		}
		if !isExt {
			pod.Spec.Containers = append(pod.Spec.Containers, e)
		}
	}
	// mergePodSpecWithOptions: volumes appended, any other field replaced.
	for key, raw := range tmpl.Spec {
		switch key {
		case "containers":
		case "volumes":
			var vs []corev1.Volume
			if err := json.Unmarshal(raw, &vs); err != nil {
				t.Fatal(err)
			}
			pod.Spec.Volumes = append(pod.Spec.Volumes, vs...)
		default:
			replaceField(t, &pod.Spec, key, raw)
		}
	}
}

// replaceField sets field key of *obj (a JSON-tagged struct) to raw.
func replaceField(t *testing.T, obj any, key string, raw json.RawMessage) {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = raw
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, obj); err != nil {
		t.Fatal(err)
	}
}

// admitWorkflowPod creates the workflow pod in a new namespace enforcing level.
func admitWorkflowPod(t *testing.T, pod *corev1.Pod, level string) error {
	t.Helper()
	pod = pod.DeepCopy()
	pod.Namespace = namespaceEnforcing(t, level)
	return env.Client.Create(ctx(t), pod)
}

// The Pod Security level a Kubernetes-mode workflow pod needs, as docs/security.md and
// docs/container-jobs.md state it: the pod v0.8.1 of the hook makes, with the hook
// template Gantry writes for examples/container-jobs.yaml, for a job with a container
// and a service, is admitted at baseline and refused at restricted — for its fs-init
// init container, whatever the pool's workflowPodTemplate sets, since Gantry's template
// can only replace a whole spec field and the hook's initContainers are not one it
// offers. A service published on a host port is refused at baseline.
func TestWorkflowPodPodSecurityLevels(t *testing.T) {
	pool := examplePool(t, filepath.Join(root(t), "examples", "container-jobs.yaml"))
	job := workflowJob{image: "node:22", services: map[string]string{"postgres": "postgres:17"}}
	pod := hookWorkflowPod(t, "linux-containers-abcde", job, runner.WorkflowPodTemplateJSON(pool))
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Name != "fs-init" {
		t.Fatalf("the workflow pod has init containers %v, want fs-init", pod.Spec.InitContainers)
	}
	if err := admitWorkflowPod(t, pod, "baseline"); err != nil {
		t.Errorf("the workflow pod of examples/container-jobs.yaml is refused at baseline: %v", err)
	}
	err := admitWorkflowPod(t, pod, "restricted")
	if err == nil || !strings.Contains(err.Error(), `"fs-init"`) {
		t.Errorf("the workflow pod at restricted: %v; want a refusal that names fs-init", err)
	} else {
		t.Logf("restricted refuses the workflow pod: %v", err)
	}

	// The strictest pool: every restricted field in the workflow pod template. The job
	// container and the pod then meet restricted; fs-init still does not.
	strict := pool.DeepCopy()
	strict.Spec.ContainerMode.WorkflowPodTemplate.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
		RunAsUser: ptr.To[int64](1001), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	strict.Spec.ContainerMode.WorkflowPodTemplate.JobContainerSecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	strictPod := hookWorkflowPod(t, "linux-containers-fghij", workflowJob{image: "node:22"}, runner.WorkflowPodTemplateJSON(strict))
	err = admitWorkflowPod(t, strictPod, "restricted")
	if err == nil {
		t.Fatal("the strictest pool's workflow pod is admitted at restricted: docs/security.md says restricted refuses every v0.8.1 workflow pod")
	}
	if strings.Contains(err.Error(), `"job"`) {
		t.Errorf("restricted refuses the strictest pool's job container too: %v", err)
	}
	if !strings.Contains(err.Error(), `"fs-init"`) {
		t.Errorf("restricted refuses the strictest pool's workflow pod, not for fs-init: %v", err)
	}

	// A service published on the node (`ports: ["5432:5432"]`). The hook alone makes
	// it a hostPort, which baseline refuses; Gantry's wrapper
	// (config/container-hooks/hook.js, withoutHostPort) hands the hook "5432" instead,
	// a containerPort, which baseline admits.
	published := workflowJob{image: "node:22", services: map[string]string{"postgres": "postgres:17"}, ports: map[string][]string{"postgres": {"5432:5432"}}}
	err = admitWorkflowPod(t, hookWorkflowPod(t, "linux-containers-klmno", published, runner.WorkflowPodTemplateJSON(pool)), "baseline")
	if err == nil || !strings.Contains(err.Error(), "hostPort") {
		t.Errorf("the hook's own workflow pod for a service with ports [5432:5432] at baseline: %v; want refused for its hostPort", err)
	}
	wrapped := workflowJob{image: "node:22", services: map[string]string{"postgres": "postgres:17"}, ports: map[string][]string{"postgres": {"5432"}}}
	if err := admitWorkflowPod(t, hookWorkflowPod(t, "linux-containers-pqrst", wrapped, runner.WorkflowPodTemplateJSON(pool)), "baseline"); err != nil {
		t.Errorf("the workflow pod for a service with ports [5432:5432], through Gantry's wrapper (5432), at baseline: %v", err)
	}

	// What the docs say.
	for _, f := range []string{"docs/security.md", "docs/container-jobs.md"} {
		b, err := os.ReadFile(filepath.Join(root(t), f))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile("restricted`?\\*{0,2} refuses").Match(b) || !strings.Contains(string(b), "fs-init") {
			t.Errorf("%s does not say that restricted refuses the workflow pod for its fs-init init container", f)
		}
	}
}
