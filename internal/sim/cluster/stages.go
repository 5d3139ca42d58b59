package cluster

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// AnnotationExitCode, set on a running runner pod by its simulated agent, makes kwok
// terminate the runner container with that exit code: "0" → Succeeded, else Failed.
const AnnotationExitCode = "sim.gantry.dev/exit-code"

// UnpullableRegistry is the simulated cluster's registry that never answers: a pod
// with a container image under it (UNPULLABLE/name:tag) stays Pending, that container
// waiting in ImagePullBackOff, as a kubelet keeps a pod whose image cannot be pulled.
// (.invalid is a name that never resolves.)
const UnpullableRegistry = "unpullable.invalid"

// Unpullable reports whether image is one the simulated cluster never pulls.
func Unpullable(image string) bool { return strings.HasPrefix(image, UnpullableRegistry+"/") }

// runnerExitStage is Gantry's own kwok stage: a Running pod whose agent finished.
const runnerExitStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: gantry-runner-exit
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.metadata.annotations["` + AnnotationExitCode + `"]'
      operator: 'Exists'
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $code := index .metadata.annotations "` + AnnotationExitCode + `" }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {{ $code }}
            finishedAt: {{ $now | Quote }}
            reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
`

// writeStages writes kwok's stage file: the default node and pod stages shipped with
// kwok (from hack/k8s-bins.sh), pod-ready delayed by podStart, and Gantry's exit stage.
func writeStages(defaults, out string, podStart time.Duration) error {
	raw, err := os.ReadFile(defaults)
	if err != nil {
		return fmt.Errorf("reading kwok's default stages (run `make k8s-bins`): %w", err)
	}
	var docs []string
	for _, doc := range strings.Split(string(raw), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var st map[string]any
		if err := yaml.Unmarshal([]byte(doc), &st); err != nil {
			return fmt.Errorf("parsing kwok's default stages: %w", err)
		}
		meta, _ := st["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		if name == "pod-complete" {
			continue // completes Job pods only; runner pods end through gantry-runner-exit
		}
		if name == "pod-ready" && podStart > 0 {
			spec, _ := st["spec"].(map[string]any)
			spec["delay"] = map[string]any{"durationMilliseconds": podStart.Milliseconds()}
		}
		b, err := yaml.Marshal(st)
		if err != nil {
			return err
		}
		docs = append(docs, string(b))
	}
	docs = append(docs, runnerExitStage)
	var buf bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.WriteString(d)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
