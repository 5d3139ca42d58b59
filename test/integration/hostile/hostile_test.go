package hostile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
)

// hostile is one plausible mistake in an otherwise valid pool: either the API server
// refuses it with a message naming the field (refused), or Gantry accepts it and
// reports it on that pool alone (reason: Ready is not True, with a Warning event).
type hostile struct {
	name    string
	mutate  func(pool map[string]any)
	refused []string
	reason  string
	// podless: the pool creates its warm runners, but none of them gets a pod.
	podless bool
}

func set(value any, path ...string) func(map[string]any) {
	return func(p map[string]any) {
		if err := unstructured.SetNestedField(p, value, path...); err != nil {
			panic(err)
		}
	}
}

// runnerContainer changes the template's runner container.
func runnerContainer(mutate func(c map[string]any)) func(map[string]any) {
	return func(p map[string]any) {
		cs, _, _ := unstructured.NestedSlice(p, "spec", "template", "spec", "containers")
		for _, c := range cs {
			if m := c.(map[string]any); m["name"] == v1alpha1.RunnerContainerName {
				mutate(m)
			}
		}
		_ = unstructured.SetNestedSlice(p, cs, "spec", "template", "spec", "containers")
	}
}

func env1(name string) func(map[string]any) {
	return runnerContainer(func(c map[string]any) {
		c["env"] = []any{map[string]any{"name": name, "value": "x"}}
	})
}

func hostiles() []hostile {
	const recovery = "spec.recovery."
	return []hostile{
		{name: "pendingTimeout a bare number", mutate: set("600", "spec", "recovery", "pendingTimeout"),
			refused: []string{recovery + "pendingTimeout", `"10m"`}},
		{name: "pendingTimeout in words", mutate: set("10 minutes", "spec", "recovery", "pendingTimeout"),
			refused: []string{recovery + "pendingTimeout", "with units"}},
		{name: "pendingTimeout with a space", mutate: set("1h 30m", "spec", "recovery", "pendingTimeout"),
			refused: []string{recovery + "pendingTimeout"}},
		{name: "registrationTimeout zero", mutate: set("0s", "spec", "recovery", "registrationTimeout"),
			refused: []string{recovery + "registrationTimeout", "from 1s to 24h"}},
		{name: "imagePullGracePeriod of two days", mutate: set("48h", "spec", "recovery", "imagePullGracePeriod"),
			refused: []string{recovery + "imagePullGracePeriod", "from 1s to 24h"}},
		{name: "nodeLostTimeout negative", mutate: set("-5m", "spec", "recovery", "nodeLostTimeout"),
			refused: []string{recovery + "nodeLostTimeout"}},
		{name: "nodeLostTimeout in days", mutate: set("1d", "spec", "recovery", "nodeLostTimeout"),
			refused: []string{recovery + "nodeLostTimeout"}},
		{name: "labels as one comma-separated string", mutate: set([]any{"linux,x64"}, "spec", "labels"),
			refused: []string{"spec.labels[0]", "comma"}},
		{name: "label with a trailing space", mutate: set([]any{"gpu "}, "spec", "labels"),
			refused: []string{"spec.labels[0]", "space"}},
		{name: "labels differing only in case", mutate: set([]any{"GPU", "gpu"}, "spec", "labels"),
			refused: []string{"spec.labels", "differ by more than case"}},
		{name: "empty label", mutate: set([]any{"linux", ""}, "spec", "labels"),
			refused: []string{"spec.labels[1]"}},
		{name: "label of 257 characters", mutate: set([]any{strings.Repeat("l", 257)}, "spec", "labels"),
			refused: []string{"spec.labels[0]"}},
		{name: "name too long for runner names", mutate: set(strings.Repeat("p", 58), "metadata", "name"),
			refused: []string{"metadata.name must be at most 57 characters"}},
		{name: "restartPolicy Always", mutate: set("Always", "spec", "template", "spec", "restartPolicy"),
			refused: []string{"spec.template", "restartPolicy"}},
		{name: "restartPolicy OnFailure", mutate: set("OnFailure", "spec", "template", "spec", "restartPolicy"),
			refused: []string{"spec.template", "restartPolicy"}},
		{name: "runner container misnamed", mutate: runnerContainer(func(c map[string]any) { c["name"] = "actions-runner" }),
			refused: []string{"spec.template", `container named "runner"`}},
		{name: "maxRunners below minIdle", mutate: func(p map[string]any) {
			set(int64(5), "spec", "minIdle")(p)
			set(int64(2), "spec", "maxRunners")(p)
		}, refused: []string{"maxRunners must be greater than or equal to minIdle"}},
		{name: "negative minIdle", mutate: set(int64(-1), "spec", "minIdle"), refused: []string{"spec.minIdle"}},
		{name: "maxRunners beyond the cap", mutate: set(int64(200000), "spec", "maxRunners"), refused: []string{"spec.maxRunners"}},
		{name: "maxRunners as a string", mutate: set("10", "spec", "maxRunners"), refused: []string{"spec.maxRunners"}},
		{name: "unknown registration mode", mutate: set("Token", "spec", "registrationMode"), refused: []string{"spec.registrationMode"}},
		{name: "URL without a scheme", mutate: set("github.com/acme", "spec", "github", "url"), refused: []string{"github.url must be"}},
		{name: "URL of a workflow page", mutate: set("https://github.com/acme/api/actions", "spec", "github", "url"), refused: []string{"github.url must be"}},
		{name: "empty runner group", mutate: set("", "spec", "github", "runnerGroup"), refused: []string{"spec.github.runnerGroup"}},
		{name: "empty credentials secret name", mutate: set("", "spec", "github", "credentialsSecretRef", "name"),
			refused: []string{"github.credentialsSecretRef.name"}},

		// Accepted by the API server; only Gantry can tell.
		{name: "credentials secret missing", mutate: set("no-such-secret", "spec", "github", "credentialsSecretRef", "name"),
			reason: controller.ReasonSecretNotFound},
		{name: "credentials secret malformed", mutate: set("malformed", "spec", "github", "credentialsSecretRef", "name"),
			reason: controller.ReasonInvalidCredentials},
		{name: "credentials secret without credentials", mutate: set("empty", "spec", "github", "credentialsSecretRef", "name"),
			reason: controller.ReasonInvalidCredentials},
		{name: "JIT configuration variable in the template", mutate: env1(runner0JIT), reason: v1alpha1.ReasonInvalidSpec},
		{name: "GANTRY_RUNNER_ variable in the template", mutate: env1("GANTRY_RUNNER_LABELS"), reason: v1alpha1.ReasonInvalidSpec},
		{name: "API URL instead of the organization's", mutate: set("https://api.github.com/acme", "spec", "github", "url"),
			reason: controller.ReasonInvalidURL},

		// Accepted by the API server; GitHub's answer tells.
		{name: "runner group that does not exist", mutate: func(p map[string]any) {
			url, _, _ := unstructured.NestedString(p, "spec", "github", "url")
			set(strings.TrimSuffix(url, "/api"), "spec", "github", "url")(p)
			set("no-such-group", "spec", "github", "runnerGroup")(p)
		}, reason: v1alpha1.ReasonRunnerGroupNotFound},
		{name: "organization that does not exist", mutate: func(p map[string]any) {
			url, _, _ := unstructured.NestedString(p, "spec", "github", "url")
			set(strings.TrimSuffix(url, "/acme/api")+"/no-such-org", "spec", "github", "url")(p)
		}, reason: v1alpha1.ReasonScopeNotFound},
		{name: "a token GitHub refuses", mutate: set("refused", "spec", "github", "credentialsSecretRef", "name"),
			reason: v1alpha1.ReasonCredentialsRefused},

		// Accepted by the API server, and by GitHub; only the runner pods are refused.
		{name: "a volume mount naming no volume", mutate: func(p map[string]any) {
			set(int64(1), "spec", "minIdle")(p)
			runnerContainer(func(c map[string]any) {
				c["volumeMounts"] = []any{map[string]any{"name": "cache", "mountPath": "/cache"}}
			})(p)
		}, reason: v1alpha1.ReasonPodsRefused, podless: true},
	}
}

