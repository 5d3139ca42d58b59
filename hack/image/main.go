// Command image builds Gantry's container image without a container engine: the static
// gantry binary on a minimal nonroot base made the way distroless's static image is (an
// /etc/passwd and /etc/group with the nonroot user 65532, CA certificates, /tmp), run as
// user 65532 with gantry as the entrypoint. It writes an OCI image layout and a tarball
// that `docker load` and `podman load` read. `make image` runs it when no docker or
// podman engine is available; the Dockerfile builds the same image on
// gcr.io/distroless/static-debian12:nonroot when one is.
//
// The output depends only on its inputs: every file's time is --created, and the CA
// certificates are Mozilla's, from the pinned golang.org/x/crypto/x509roots/fallback
// module, so the same commit builds the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's shape. The Dockerfile says the same; hack/image's test checks both.
const (
	// BinaryPath is where the gantry binary lives in the image.
	BinaryPath = "/usr/local/bin/gantry"
	// User is the nonroot user and group, as in distroless's :nonroot images.
	User = "65532"
	// DefaultCommand is the argument the entrypoint runs with when none is given.
	DefaultCommand = "controller"
	// CACertificates is where the CA bundle lives, as in Debian and distroless.
	CACertificates = "/etc/ssl/certs/ca-certificates.crt"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// Options describe one image build.
type Options struct {
	// Binary is the static linux gantry binary.
	Binary string
	// Arch is its GOARCH.
	Arch string
	// Ref names the image, e.g. ghcr.io/gantry-dev/gantry:v0.1.0.
	Ref string
	// Version, Revision and Source become the org.opencontainers.image.* labels.
	Version, Revision, Source string
	// Created is the image's creation time and every file's modification time.
	Created time.Time
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o Options
	var out string
	var created int64
	fs.StringVar(&o.Binary, "binary", "", "static linux gantry binary (required)")
	fs.StringVar(&o.Arch, "arch", "amd64", "GOARCH of the binary")
	fs.StringVar(&o.Ref, "ref", "ghcr.io/gantry-dev/gantry:dev", "image name and tag")
	fs.StringVar(&o.Version, "version", "dev", "org.opencontainers.image.version label")
	fs.StringVar(&o.Revision, "revision", "unknown", "org.opencontainers.image.revision label")
	fs.StringVar(&o.Source, "source", "https://github.com/gantry-dev/gantry", "org.opencontainers.image.source label")
	fs.Int64Var(&created, "created", 0, "creation time, seconds since the epoch (SOURCE_DATE_EPOCH)")
	fs.StringVar(&out, "out", "out/image", "output directory: oci/ (an OCI image layout) and gantry-linux-ARCH.tar")
	var push, layoutDir string
	fs.StringVar(&layoutDir, "layout", "", "with --push: write the multi-architecture image as an OCI image layout in this directory instead of pushing it")
	fs.StringVar(&push, "push", "", "instead of writing files, push a multi-architecture image to --ref built from these binaries: ARCH=PATH,ARCH=PATH")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if push != "" {
		return runPush(o, created, push, layoutDir, stdout)
	}
	if o.Binary == "" {
		return errors.New("--binary is required")
	}
	o.Created = time.Unix(created, 0).UTC()
	tag, err := name.NewTag(o.Ref)
	if err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	img, err := Build(o)
	if err != nil {
		return err
	}
	if err := Write(img, tag, o.Arch, out); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s@%s\n  OCI layout: %s\n  tarball:    %s\n", tag, digest,
		filepath.Join(out, "oci"), filepath.Join(out, TarballName(o.Arch)))
	return err
}

