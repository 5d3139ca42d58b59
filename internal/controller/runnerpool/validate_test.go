package runnerpool

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/testutil"
)

func TestStoredSpecError(t *testing.T) {
	undecodable := testutil.RunnerPool("ci", "old").Obj()
	undecodable.DecodeError = `spec.recovery.pendingTimeout: time: missing unit in duration "600"`
	tests := []struct {
		name      string
		pool      *v1alpha1.RunnerPool
		wantInMsg []string // none: no error
	}{
		{name: "valid", pool: testutil.RunnerPool("ci", "linux").Obj()},
		{name: "57 characters", pool: testutil.RunnerPool("ci", strings.Repeat("a", 57)).Obj()},
		{name: "undecodable field", pool: undecodable, wantInMsg: []string{"spec.recovery.pendingTimeout", `"600"`, "10m"}},
		{name: "JIT configuration variable", pool: withEnv(testutil.RunnerPool("ci", "jit").Obj(), "ACTIONS_RUNNER_INPUT_JITCONFIG"),
			wantInMsg: []string{"template.spec.containers[runner].env sets ACTIONS_RUNNER_INPUT_JITCONFIG", "MY_RUNNER_SETTING"}},
		{name: "token mode variable", pool: withEnv(testutil.RunnerPool("ci", "tok").Obj(), "GANTRY_RUNNER_LABELS"),
			wantInMsg: []string{"GANTRY_RUNNER_LABELS"}},
		{name: "a variable of its own", pool: withEnv(testutil.RunnerPool("ci", "own").Obj(), "GANTRY_RUNNER")},
		{name: "cache mounted", pool: testutil.RunnerPool("ci", "cached").Cache(testutil.CacheSpec("deps"), "/deps").Obj()},
		{name: "cache mounted by no container", pool: func() *v1alpha1.RunnerPool {
			p := testutil.RunnerPool("ci", "unmounted").Obj()
			p.Spec.Caches = []v1alpha1.CacheSpec{testutil.CacheSpec("deps")}
			return p
		}(), wantInMsg: []string{`cache "deps" is mounted by no container`, `add a volumeMount named "deps"`}},
		{name: "template volume named like a cache", pool: func() *v1alpha1.RunnerPool {
			p := testutil.RunnerPool("ci", "shadow").Cache(testutil.CacheSpec("deps"), "/deps").Obj()
			p.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "deps"}}
			return p
		}(), wantInMsg: []string{`template.spec.volumes declares "deps", the name of a cache`, "keep only the volumeMount"}},
		{name: "name too long", pool: testutil.RunnerPool("ci", strings.Repeat("a", 58)).Obj(), wantInMsg: []string{"58 characters", "more than 57"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := storedSpecError(tt.pool)
			if len(tt.wantInMsg) == 0 {
				if err != nil {
					t.Fatalf("storedSpecError = %v, want nil", err)
				}
				return
			}
			var cfg *controller.ConfigError
			if !errors.As(err, &cfg) || cfg.Reason != v1alpha1.ReasonInvalidSpec {
				t.Fatalf("storedSpecError = %v, want a ConfigError with reason InvalidSpec", err)
			}
			for _, w := range tt.wantInMsg {
				if !strings.Contains(cfg.Message, w) {
					t.Errorf("message %q does not say %q", cfg.Message, w)
				}
			}
		})
	}
}

func withEnv(p *v1alpha1.RunnerPool, name string) *v1alpha1.RunnerPool {
	p.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "OTHER", Value: "1"}, {Name: name, Value: "x"}}
	return p
}
