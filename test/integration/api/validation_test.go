// Package api tests Gantry's CRDs against a real kube-apiserver: defaults applied at
// admission, and invalid RunnerPools refused with a message that says what to fix.
package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testenv"
	"github.com/gantry-dev/gantry/internal/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestValidRunnerPoolIsStoredWithDefaults(t *testing.T) {
	ns := env.Namespace(t)
	// Only the required fields: everything else must come back defaulted.
	pool := &v1alpha1.RunnerPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linux-x64"},
		Spec: v1alpha1.RunnerPoolSpec{
			GitHub: v1alpha1.GitHubSpec{
				URL:                  "https://github.com/my-org",
				CredentialsSecretRef: v1alpha1.SecretReference{Name: "github-app"},
			},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "runner", Image: "ghcr.io/actions/actions-runner:latest",
			}}}},
		},
	}
	// Send the spec without maxRunners so that the server's default applies.
	raw := map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "RunnerPool",
		"metadata":   map[string]any{"namespace": ns, "name": pool.Name},
		"spec": map[string]any{
			"github": map[string]any{
				"url":                  pool.Spec.GitHub.URL,
				"credentialsSecretRef": map[string]any{"name": "github-app"},
			},
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "runner", "image": "ghcr.io/actions/actions-runner:latest"},
			}}},
		},
	}
	if err := createRaw(t, raw); err != nil {
		t.Fatalf("creating a minimal valid RunnerPool: %v", err)
	}

	var got v1alpha1.RunnerPool
	if err := env.Client.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: pool.Name}, &got); err != nil {
		t.Fatalf("reading the pool back: %v", err)
	}
	want := v1alpha1.RunnerPoolSpec{
		GitHub: v1alpha1.GitHubSpec{
			URL:                  "https://github.com/my-org",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: "github-app"},
			RunnerGroup:          "Default",
		},
		MinIdle:          0,
		MaxRunners:       10,
		Demand:           v1alpha1.DemandSpec{Source: v1alpha1.DemandSourceWebhook},
		RegistrationMode: v1alpha1.RegistrationModeJIT,
		Recovery: v1alpha1.RecoverySpec{
			PendingTimeout:            &metav1.Duration{Duration: 10 * time.Minute},
			ImagePullGracePeriod:      &metav1.Duration{Duration: 2 * time.Minute},
			ContainerErrorGracePeriod: &metav1.Duration{Duration: time.Minute},
			RegistrationTimeout:       &metav1.Duration{Duration: 5 * time.Minute},
			NodeLostTimeout:           &metav1.Duration{Duration: 5 * time.Minute},
		},
		Disruption: v1alpha1.DisruptionSpec{
			DrainTimeout: &metav1.Duration{Duration: time.Hour},
			Rerun:        v1alpha1.RerunNever,
		},
		Template: pool.Spec.Template,
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("stored spec (-want +got):\n%s", diff)
	}
}

func TestDefaultsApplyToPoolsWrittenByGoClients(t *testing.T) {
	ns := env.Namespace(t)
	pool := testutil.RunnerPool(ns, "typed").Obj()
	if err := env.Client.Create(ctx(t), pool); err != nil {
		t.Fatal(err)
	}
	rec := pool.Spec.Recovery
	if rec.PendingTimeout == nil || rec.PendingTimeout.Duration != 10*time.Minute ||
		rec.RegistrationTimeout == nil || rec.RegistrationTimeout.Duration != 5*time.Minute {
		t.Errorf("recovery after a typed create = %+v, want the server's defaults", rec)
	}
	if pool.Spec.RegistrationMode != v1alpha1.RegistrationModeJIT || pool.Spec.GitHub.RunnerGroup != "Default" {
		t.Errorf("registrationMode %q, runnerGroup %q: want the defaults", pool.Spec.RegistrationMode, pool.Spec.GitHub.RunnerGroup)
	}
}

