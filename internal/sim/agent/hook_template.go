// The hook template (ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE) merged into the workflow pod,
// as the official hook merges it.

package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// mergeTemplate merges a pod template (YAML) into pod as the hook does: labels and
// annotations added; a template container named "$NAME" merged into the container
// NAME (env, volumeMounts and ports appended, every other field but name and image
// replaced), the others appended; volumes appended; every other pod spec field
// replaced.
func mergeTemplate(pod *corev1.Pod, raw []byte) error {
	var tmpl struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec map[string]json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &tmpl); err != nil {
		return err
	}
	for k, v := range tmpl.Metadata.Labels {
		pod.Labels[k] = v
	}
	for k, v := range tmpl.Metadata.Annotations {
		pod.Annotations[k] = v
	}
	b, err := json.Marshal(pod.Spec)
	if err != nil {
		return err
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	var containers []map[string]json.RawMessage
	if err := json.Unmarshal(spec["containers"], &containers); err != nil {
		return err
	}
	for key, value := range tmpl.Spec {
		switch key {
		case "containers":
			var from []map[string]json.RawMessage
			if err := json.Unmarshal(value, &from); err != nil {
				return fmt.Errorf("spec.containers: %w", err)
			}
			for _, fc := range from {
				var name string
				_ = json.Unmarshal(fc["name"], &name)
				target, ext := strings.CutPrefix(name, containerExtensionPrefix)
				if !ext {
					containers = append(containers, fc)
					continue
				}
				for _, c := range containers {
					var cname string
					_ = json.Unmarshal(c["name"], &cname)
					if cname == target {
						if err := mergeContainer(c, fc); err != nil {
							return fmt.Errorf("container %s: %w", name, err)
						}
					}
				}
			}
		case "volumes":
			merged, err := appendLists(spec[key], value)
			if err != nil {
				return fmt.Errorf("spec.volumes: %w", err)
			}
			spec[key] = merged
		default:
			spec[key] = value
		}
	}
	if spec["containers"], err = json.Marshal(containers); err != nil {
		return err
	}
	if b, err = json.Marshal(spec); err != nil {
		return err
	}
	pod.Spec = corev1.PodSpec{}
	return json.Unmarshal(b, &pod.Spec)
}

func mergeContainer(base, from map[string]json.RawMessage) error {
	for key, value := range from {
		switch key {
		case "name", "image":
			// The hook keeps its own.
		case "env", "volumeMounts", "ports":
			merged, err := appendLists(base[key], value)
			if err != nil {
				return err
			}
			base[key] = merged
		default:
			base[key] = value
		}
	}
	return nil
}

func appendLists(base, more json.RawMessage) (json.RawMessage, error) {
	var a, b []json.RawMessage
	if len(base) > 0 {
		if err := json.Unmarshal(base, &a); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(more, &b); err != nil {
		return nil, err
	}
	return json.Marshal(append(a, b...))
}
