package agent

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/hookrelease"
)

// The runner's and the official Kubernetes hook's environment (actions/runner's
// container hooks ADR; hookrelease, the hook's release table).
const (
	// EnvContainerHooks names the hook script the runner runs for container jobs; a
	// runner container that sets it runs jobs' containers through the hook.
	EnvContainerHooks = hookrelease.EnvContainerHooks
	// EnvPodName is the runner pod's own name (the downward API's metadata.name).
	EnvPodName = hookrelease.EnvPodName
	// EnvHookNamespace is where the hook works; default the runner pod's namespace.
	EnvHookNamespace = hookrelease.EnvNamespace
	// EnvUseKubeScheduler "true" places the volume hook's workflow pod by node affinity
	// instead of nodeName; the no-volume hook never reads it.
	EnvUseKubeScheduler = hookrelease.EnvUseKubeScheduler
	// EnvHookTemplate is the path of the pod template merged into the hook's pods.
	EnvHookTemplate = hookrelease.EnvTemplate
	// EnvPrepareJobTimeout is how long, in seconds, the hook waits for a pod to run
	// (default 600).
	EnvPrepareJobTimeout = hookrelease.EnvPrepareJobTimeout
	// EnvRequireJobContainer "true" makes the runner refuse jobs without `container:`.
	EnvRequireJobContainer = hookrelease.EnvRequireJobContainer
	// EnvClaimName names the volume hook's work claim (default "<runner pod>-work").
	EnvClaimName = hookrelease.EnvClaimName
	// EnvRunnerImage is the image of the no-volume hook's fs-init container.
	EnvRunnerImage = hookrelease.EnvRunnerImage
	// EnvWrappedHook is the hook Gantry's wrapper runs, when EnvContainerHooks names the
	// wrapper (runner.HookWrapperPath).
	EnvWrappedHook = runner.EnvWrappedHook
)

// hookVars are the variables the hook reads.
var hookVars = map[string]bool{EnvContainerHooks: true, EnvPodName: true, EnvHookNamespace: true, EnvUseKubeScheduler: true,
	EnvHookTemplate: true, EnvPrepareJobTimeout: true, EnvRequireJobContainer: true, EnvClaimName: true, EnvRunnerImage: true,
	EnvWrappedHook: true}

// DefaultPrepareJobTimeout is the hook's wait for a pod when EnvPrepareJobTimeout is
// unset or invalid.
const DefaultPrepareJobTimeout = hookrelease.DefaultPrepareJobTimeout

// hookEnv is what the hook reads from its environment.
type hookEnv struct {
	// script is GitHub's hook: EnvContainerHooks, or behind Gantry's wrapper
	// EnvWrappedHook.
	script              string
	podName             string
	namespace           string
	useKubeScheduler    bool
	template            string
	prepareTimeout      time.Duration
	requireJobContainer bool
	claimName           string
	runnerImage         string
	// noVolume: the script is the no-volume hook (runner-container-hooks v0.8.0 and
	// later, which the official image ships as /home/runner/k8s-novolume): its workflow
	// pod mounts nothing of the runner's, gets the workspace by exec, and is placed by
	// the scheduler. Any other script plays the older volume hook (/home/runner/k8s).
	noVolume bool
	// wrapped: EnvContainerHooks is Gantry's wrapper (runner.HookWrapperPath), which
	// runs script (wrapper.go).
	wrapped bool
}

