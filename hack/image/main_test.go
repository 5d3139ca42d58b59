package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	testVersion = "v0.0.0-imagetest"
	testCommit  = "abc1234"
	testRef     = "example.test/gantry:" + testVersion
)

// made is what TestMain's `make image` produced: the output directory, or why it
// failed.
var made struct {
	dir    string
	err    error
	output []byte
}

// TestMain runs `make image` before the tests start: compiling gantry takes minutes on
// a cold build cache, which must not count against the test timeout.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gantry-image-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	made.dir = dir
	made.output, made.err = makeImage(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func makeImage(out string) ([]byte, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("make"); err != nil {
		return nil, fmt.Errorf("make is not installed, so `make image` cannot be tested (CI's .ci/run installs it): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-C", root, "image",
		"CONTAINER_ENGINE=none", "IMAGE_DIR="+out, "IMAGE="+testRef,
		"VERSION="+testVersion, "COMMIT="+testCommit)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
	return cmd.CombinedOutput()
}

// TestMakeImageWithoutEngine checks the image `make image` built the way a machine
// without docker or podman does: its config (user, entrypoint, labels), its files
// (nonroot user, CA certificates, /tmp), a static binary, and that the binary prints
// the version the Makefile stamped into it.
func TestMakeImageWithoutEngine(t *testing.T) {
	if made.err != nil {
		t.Fatalf("make image: %v\n%s", made.err, made.output)
	}
	out := made.dir
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	img := imageFromLayout(t, filepath.Join(out, "oci"))
	arch := runtime.GOARCH

	t.Run("config", func(t *testing.T) {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != arch {
			t.Errorf("platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, arch)
		}
		if cf.Config.User != "65532" {
			t.Errorf("user = %q, want 65532 (nonroot)", cf.Config.User)
		}
		if diff := cmp.Diff([]string{"/usr/local/bin/gantry"}, cf.Config.Entrypoint); diff != "" {
			t.Errorf("entrypoint (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"controller"}, cf.Config.Cmd); diff != "" {
			t.Errorf("cmd (-want +got):\n%s", diff)
		}
		wantLabels := map[string]string{
			"org.opencontainers.image.version":  testVersion,
			"org.opencontainers.image.revision": testCommit,
			"org.opencontainers.image.source":   "https://github.com/gantry-dev/gantry",
			"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
		}
		for k, want := range wantLabels {
			if got := cf.Config.Labels[k]; got != want {
				t.Errorf("label %s = %q, want %q", k, got, want)
			}
		}
		mt, err := img.MediaType()
		if err != nil || mt != types.OCIManifestSchema1 {
			t.Errorf("manifest media type = %q (%v), want %q", mt, err, types.OCIManifestSchema1)
		}
	})

	files := flatten(t, img)

	t.Run("base", func(t *testing.T) {
		passwd := string(files.data("etc/passwd", t))
		if !strings.Contains(passwd, "\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n") {
			t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", passwd)
		}
		if group := string(files.data("etc/group", t)); !strings.Contains(group, "\nnonroot:x:65532:\n") {
			t.Errorf("/etc/group has no nonroot group 65532:\n%s", group)
		}
		if h := files.header("tmp", t); h.Typeflag != tar.TypeDir || h.Mode&0o7777 != 0o1777 {
			t.Errorf("/tmp: type %q mode %o, want a directory with mode 1777", h.Typeflag, h.Mode&0o7777)
		}
		if h := files.header("home/nonroot", t); h.Uid != 65532 || h.Gid != 65532 {
			t.Errorf("/home/nonroot is owned by %d:%d, want 65532:65532", h.Uid, h.Gid)
		}
		pool, n := parseCerts(t, files.data("etc/ssl/certs/ca-certificates.crt", t))
		if n < 100 || pool == nil {
			t.Errorf("the CA bundle holds %d certificates, want Mozilla's root store (over 100)", n)
		}
	})

	t.Run("static binary prints the stamped version", func(t *testing.T) {
		h := files.header("usr/local/bin/gantry", t)
		if h.Mode&0o777 != 0o755 || h.Uid != 0 {
			t.Errorf("/usr/local/bin/gantry: mode %o owner %d, want 755 owned by root", h.Mode&0o777, h.Uid)
		}
		bin := filepath.Join(t.TempDir(), "gantry")
		if err := os.WriteFile(bin, files.data("usr/local/bin/gantry", t), 0o755); err != nil {
			t.Fatal(err)
		}
		assertStatic(t, bin)
		if runtime.GOOS != "linux" {
			t.Logf("not running the linux binary on %s", runtime.GOOS)
			return
		}
		run := exec.CommandContext(ctx, bin, "version", "--json")
		b, err := run.Output()
		if err != nil {
			t.Fatalf("gantry version --json: %v", err)
		}
		var got struct{ Version, Commit, Platform string }
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("gantry version --json printed %q: %v", b, err)
		}
		want := struct{ Version, Commit, Platform string }{testVersion, testCommit, "linux/" + arch}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("gantry version (-want +got):\n%s", diff)
		}
	})

	t.Run("tarball holds the same image", func(t *testing.T) {
		tag, err := name.NewTag(testRef)
		if err != nil {
			t.Fatal(err)
		}
		fromTar, err := tarball.ImageFromPath(filepath.Join(out, TarballName(arch)), &tag)
		if err != nil {
			t.Fatalf("reading the tarball: %v", err)
		}
		// The tarball's manifest is docker's, rebuilt on load: compare what it carries.
		want, _ := img.ConfigName()
		got, err := fromTar.ConfigName()
		if err != nil || got != want {
			t.Errorf("tarball image config = %v (%v), want the layout's %v", got, err, want)
		}
	})
}

// TestBuildIsReproducible builds the same inputs twice and wants the same digest; a
// different version gives a different one.
func TestBuildIsReproducible(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gantry")
	if err := os.WriteFile(bin, []byte("\x7fELF not really a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{Binary: bin, Arch: "arm64", Ref: testRef, Version: testVersion, Revision: testCommit,
		Source: "https://github.com/gantry-dev/gantry", Created: time.Unix(1700000000, 0).UTC()}
	digest := func(o Options) v1.Hash {
		img, err := Build(o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first, second := digest(o), digest(o)
	if first != second {
		t.Errorf("two builds of the same inputs: %v and %v, want one digest", first, second)
	}
	o.Version = "v0.0.1"
	if other := digest(o); other == first {
		t.Errorf("another version built the same digest %v", other)
	}
}

// TestDockerfileMatchesDaemonlessImage checks that the Dockerfile, which needs an
// engine this test cannot count on, builds the image the daemonless path builds: the
// same base, user, binary path, entrypoint and default command, with the Makefile's
// version flags.
func TestDockerfileMatchesDaemonlessImage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]string // instructions of each stage, continuation lines joined
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		ins := cur.String()
		cur.Reset()
		if strings.HasPrefix(ins, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], ins)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a runtime stage", len(stages))
	}
	build, final := strings.Join(stages[0], "\n"), stages[len(stages)-1]
	if !strings.Contains(build, "make build") {
		t.Errorf("the build stage does not run `make build`, so the binary would miss the Makefile's version flags:\n%s", build)
	}
	want := []string{
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"COPY --from=build /src/bin/gantry " + BinaryPath,
		"USER " + User,
		`ENTRYPOINT ["` + BinaryPath + `"]`,
		`CMD ["` + DefaultCommand + `"]`,
	}
	for _, w := range want {
		found := false
		for _, ins := range final {
			found = found || ins == w
		}
		if !found {
			t.Errorf("the Dockerfile's runtime stage has no %q:\n%s", w, strings.Join(final, "\n"))
		}
	}
	labels := strings.Join(final, "\n")
	for k := range Labels(Options{}) {
		if k == "org.opencontainers.image.created" {
			continue // docker build records the creation time itself
		}
		if !strings.Contains(labels, k+"=") {
			t.Errorf("the Dockerfile does not set label %s, which the daemonless image has", k)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "Dockerfile")); err != nil {
		t.Fatalf("the repository root %s has no Dockerfile: %v", dir, err)
	}
	return dir
}

func imageFromLayout(t *testing.T, dir string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout %s: %v", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("the OCI layout holds %d manifests, want 1", len(m.Manifests))
	}
	if ref := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != testRef {
		t.Errorf("ref.name = %q, want %q", ref, testRef)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

type entry struct {
	h    *tar.Header
	data []byte
}

type tree map[string]entry

func (tr tree) header(p string, t *testing.T) *tar.Header {
	t.Helper()
	e, ok := tr[p]
	if !ok {
		t.Fatalf("the image has no /%s", p)
	}
	return e.h
}

func (tr tree) data(p string, t *testing.T) []byte {
	t.Helper()
	tr.header(p, t)
	return tr[p].data
}

// flatten reads the image's merged filesystem.
func flatten(t *testing.T, img v1.Image) tree {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	out := tree{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading the image's files: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")] = entry{h: h, data: b}
	}
}

func parseCerts(t *testing.T, b []byte) (*x509.CertPool, int) {
	t.Helper()
	pool := x509.NewCertPool()
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("certificate %d of the CA bundle: %v", n, err)
		}
		pool.AddCert(c)
		n++
	}
	return pool, n
}

// assertStatic fails unless the ELF binary at path needs no dynamic loader and no
// shared library: distroless's static image has neither.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("the image's gantry is not an ELF binary: %v", err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("gantry has a program interpreter: it is dynamically linked (build with CGO_ENABLED=0)")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("gantry needs shared libraries %v: it must be static", libs)
	}
}
