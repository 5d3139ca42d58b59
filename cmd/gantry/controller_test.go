package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func TestControllerFlagsFallBackToEnvironment(t *testing.T) {
	t.Setenv("GANTRY_CONCURRENCY", "3")
	t.Setenv("GANTRY_GITHUB_TIMEOUT", "5s")
	t.Setenv("GANTRY_NAMESPACES", "ci,build")
	t.Setenv("GANTRY_LEADER_ELECT", "true")
	t.Setenv("GANTRY_LOG_LEVEL", "debug")
	cmd := newControllerCommand()
	if err := cmd.Flags().Parse([]string{"--log-level=trace"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	for flag, want := range map[string]string{
		"concurrency":    "3",
		"github-timeout": (5 * time.Second).String(),
		"namespaces":     "[ci,build]",
		"leader-elect":   "true",
		"log-level":      "trace", // the command line wins over the environment
	} {
		if got := get(flag); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
}

func TestControllerRefusesBadSettings(t *testing.T) {
	t.Setenv("GANTRY_CONCURRENCY", "many")
	cmd := newControllerCommand()
	if err := applyEnv(cmd.Flags()); err == nil || !strings.Contains(err.Error(), "GANTRY_CONCURRENCY") {
		t.Errorf("bad GANTRY_CONCURRENCY: got %v, want an error naming it", err)
	}
	for _, tt := range []struct{ format, level, want string }{
		{"xml", "info", "--log-format"},
		{"json", "loud", "--log-level"},
	} {
		if _, err := newLogger(tt.format, tt.level); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("newLogger(%q, %q) = %v, want an error naming %s", tt.format, tt.level, err, tt.want)
		}
	}
	if _, err := parseNamespacedName("no-slash"); err == nil {
		t.Error("parseNamespacedName accepted a name without a namespace")
	}
	if err := runController(&controllerFlags{logFormat: "json", logLevel: "info", webhookSecret: "no-slash"}); err == nil || !strings.Contains(err.Error(), "--webhook-secret") {
		t.Errorf("runController with a malformed webhook secret = %v, want an error naming --webhook-secret", err)
	}
}

// A logger's fields, encoded only when it writes, still reach every line it writes, through
// chains of WithValues, and a line below the level writes nothing.
func TestLoggerWritesItsFields(t *testing.T) {
	opts, err := newLogger("json", "info")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := zap.New(opts, zap.WriteTo(&buf)).WithName("runner").WithValues("Runner", "ci/r-1")
	log.V(1).Info("hidden", "detail", 1)
	log.WithValues("reconcileID", "abc").Info("Runner failed", "reason", "ImagePullFailed")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("wrote %d lines, want the one at info:\n%s", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"logger": "runner", "Runner": "ci/r-1", "reconcileID": "abc", "reason": "ImagePullFailed", "msg": "Runner failed"} {
		if got[k] != want {
			t.Errorf("%s = %v, want %q in %s", k, got[k], want, lines[0])
		}
	}
}