// hookEnvOf reads the hook's environment as the kubelet sets it in the pod's runner
// container: literal values and the downward API's pod fields. ok is false when no
// container of the pod sets EnvContainerHooks.
func hookEnvOf(p *corev1.Pod) (env hookEnv, ok bool, err error) {
	for _, c := range runnerContainers(p) {
		vars := map[string]string{}
		for _, e := range c.Env {
			v := e.Value
			if e.ValueFrom != nil {
				if e.ValueFrom.FieldRef == nil {
					if hookVars[e.Name] {
						return hookEnv{}, false, fmt.Errorf("container %s takes %s from a source the simulated runner does not read (literal values and pod fields only)", c.Name, e.Name)
					}
					continue
				}
				if v, err = podField(p, e.ValueFrom.FieldRef.FieldPath); err != nil {
					return hookEnv{}, false, fmt.Errorf("container %s, %s: %w", c.Name, e.Name, err)
				}
			}
			vars[e.Name] = v
		}
		script := vars[EnvContainerHooks]
		if script == "" {
			continue
		}
		wrapped := script == runner.HookWrapperPath
		if wrapped {
			if script = vars[EnvWrappedHook]; script == "" {
				return hookEnv{}, false, fmt.Errorf("container %s runs Gantry's container hook wrapper without %s", c.Name, EnvWrappedHook)
			}
		}
		env = hookEnv{
			script: script, podName: vars[EnvPodName], namespace: vars[EnvHookNamespace],
			useKubeScheduler: vars[EnvUseKubeScheduler] == "true", template: vars[EnvHookTemplate],
			prepareTimeout: DefaultPrepareJobTimeout, requireJobContainer: vars[EnvRequireJobContainer] == "true",
			claimName: vars[EnvClaimName], runnerImage: vars[EnvRunnerImage], noVolume: path.Base(path.Dir(script)) == "k8s-novolume",
			wrapped: wrapped,
		}
		if env.namespace == "" {
			// The in-cluster configuration's namespace: the one of the pod's token.
			env.namespace = p.Namespace
		}
		if s, ok := vars[EnvPrepareJobTimeout]; ok {
			// As the hook: anything but a positive integer keeps the default.
			if n, err := strconv.Atoi(s); err == nil && n > 0 {
				env.prepareTimeout = time.Duration(n) * time.Second
			}
		}
		return env, true, nil
	}
	return hookEnv{}, false, nil
}

// podField is a downward API field of p.
func podField(p *corev1.Pod, field string) (string, error) {
	switch field {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP":
		return p.Status.PodIP, nil
	}
	return "", fmt.Errorf("the simulated runner does not read the pod field %q", field)
}

// hookTemplate reads the file named by EnvHookTemplate where the runner container
// gets it: the ConfigMap behind the volume mounted at the file's directory (a
// configMap volume, or a projected volume's configMap source), as the kubelet would
// put it there. It returns nil when the file is not set.
func hookTemplate(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod, file string) ([]byte, error) {
	if file == "" {
		return nil, nil
	}
	var runnerC *corev1.Container
	for _, c := range runnerContainers(p) {
		for _, e := range c.Env {
			if e.Name == EnvContainerHooks {
				runnerC = &c
				break
			}
		}
		if runnerC != nil {
			break
		}
	}
	if runnerC == nil {
		return nil, fmt.Errorf("no container sets %s", EnvContainerHooks)
	}
	var mount *corev1.VolumeMount
	var rel string
	for i, m := range runnerC.VolumeMounts {
		dir := strings.TrimSuffix(m.MountPath, "/")
		if r, ok := strings.CutPrefix(file, dir+"/"); ok && (mount == nil || len(m.MountPath) > len(mount.MountPath)) {
			mount, rel = &runnerC.VolumeMounts[i], r
		}
	}
	if mount == nil {
		return nil, fmt.Errorf("%s %s is on no volume of container %s: the simulated runner reads it from a ConfigMap volume", EnvHookTemplate, file, runnerC.Name)
	}
	if mount.SubPath != "" {
		rel = path.Join(mount.SubPath, rel)
	}
	for _, v := range p.Spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		var sources []corev1.ConfigMapProjection
		switch {
		case v.ConfigMap != nil:
			sources = append(sources, corev1.ConfigMapProjection{LocalObjectReference: v.ConfigMap.LocalObjectReference, Items: v.ConfigMap.Items})
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					sources = append(sources, *s.ConfigMap)
				}
			}
		}
		for _, s := range sources {
			key, found := rel, len(s.Items) == 0
			for _, it := range s.Items {
				if it.Path == rel {
					key, found = it.Key, true
				}
			}
			if !found {
				continue
			}
			cm, err := kube.CoreV1().ConfigMaps(p.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("reading the hook template from ConfigMap %s: %w", s.Name, err)
			}
			if d, ok := cm.Data[key]; ok {
				return []byte(d), nil
			}
		}
		return nil, fmt.Errorf("%s %s: volume %s has no such file (the simulated runner reads ConfigMap volumes)", EnvHookTemplate, file, v.Name)
	}
	return nil, fmt.Errorf("%s %s: the pod has no volume %s", EnvHookTemplate, file, mount.Name)
}