// runPush builds one image per ARCH=PATH of spec and pushes them to o.Ref as one
// multi-architecture index, or writes that index to layoutDir.
func runPush(o Options, created int64, spec, layoutDir string, stdout io.Writer) error {
	o.Created = time.Unix(created, 0).UTC()
	tag, err := name.NewTag(o.Ref)
	if err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	images := map[string]v1.Image{}
	for _, pair := range strings.Split(spec, ",") {
		arch, bin, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || arch == "" || bin == "" {
			return fmt.Errorf("--push %q: want ARCH=PATH[,ARCH=PATH]", spec)
		}
		o.Arch, o.Binary = arch, bin
		if images[arch], err = Build(o); err != nil {
			return err
		}
	}
	if layoutDir != "" {
		digest, err := WriteIndex(layoutDir, tag, images)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s@%s (linux: %s)\n  OCI layout: %s\n", tag, digest, strings.Join(sortedKeys(images), ", "), layoutDir)
		return err
	}
	digest, err := Push(tag, images)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "pushed %s@%s (linux: %s)\n", tag, digest, strings.Join(sortedKeys(images), ", "))
	return err
}

func sortedKeys(m map[string]v1.Image) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TarballName is the name of the `docker load` tarball for arch.
func TarballName(arch string) string { return "gantry-linux-" + arch + ".tar" }

// Build assembles the image: a base layer, then the binary.
func Build(o Options) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the gantry binary: %w", err)
	}
	base, err := layer(baseFiles(), o.Created)
	if err != nil {
		return nil, fmt.Errorf("building the base layer: %w", err)
	}
	app, err := layer([]file{
		{path: "usr/", mode: 0o755, dir: true},
		{path: "usr/local/", mode: 0o755, dir: true},
		{path: "usr/local/bin/", mode: 0o755, dir: true},
		{path: BinaryPath[1:], mode: 0o755, data: bin},
	}, o.Created)
	if err != nil {
		return nil, fmt.Errorf("building the binary's layer: %w", err)
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: o.Created}, CreatedBy: "gantry hack/image: nonroot base (passwd, group, CA certificates, /tmp)",
		}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: o.Created}, CreatedBy: "gantry hack/image: " + BinaryPath,
		}},
	)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{DefaultCommand},
		WorkingDir: "/home/nonroot",
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=" + CACertificates,
		},
		Labels: Labels(o),
	}
	return mutate.ConfigFile(img, cf)
}

// Labels are the image's org.opencontainers.image.* labels.
func Labels(o Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "gantry",
		"org.opencontainers.image.description": "Gantry: GitHub Actions self-hosted runners on Kubernetes as ephemeral, just-in-time pods",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
	}
}

// Write stores img as an OCI image layout in out/oci (replacing what was there) and as
// a `docker load` tarball.
func Write(img v1.Image, tag name.Tag, arch, out string) error {
	dir := filepath.Join(out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}),
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.String()}),
	); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := tarball.WriteToFile(filepath.Join(out, TarballName(arch)), tag, img); err != nil {
		return fmt.Errorf("writing the tarball: %w", err)
	}
	return nil
}

type file struct {
	path     string // relative to /, directories end in /
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// baseFiles are what distroless's static nonroot image holds that a static Go binary
// can use: users and groups, CA certificates, name-service order, a home and /tmp.
func baseFiles() []file {
	const nonroot = 65532
	return []file{
		{path: "etc/", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, data: []byte(
			"root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n")},
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: "etc/ssl/", mode: 0o755, dir: true},
		{path: "etc/ssl/certs/", mode: 0o755, dir: true},
		{path: CACertificates[1:], mode: 0o644, data: caBundle()},
		{path: "home/", mode: 0o755, dir: true},
		{path: "home/nonroot/", mode: 0o700, dir: true, uid: nonroot, gid: nonroot},
		{path: "root/", mode: 0o700, dir: true},
		{path: "tmp/", mode: 0o1777, dir: true},
	}
}

// caBundle is Mozilla's root store as PEM. Roots that NSS trusts only for certificates
// issued before a date are left out: a PEM file cannot carry that constraint.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// layer makes an uncompressed tar of files, every entry dated created, and a layer of it.
func layer(files []file, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: f.path, Mode: f.mode, Uid: f.uid, Gid: f.gid,
			ModTime: created, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.data)),
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