func TestValidRunnerPoolsAreAccepted(t *testing.T) {
	ns := env.Namespace(t)
	tests := []struct {
		name string
		pool *v1alpha1.RunnerPool
	}{
		{"organization", testutil.RunnerPool(ns, "org").URL("https://github.com/my-org").Obj()},
		{"repository", testutil.RunnerPool(ns, "repo").URL("https://github.com/my-org/my-repo").Obj()},
		{"repository with trailing slash", testutil.RunnerPool(ns, "repo-slash").URL("https://github.com/my-org/my.repo_1/").Obj()},
		{"enterprise", testutil.RunnerPool(ns, "ent").URL("https://github.com/enterprises/acme").Obj()},
		{"GHES organization", testutil.RunnerPool(ns, "ghes").URL("https://ghe.example.com/platform").Obj()},
		{"simulator on loopback", testutil.RunnerPool(ns, "sim").URL("http://127.0.0.1:8080/my-org").Obj()},
		{"warm pool", testutil.RunnerPool(ns, "warm").MinIdle(5).MaxRunners(5).Obj()},
		{"paused pool", testutil.RunnerPool(ns, "paused").MaxRunners(0).Obj()},
		{"registration token mode", testutil.RunnerPool(ns, "token").Mode(v1alpha1.RegistrationModeRegistrationToken).Obj()},
		{"recovery at its bounds", withRecovery(testutil.RunnerPool(ns, "bounds").Obj(), v1alpha1.RecoverySpec{
			PendingTimeout: dur(24 * time.Hour), ImagePullGracePeriod: dur(time.Second),
			RegistrationTimeout: dur(90 * time.Minute), NodeLostTimeout: dur(1500 * time.Millisecond),
		})},
		{"labels GitHub takes", testutil.RunnerPool(ns, "labels").Labels("ubuntu-22.04", "gpu_a100", "my label", "x64").Obj()},
		{"name of 57 characters", testutil.RunnerPool(ns, strings.Repeat("n", 57)).Obj()},
		{"other env and restartPolicy Never", withTemplate(testutil.RunnerPool(ns, "env").Obj(), func(ps *corev1.PodSpec) {
			ps.RestartPolicy = corev1.RestartPolicyNever
			ps.Containers[0].Env = []corev1.EnvVar{{Name: "RUNNER_ALLOW_RUNASROOT", Value: "1"}, {Name: "GANTRY_RUNNER", Value: "prefix only"}}
		})},
		{"sidecar next to the runner", testutil.RunnerPool(ns, "dind").Containers(
			corev1.Container{Name: "dind", Image: "docker:dind"},
			corev1.Container{Name: "runner", Image: "ghcr.io/actions/actions-runner:latest"},
		).Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := env.Client.Create(ctx(t), tt.pool); err != nil {
				t.Fatalf("valid pool refused: %v", err)
			}
		})
	}
}