const runner0JIT = "ACTIONS_RUNNER_INPUT_JITCONFIG"

// A table of hostile pools, one plausible mistake each, beside a healthy pool: each is
// refused by the API server with a message naming the field, or accepted and reported
// on that pool alone (not Ready, a Warning event, no runner). The healthy pool runs its
// jobs before, while and after they are applied, and after a controller restart.
func TestHostilePoolsStayLocal(t *testing.T) {
	w := newWorld(t)
	w.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "malformed"}, Data: map[string][]byte{
		"github_app_id": []byte("twelve"), "github_app_installation_id": []byte("42"), "github_app_private_key": []byte("not a key"),
	}})
	w.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "empty"}, Data: map[string][]byte{"token": []byte("wrong key")}})
	w.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "refused"}, Data: map[string][]byte{"github_token": []byte("a-token-github-never-issued")}})
	first := w.start()
	w.create(w.healthyPool("healthy"))
	w.runJob("healthy", "before the hostile pools")

	table := hostiles()
	if len(table) < 25 {
		t.Fatalf("%d hostile pools, want at least 25", len(table))
	}
	var accepted []hostile
	for i, h := range table {
		base, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w.healthyPool("hostile-" + string(rune('a'+i/26)) + string(rune('a'+i%26))))
		if err != nil {
			t.Fatal(err)
		}
		h.mutate(base)
		name, _, _ := unstructured.NestedString(base, "metadata", "name")
		h.name = name + " (" + h.name + ")"
		err = w.c.Create(w.ctx(), &unstructured.Unstructured{Object: base})
		switch {
		case len(h.refused) > 0 && err == nil:
			t.Errorf("%s: accepted, want it refused saying %q", h.name, h.refused)
		case len(h.refused) > 0:
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: want an Invalid (422) error, got %v", h.name, err)
			}
			if missing := containsAll(err.Error(), h.refused); len(missing) > 0 {
				t.Errorf("%s: the API server's message does not say %q:\n%v", h.name, missing, err)
			}
		case err != nil:
			t.Errorf("%s: refused, want it accepted and reported as %s: %v", h.name, h.reason, err)
		default:
			accepted = append(accepted, hostile{name: name, reason: h.reason, podless: h.podless})
		}
	}
	t.Logf("%d hostile pools: %d refused at admission, %d accepted and reported", len(table), len(table)-len(accepted), len(accepted))

	w.runJob("healthy", "beside the hostile pools")
	for _, h := range accepted {
		msg := w.reported(h.name, h.reason)
		if strings.Contains(msg, testToken) {
			t.Errorf("%s: the condition's message holds the token", h.name)
		}
		for _, r := range w.runners(h.name) {
			if !h.podless {
				t.Errorf("%s: a misconfigured pool has runner %s", h.name, r.Name)
			} else if w.hasPod(r.Name) {
				t.Errorf("%s: runner %s has a pod, which the API server should refuse", h.name, r.Name)
			}
		}
	}
	if !w.readyTrue("healthy") {
		t.Error("the healthy pool is not Ready beside the hostile pools")
	}

	first.stop(t)
	w.start()
	w.runJob("healthy", "after a controller restart")
	for _, h := range accepted {
		w.reported(h.name, h.reason)
	}
}
