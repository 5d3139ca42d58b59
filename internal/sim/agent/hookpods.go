package agent

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/internal/hookrelease"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// This file is the hook's input as the runner writes it, and the pods and Secrets the
// hook makes of it (hookrelease's table: runner-container-hooks v0.8.1).

// hookContainer is a container of the runner's hook input (actions/runner
// ContainerHooks/HookInput.cs, HookContainer; the hook's ContainerInfo), in its JSON.
type hookContainer struct {
	Image                string            `json:"image,omitempty"`
	Dockerfile           string            `json:"dockerfile,omitempty"`
	EntryPoint           string            `json:"entryPoint,omitempty"`
	EntryPointArgs       []string          `json:"entryPointArgs,omitempty"`
	Registry             *hookRegistry     `json:"registry,omitempty"`
	EnvironmentVariables map[string]string `json:"environmentVariables,omitempty"`
	PortMappings         []string          `json:"portMappings,omitempty"`
	// ContextName is a service's key. The hook's types have it; actions/runner never
	// sends it (HookContainer has no name), and neither does the simulated runner.
	ContextName string `json:"contextName,omitempty"`
}

// hookRegistry is a container's registry login (`credentials:`).
type hookRegistry struct {
	Username  string `json:"username,omitempty"`
	Password  string `json:"password,omitempty"`
	ServerURL string `json:"serverUrl"`
}

// prepareJobArgs are prepare_job's arguments.
type prepareJobArgs struct {
	Container *hookContainer  `json:"container,omitempty"`
	Services  []hookContainer `json:"services,omitempty"`
}

// prepareArgs is prepare_job's input for job j, as the runner writes it: the job
// container and the services (in the order of their names: the simulator's job keeps
// them in a map), with their ports and the container's registry login.
func prepareArgs(j *runnerapi.Job) prepareJobArgs {
	opts := j.ContainerOptions
	if opts == nil {
		opts = &runnerapi.ContainerOptions{}
	}
	var args prepareJobArgs
	if j.Container != "" {
		args.Container = &hookContainer{Image: j.Container, PortMappings: slices.Clone(opts.Ports)}
		if opts.Credentials {
			args.Container.Registry = &hookRegistry{Username: "sim", Password: "sim-registry-password", ServerURL: registryOf(j.Container)}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(j.Services)) {
		args.Services = append(args.Services, hookContainer{Image: j.Services[name], PortMappings: slices.Clone(opts.ServicePorts[name])})
	}
	return args
}

// registryOf is the registry host of image (actions/runner DockerUtil
// ParseRegistryHostnameFromImageName): its first path element when that has a dot or a
// colon or is localhost, else "" (Docker Hub).
func registryOf(image string) string {
	first, _, found := strings.Cut(image, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return ""
}

// stepArgs is run_container_step's input for step st: an image action's image and
// entrypoint, or a Dockerfile action's Dockerfile under the runner's _actions directory.
func stepArgs(st runnerapi.ContainerStep) hookContainer {
	if st.Action != "" {
		repo, ref, _ := strings.Cut(st.Action, "@")
		return hookContainer{Dockerfile: "/home/runner/_work/_actions/" + repo + "/" + ref + "/Dockerfile"}
	}
	return hookContainer{Image: st.Image, EntryPoint: st.Entrypoint}
}

// containerPorts are a container's ports as the hook writes them (containerPorts): "C"
// a containerPort, "H:C" a containerPort with hostPort H; "/udp" or "/tcp" after it the
// protocol (default TCP).
func containerPorts(mappings []string) ([]corev1.ContainerPort, error) {
	var ports []corev1.ContainerPort
	for _, m := range mappings {
		protoSplit := strings.Split(m, "/")
		if len(protoSplit) > 2 {
			return nil, &errHook{msg: "Unexpected port format: " + m} // the hook's words
		}
		port := corev1.ContainerPort{Protocol: corev1.ProtocolTCP}
		if len(protoSplit) == 2 {
			port.Protocol = corev1.Protocol(strings.ToUpper(protoSplit[1]))
		}
		parts := strings.Split(protoSplit[0], ":")
		if len(parts) > 2 {
			return nil, fmt.Errorf(`ports should have at most one ":" separator`)
		}
		parse := func(p string) (int32, error) {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return 0, fmt.Errorf("invalid container port: %s", p)
			}
			return int32(n), nil
		}
		var err error
		if len(parts) == 1 {
			port.ContainerPort, err = parse(parts[0])
		} else if port.HostPort, err = parse(parts[0]); err == nil {
			port.ContainerPort, err = parse(parts[1])
		}
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// hookVolumes are the no-volume hook's pod volumes and the mounts of its containers
// (CONTAINER_VOLUMES).
var (
	hookVolumeNames = []string{"externals", "github", "work"}
	hookMounts      = []corev1.VolumeMount{{Name: "externals", MountPath: "/__e"}, {Name: "work", MountPath: "/__w"}, {Name: "github", MountPath: "/github"}}
)

func emptyDirs() []corev1.Volume {
	var vs []corev1.Volume
	for _, n := range hookVolumeNames {
		vs = append(vs, corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return vs
}

// containerSpec is a container of the workflow pod (createContainerSpec): the job
// container runs `tail -f /dev/null` unless it names an entrypoint; its ports, its
// environment with GITHUB_ACTIONS and CI.
func containerSpec(c hookContainer, name string, job bool) (corev1.Container, error) {
	ports, err := containerPorts(c.PortMappings)
	if err != nil {
		return corev1.Container{}, err
	}
	out := corev1.Container{Name: name, Image: c.Image, Ports: ports, VolumeMounts: slices.Clone(hookMounts)}
	entry, args := c.EntryPoint, c.EntryPointArgs
	if entry == "" && job {
		entry, args = "tail", []string{"-f", "/dev/null"}
	}
	if entry != "" {
		out.Command = []string{entry}
	}
	out.Args = args
	for _, k := range slices.Sorted(maps.Keys(c.EnvironmentVariables)) {
		if v := c.EnvironmentVariables[k]; v != "" && k != "HOME" {
			out.Env = append(out.Env, corev1.EnvVar{Name: k, Value: v})
		}
	}
	out.Env = append(out.Env, corev1.EnvVar{Name: "GITHUB_ACTIONS", Value: "true"})
	if _, ok := c.EnvironmentVariables["CI"]; !ok {
		out.Env = append(out.Env, corev1.EnvVar{Name: "CI", Value: "true"})
	}
	return out, nil
}

// serviceContainerName is the hook's name for a service's container: the image's
// last path element without its tag (generateContainerName).
func serviceContainerName(image string) string {
	name := image[strings.LastIndex(image, "/")+1:]
	name, _, _ = strings.Cut(name, ":")
	return name
}

// noVolumeWorkflowPod is the no-volume hook's workflow pod for args (createJobPod),
// before the template: the job container, a container per service, the fs-init
// container of the runner image, three emptyDirs, fsGroup 1001.
func (h *hook) noVolumeWorkflowPod(args prepareJobArgs) (*corev1.Pod, error) {
	job, err := containerSpec(*args.Container, hookrelease.JobContainer, true)
	if err != nil {
		return nil, hookFailed("%v", err)
	}
	containers := []corev1.Container{job}
	for _, s := range args.Services {
		c, err := containerSpec(s, serviceContainerName(s.Image), false)
		if err != nil {
			return nil, hookFailed("%v", err)
		}
		containers = append(containers, c)
	}
	image := h.env.runnerImage
	if image == "" {
		image = hookrelease.DefaultRunnerImage
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: hookrelease.WorkflowPodName(h.env.podName), Namespace: h.env.namespace,
			Labels: map[string]string{LabelRunnerPod: h.env.podName}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			Containers:      containers,
			SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1001)},
			InitContainers: []corev1.Container{{Name: hookrelease.FSInitContainer, Image: image,
				Command:         []string{"sh", "-c", "mkdir -p /mnt/externals && mkdir -p /mnt/work && mkdir -p /mnt/github && mv /home/runner/externals/* /mnt/externals/"},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1001), RunAsGroup: ptr.To[int64](1001)},
				VolumeMounts: []corev1.VolumeMount{{Name: "externals", MountPath: "/mnt/externals"}, {Name: "work", MountPath: "/mnt/work"},
					{Name: "github", MountPath: "/mnt/github"}}}},
			RestartPolicy: corev1.RestartPolicyNever,
			Volumes:       emptyDirs(),
		},
	}, nil
}

