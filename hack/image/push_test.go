package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPush pushes a two-architecture image, as `make image-push` does, to a registry
// on loopback and reads it back: an index with one linux image per architecture, each
// running gantry as the nonroot user.
func TestPush(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials: the registry needs none
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	var spec []string
	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(dir, "gantry-"+arch)
		if err := os.WriteFile(bin, []byte("#!/bin/true "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		spec = append(spec, arch+"="+bin)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/gantry:v0.1.0"
	var out bytes.Buffer
	if err := run([]string{"--ref", ref, "--version", "v0.1.0", "--push", strings.Join(spec, ",")}, &out); err != nil {
		t.Fatalf("push: %v", err)
	}
	if !strings.Contains(out.String(), "pushed "+ref+"@sha256:") {
		t.Errorf("output %q does not name the pushed digest", out.String())
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag)
	if err != nil {
		t.Fatalf("reading the pushed index: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture || cf.Config.User != User || cf.Config.Entrypoint[0] != BinaryPath {
			t.Errorf("image for %s: arch %s user %s entrypoint %v", d.Platform.Architecture, cf.Architecture, cf.Config.User, cf.Config.Entrypoint)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	if err := run([]string{"--ref", ref, "--push", "amd64"}, &out); err == nil {
		t.Error("--push amd64 (no path) was accepted")
	}
}

// With --layout the multi-architecture image is written as an OCI image layout, not
// pushed: one index named by --ref, with linux/amd64 and linux/arm64 in it.
func TestPushToLayout(t *testing.T) {
	dir := t.TempDir()
	var spec []string
	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(dir, "gantry-"+arch)
		if err := os.WriteFile(bin, []byte("#!/bin/true "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		spec = append(spec, arch+"="+bin)
	}
	out := filepath.Join(dir, "oci")
	var stdout bytes.Buffer
	if err := run([]string{"--ref", "ghcr.io/gantry-dev/gantry:v0.2.0", "--version", "v0.2.0", "--push", strings.Join(spec, ","), "--layout", out}, &stdout); err != nil {
		t.Fatalf("--layout: %v", err)
	}
	p, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil || len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "ghcr.io/gantry-dev/gantry:v0.2.0" {
		t.Fatalf("layout index %+v, %v: want one entry named ghcr.io/gantry-dev/gantry:v0.2.0", tm, err)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	if strings.Join(platforms, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
}