func TestInvalidRunnerPoolsAreRefusedWithAMessageThatSaysWhatToFix(t *testing.T) {
	ns := env.Namespace(t)
	tests := []struct {
		name string
		pool *v1alpha1.RunnerPool
		// wantMessages must all appear in the admission error.
		wantMessages []string
	}{
		{
			name:         "maxRunners below minIdle",
			pool:         testutil.RunnerPool(ns, "below").MinIdle(5).MaxRunners(2).Obj(),
			wantMessages: []string{"maxRunners must be greater than or equal to minIdle", "raise maxRunners or lower minIdle"},
		},
		{
			name: "template without a runner container",
			pool: testutil.RunnerPool(ns, "no-runner").Containers(
				corev1.Container{Name: "agent", Image: "ghcr.io/actions/actions-runner:latest"}).Obj(),
			wantMessages: []string{`template.spec.containers must include a container named "runner"`},
		},
		{
			name:         "github.url is not a GitHub scope URL",
			pool:         testutil.RunnerPool(ns, "bad-url").URL("github.com/my-org").Obj(),
			wantMessages: []string{"github.url must be a repository (https://github.com/OWNER/REPO), organization (https://github.com/ORG) or enterprise"},
		},
		{
			name:         "github.url with too many path segments",
			pool:         testutil.RunnerPool(ns, "deep-url").URL("https://github.com/my-org/my-repo/actions").Obj(),
			wantMessages: []string{"github.url must be a repository"},
		},
		{
			name:         "github.url names an enterprise without a slug",
			pool:         testutil.RunnerPool(ns, "ent-url").URL("https://github.com/enterprises/").Obj(),
			wantMessages: []string{"github.url must be a repository"},
		},
		{
			name:         "github.url with a query",
			pool:         testutil.RunnerPool(ns, "query-url").URL("https://github.com/my-org?tab=repos").Obj(),
			wantMessages: []string{"github.url must be a repository"},
		},
		{
			name:         "empty credentials secret name",
			pool:         testutil.RunnerPool(ns, "no-secret").Credentials("").Obj(),
			wantMessages: []string{"github.credentialsSecretRef.name must name the Secret"},
		},
		{
			name:         "scale set name with a space",
			pool:         testutil.RunnerPool(ns, "ss-space").ScaleSet("linux x64").Obj(),
			wantMessages: []string{"demand.scaleSetName must be 1 to 45 letters, digits"},
		},
		{
			name:         "scale set name too long",
			pool:         testutil.RunnerPool(ns, "ss-long").ScaleSet(strings.Repeat("a", 46)).Obj(),
			wantMessages: []string{"spec.demand.scaleSetName", "may not be more than 45"},
		},
		{
			name: "scale set name on a webhook pool",
			pool: func() *v1alpha1.RunnerPool {
				p := testutil.RunnerPool(ns, "ss-webhook").Obj()
				p.Spec.Demand.ScaleSetName = "linux"
				return p
			}(),
			wantMessages: []string{"demand.scaleSetName is only used with demand.source: ScaleSet"},
		},
		{
			name: "unknown demand source",
			pool: func() *v1alpha1.RunnerPool {
				p := testutil.RunnerPool(ns, "ss-source").Obj()
				p.Spec.Demand.Source = "Polling"
				return p
			}(),
			wantMessages: []string{"spec.demand.source", `supported values: "Webhook", "ScaleSet"`},
		},
		{
			name:         "negative minIdle",
			pool:         testutil.RunnerPool(ns, "neg").MinIdle(-1).Obj(),
			wantMessages: []string{"spec.minIdle", "should be greater than or equal to 0"},
		},
		{
			name:         "unknown registration mode",
			pool:         testutil.RunnerPool(ns, "mode").Mode("Webhook").Obj(),
			wantMessages: []string{"spec.registrationMode", `supported values: "JIT", "RegistrationToken"`},
		},
		{
			name:         "empty label",
			pool:         testutil.RunnerPool(ns, "empty-label").Labels("linux", "").Obj(),
			wantMessages: []string{"spec.labels[1]", "at least 1 chars long"},
		},
		{
			name:         "registrationTimeout of zero",
			pool:         withRecovery(testutil.RunnerPool(ns, "zero").Obj(), v1alpha1.RecoverySpec{RegistrationTimeout: dur(0)}),
			wantMessages: []string{"spec.recovery.registrationTimeout", "recovery.registrationTimeout must be a duration from 1s to 24h", `"5m"`},
		},
		{
			name:         "pendingTimeout above a day",
			pool:         withRecovery(testutil.RunnerPool(ns, "long").Obj(), v1alpha1.RecoverySpec{PendingTimeout: dur(25 * time.Hour)}),
			wantMessages: []string{"spec.recovery.pendingTimeout", "from 1s to 24h"},
		},
		{
			name:         "imagePullGracePeriod below a second",
			pool:         withRecovery(testutil.RunnerPool(ns, "short").Obj(), v1alpha1.RecoverySpec{ImagePullGracePeriod: dur(500 * time.Millisecond)}),
			wantMessages: []string{"spec.recovery.imagePullGracePeriod", "from 1s to 24h"},
		},
		{
			name:         "negative nodeLostTimeout",
			pool:         withRecovery(testutil.RunnerPool(ns, "negative").Obj(), v1alpha1.RecoverySpec{NodeLostTimeout: dur(-time.Minute)}),
			wantMessages: []string{"spec.recovery.nodeLostTimeout"},
		},
		{
			name:         "labels joined by a comma",
			pool:         testutil.RunnerPool(ns, "comma").Labels("linux,x64").Obj(),
			wantMessages: []string{"spec.labels[0]", "labels must not contain a comma", "[linux, x64]"},
		},
		{
			name:         "label with a leading space",
			pool:         testutil.RunnerPool(ns, "space").Labels(" gpu").Obj(),
			wantMessages: []string{"spec.labels[0]", "must not start or end with a space"},
		},
		{
			name:         "label with a control character",
			pool:         testutil.RunnerPool(ns, "tab").Labels("gpu\tx").Obj(),
			wantMessages: []string{"spec.labels[0]", "control character"},
		},
		{
			name:         "labels that differ only in case",
			pool:         testutil.RunnerPool(ns, "case").Labels("Linux", "x64", "linux").Obj(),
			wantMessages: []string{"spec.labels", "labels must differ by more than case"},
		},
		{
			name:         "name too long for the runners' names",
			pool:         testutil.RunnerPool(ns, strings.Repeat("n", 58)).Obj(),
			wantMessages: []string{"metadata.name must be at most 57 characters", "such as linux-x64"},
		},
		{
			name: "restartPolicy Always",
			pool: withTemplate(testutil.RunnerPool(ns, "restart").Obj(), func(ps *corev1.PodSpec) {
				ps.RestartPolicy = corev1.RestartPolicyAlways
			}),
			wantMessages: []string{"spec.template", "template.spec.restartPolicy must be left out or be Never"},
		},
		{
			name: "pendingTimeout of zero",
			pool: func() *v1alpha1.RunnerPool {
				p := testutil.RunnerPool(ns, "zero-pending").Obj()
				p.Spec.Recovery.PendingTimeout = &metav1.Duration{}
				return p
			}(),
			wantMessages: []string{"recovery.pendingTimeout must be a duration from 1s to 24h"},
		},
		{
			name: "containerErrorGracePeriod over a day",
			pool: func() *v1alpha1.RunnerPool {
				p := testutil.RunnerPool(ns, "long-grace").Obj()
				p.Spec.Recovery.ContainerErrorGracePeriod = &metav1.Duration{Duration: 48 * time.Hour}
				return p
			}(),
			wantMessages: []string{"recovery.containerErrorGracePeriod must be a duration from 1s to 24h"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env.Client.Create(ctx(t), tt.pool)
			if err == nil {
				t.Fatal("invalid pool was accepted")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid (422) admission error, got %v", err)
			}
			for _, want := range tt.wantMessages {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("admission error does not say %q:\n%v", want, err)
				}
			}
		})
	}
}

