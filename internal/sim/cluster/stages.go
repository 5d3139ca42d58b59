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
// AnnotationExitedAt, set with it, is when the runner process exited (RFC 3339): the
// container's finishedAt, as a kubelet reports the runtime's exit time rather than when
// it got to writing it (kwok's "now", seconds later on a loaded machine).
const (
	AnnotationExitCode = "sim.gantry.dev/exit-code"
	AnnotationExitedAt = "sim.gantry.dev/exited-at"
)

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
      {{ $exited := index .metadata.annotations "` + AnnotationExitedAt + `" }}
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
            finishedAt: {{ if $exited }}{{ $exited | Quote }}{{ else }}{{ $now | Quote }}{{ end }}
            reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
`

// unpullableQuery is kwok's query (jq) for the images of a pod's containers under
// UnpullableRegistry: nothing when every image pulls.
const unpullableQuery = `.spec.containers.[] | select(.image | startswith("` + UnpullableRegistry + `/")) | .image`

// imagePullBackOffStage is Gantry's kwok stage for a pod with an image that never
// pulls: Pending, that container waiting in ImagePullBackOff (the others running), as a
// kubelet leaves it (hasPrefix is sprig's, which kwok's templates have); kwok's pod-ready stage skips such a pod (writeStages).
const imagePullBackOffStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: gantry-image-pull-backoff
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
      - 'Pending'
    - key: '` + unpullableQuery + `'
      operator: 'Exists'
    - key: '.status.containerStatuses.[] | select(.state.waiting.reason == "ImagePullBackOff") | .name'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: ContainersNotReady
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: ContainersNotReady
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        restartCount: 0
        {{ if hasPrefix "` + UnpullableRegistry + `/" .image }}
        ready: false
        started: false
        state:
          waiting:
            reason: ImagePullBackOff
            message: {{ printf "Back-off pulling image %q: ErrImagePull: failed to resolve reference: lookup ` + UnpullableRegistry + `: no such host" .image | Quote }}
        {{ else }}
        ready: true
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
        {{ end }}
      {{ end }}
      phase: Pending
      startTime: {{ $now | Quote }}
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
		if name == "pod-ready" {
			spec, _ := st["spec"].(map[string]any)
			if podStart > 0 {
				spec["delay"] = map[string]any{"durationMilliseconds": podStart.Milliseconds()}
			}
			// A pod with an image that never pulls never runs: gantry-image-pull-backoff.
			sel, _ := spec["selector"].(map[string]any)
			exprs, _ := sel["matchExpressions"].([]any)
			if sel == nil {
				return fmt.Errorf("kwok's pod-ready stage has no selector")
			}
			sel["matchExpressions"] = append(exprs, map[string]any{"key": unpullableQuery, "operator": "DoesNotExist"})
		}
		b, err := yaml.Marshal(st)
		if err != nil {
			return err
		}
		docs = append(docs, string(b))
	}
	docs = append(docs, runnerExitStage, imagePullBackOffStage)
	var buf bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.WriteString(d)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
