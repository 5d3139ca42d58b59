package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAssetsDirNamesTheBuildCommandWhenBinariesAreMissing(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", empty)
	_, err := AssetsDir("unused")
	if err == nil {
		t.Fatal("AssetsDir succeeded on an empty directory")
	}
	for _, want := range []string{"make k8s-bins", "etcd", "kube-apiserver", empty} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestAssetsDirAcceptsExecutables(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	got, err := AssetsDir("unused")
	if err != nil {
		t.Fatalf("AssetsDir: %v", err)
	}
	if got != dir {
		t.Errorf("AssetsDir = %q, want %q", got, dir)
	}
}

func TestRepoRootFindsTheModule(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "crd", "bases")); err != nil {
		t.Errorf("repository root %s has no config/crd/bases: %v", root, err)
	}
}