func TestGitHubURLIsImmutable(t *testing.T) {
	ns := env.Namespace(t)
	pool := testutil.RunnerPool(ns, "immutable").Obj()
	if err := env.Client.Create(ctx(t), pool); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.GitHub.URL = "https://github.com/other-org"
	err := env.Client.Patch(ctx(t), pool, patch)
	if err == nil || !strings.Contains(err.Error(), "github.url is immutable") {
		t.Fatalf("changing github.url: want an error saying it is immutable, got %v", err)
	}
}

func TestDemandSourceAndScaleSetNameAreFixedOnALivePool(t *testing.T) {
	ns := env.Namespace(t)
	webhook := testutil.RunnerPool(ns, "by-webhook").Obj()
	scaleSet := testutil.RunnerPool(ns, "by-scale-set").ScaleSet("").Obj()
	for _, p := range []*v1alpha1.RunnerPool{webhook, scaleSet} {
		if err := env.Client.Create(ctx(t), p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		pool   *v1alpha1.RunnerPool
		change func(*v1alpha1.RunnerPool)
		want   string
	}{
		{"webhook to scale set", webhook, func(p *v1alpha1.RunnerPool) {
			p.Spec.Demand.Source = v1alpha1.DemandSourceScaleSet
		}, "demand.source cannot change on a live pool"},
		{"scale set to webhook", scaleSet, func(p *v1alpha1.RunnerPool) {
			p.Spec.Demand.Source = v1alpha1.DemandSourceWebhook
		}, "demand.source cannot change on a live pool"},
		{"rename the scale set", scaleSet, func(p *v1alpha1.RunnerPool) {
			p.Spec.Demand.ScaleSetName = "renamed"
		}, "demand.scaleSetName cannot change on a live pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pool.DeepCopy()
			patch := client.MergeFrom(p.DeepCopy())
			tc.change(p)
			err := env.Client.Patch(ctx(t), p, patch)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error saying %q, got %v", tc.want, err)
			}
		})
	}
	// Other fields of a scale-set pool still change.
	p := scaleSet.DeepCopy()
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.MaxRunners = 20
	if err := env.Client.Patch(ctx(t), p, patch); err != nil {
		t.Errorf("changing maxRunners of a scale-set pool: %v", err)
	}
}