// stepPod is the no-volume hook's step pod for an image action (createContainerStepPod),
// before the template: the step's image as container "job" running `tail -f /dev/null`
// in /__w, three emptyDirs, no service.
func (h *hook) stepPod(step hookContainer) *corev1.Pod {
	suffix := make([]byte, hookrelease.SuffixLength/2)
	_, _ = rand.Read(suffix)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: hookrelease.StepPodPrefix(h.env.podName) + hex.EncodeToString(suffix), Namespace: h.env.namespace,
			Labels: map[string]string{LabelRunnerPod: h.env.podName}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: hookrelease.JobContainer, Image: step.Image, WorkingDir: "/__w",
				Command: []string{"tail"}, Args: []string{"-f", "/dev/null"}, VolumeMounts: slices.Clone(hookMounts)}},
			RestartPolicy: corev1.RestartPolicyNever,
			Volumes:       emptyDirs(),
		},
	}
}

// registrySecret is the kubernetes.io/dockerconfigjson Secret the hook makes of a
// registry login (createDockerSecret).
func (h *hook) registrySecret(r *hookRegistry) *corev1.Secret {
	suffix := make([]byte, hookrelease.SuffixLength/2)
	_, _ = rand.Read(suffix)
	server := r.ServerURL
	if server == "" {
		server = "https://index.docker.io/v1/"
	}
	auth := base64.StdEncoding.EncodeToString([]byte(r.Username + ":" + r.Password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{server: map[string]string{"username": r.Username, "password": r.Password, "auth": auth}}})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: hookrelease.SecretPrefix(h.env.podName) + hex.EncodeToString(suffix), Namespace: h.env.namespace,
			Labels: map[string]string{LabelRunnerPod: h.env.podName}},
		Immutable: ptr.To(true),
		Type:      corev1.SecretTypeDockerConfigJson,
		Data:      map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}
}