func TestRunnerPhaseIsValidated(t *testing.T) {
	ns := env.Namespace(t)
	r := &v1alpha1.Runner{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1"},
		Spec:       v1alpha1.RunnerSpec{PoolName: "pool"},
	}
	if err := env.Client.Create(ctx(t), r); err != nil {
		t.Fatalf("creating a runner: %v", err)
	}
	patch := client.MergeFrom(r.DeepCopy())
	r.Status.Phase = "Exploded"
	err := env.Client.Status().Patch(ctx(t), r, patch)
	if err == nil || !strings.Contains(err.Error(), "status.phase") {
		t.Fatalf("writing an unknown phase: want a status.phase validation error, got %v", err)
	}
	r.Status.Phase = v1alpha1.RunnerIdle
	if err := env.Client.Status().Patch(ctx(t), r, patch); err != nil {
		t.Fatalf("writing phase Idle: %v", err)
	}
}

// Durations a person writes by hand that Go cannot parse are refused at the door: once
// stored, they could not be decoded.
func TestDurationsWithoutUnitsAreRefused(t *testing.T) {
	ns := env.Namespace(t)
	for i, d := range []string{"600", "10 minutes", "1h 30m", "5M", "1d", "PT10M", ""} {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(testutil.RunnerPool(ns, fmt.Sprintf("raw-%d", i)).Obj())
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(obj, d, "spec", "recovery", "pendingTimeout"); err != nil {
			t.Fatal(err)
		}
		err = createRaw(t, obj)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.recovery.pendingTimeout") || !strings.Contains(err.Error(), "with units") {
			t.Errorf("pendingTimeout %q: want an Invalid error naming spec.recovery.pendingTimeout and saying to use units, got %v", d, err)
		}
	}
}

// Counts never written show as 0 in `kubectl get runnerpools`, not as blanks.
func TestStatusCountsReadAsZero(t *testing.T) {
	ns := env.Namespace(t)
	pool := testutil.RunnerPool(ns, "counts").Obj()
	if err := env.Client.Create(ctx(t), pool); err != nil {
		t.Fatal(err)
	}
	// What a controller writes first: a condition and nothing else.
	raw := client.RawPatch(types.MergePatchType, []byte(`{"status":{"observedGeneration":1}}`))
	if err := env.Client.Status().Patch(ctx(t), pool, raw); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("RunnerPool"))
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(pool), u); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"queuedJobs", "desiredRunners", "pendingRunners", "idleRunners", "busyRunners", "failedRunners"} {
		v, found, err := unstructured.NestedInt64(u.Object, "status", f)
		if err != nil || !found || v != 0 {
			t.Errorf("status.%s = %v (found %v, %v), want 0", f, v, found, err)
		}
	}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func withRecovery(p *v1alpha1.RunnerPool, r v1alpha1.RecoverySpec) *v1alpha1.RunnerPool {
	p.Spec.Recovery = r
	return p
}

func withTemplate(p *v1alpha1.RunnerPool, mutate func(*corev1.PodSpec)) *v1alpha1.RunnerPool {
	mutate(&p.Spec.Template.Spec)
	return p
}

// createRaw creates an object from its JSON form, so that fields the Go types would
// always send (such as maxRunners) can be left out and the server's defaults observed.
func createRaw(t *testing.T, obj map[string]any) error {
	t.Helper()
	return env.Client.Create(ctx(t), &unstructured.Unstructured{Object: obj})
}

// `kubectl explain runnerpool.spec` prints Gantry's field docs: the installed CRD keeps
// them, and leaves out those of the embedded pod template.
func TestCRDCarriesGantrysFieldDocs(t *testing.T) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := env.Client.Get(ctx(t), client.ObjectKey{Name: "runnerpools.gantry.dev"}, crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		t.Fatal("the CRD has no versions")
	}
	spec := []string{"schema", "openAPIV3Schema", "properties", "spec", "properties"}
	v := versions[0].(map[string]any)
	for _, path := range [][]string{{"recovery", "properties", "pendingTimeout"}, {"labels"}, {"template"}} {
		desc, _, _ := unstructured.NestedString(v, append(append(append([]string{}, spec...), path...), "description")...)
		if desc == "" {
			t.Errorf("spec.%s has no description", strings.Join(path, "."))
		}
	}
	podSpec := append(append([]string{}, spec...), "template", "properties", "spec", "description")
	if desc, found, _ := unstructured.NestedString(v, podSpec...); found {
		t.Errorf("the pod template keeps its descriptions (spec.template.spec: %.60q…): the CRD grows by the whole pod documentation", desc)
	}
}
