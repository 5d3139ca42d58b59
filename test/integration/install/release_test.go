//go:build release

package install

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestReleaseRehearsal installs the release `make release-dry-run` built (its directory
// in GANTRY_RELEASE_DIR, its version in GANTRY_RELEASE_VERSION, the pinned cosign in
// GANTRY_COSIGN) the way docs/install.md's "From a release" says, on a cluster of its
// own with the GitHub simulator. The blocks marked `<!-- release: ID -->` run as
// written, the release's files in the working directory where the download puts them;
// what needs ghcr.io or GitHub's OIDC is done the test's own way, and said so in the
// log. It is built only with the tag release: dry-run.sh runs it.
func TestReleaseRehearsal(t *testing.T) {
	dir, version, cosign := os.Getenv("GANTRY_RELEASE_DIR"), os.Getenv("GANTRY_RELEASE_VERSION"), os.Getenv("GANTRY_COSIGN")
	if dir == "" || version == "" || cosign == "" {
		t.Fatal("GANTRY_RELEASE_DIR, GANTRY_RELEASE_VERSION and GANTRY_COSIGN must name a `make release-dry-run` output: run that")
	}
	w := newDocWorld(t)
	w.subst["YOUR_VERSION"] = version
	if err := os.Symlink(cosign, filepath.Join(w.binDir, "cosign")); err != nil {
		t.Fatal(err)
	}
	// The download: the files of the GitHub release, for linux/amd64.
	dist := filepath.Join(dir, "dist")
	archive := fmt.Sprintf("gantry_%s_linux_amd64.tar.gz", version)
	for _, f := range []string{archive, "gantry-crds.yaml", "gantry-image.digest", "checksums.txt", "checksums.txt.sigstore.json"} {
		copyFile(t, filepath.Join(dist, f), filepath.Join(w.dir, f))
	}
	t.Logf("the release's files, as downloaded: %s and the rest in %s", archive, w.dir)

	// The signature: the doc's keyless check, as written, must take its command line
	// (cosign parses the flags and the identity before it goes to the network) and
	// refuse the dry run's bundle, which carries no certificate. Where Sigstore's TUF
	// repository cannot be reached, cosign stops there, before it reads the bundle: that
	// is said in the log. The bundle is then checked with the dry run's key.
	b := w.blocks[install+"verify-signature"]
	out, stderr, err := w.shell(t, w.substitute(t, b))
	low := strings.ToLower(stderr)
	switch {
	case err == nil:
		t.Errorf("%s accepted a bundle signed with a throwaway key: %s", b.where(), out)
	case slices.ContainsFunc(cosignUsageErrors, func(e string) bool { return strings.Contains(low, e) }):
		t.Errorf("%s: cosign refused the command line as written: %s", b.where(), stderr)
	case strings.Contains(low, "tuf"):
		t.Logf("%s as written: command line accepted; Sigstore's TUF repository is out of reach here, so cosign stopped before reading the bundle (not exercised: its refusal for want of a certificate): %s", b.ref(), lastLine(stderr))
	case !strings.Contains(low, "cert"):
		t.Errorf("%s: want cosign to refuse the dry run's bundle for lacking a certificate; got %v: %s", b.where(), err, stderr)
	default:
		t.Logf("%s as written: refused for want of a certificate, as a keyless release's bundle would not be: %s", b.ref(), lastLine(stderr))
	}
	copyFile(t, filepath.Join(dir, "cosign.pub"), filepath.Join(w.dir, "cosign.pub"))
	if _, stderr, err := w.shell(t, "cosign verify-blob checksums.txt --bundle checksums.txt.sigstore.json --key cosign.pub --insecure-ignore-tlog=true"); err != nil {
		t.Fatalf("the dry run's signature of checksums.txt does not verify with its key: %v: %s", err, stderr)
	}
	t.Log("the test's own way: checksums.txt's signature verified with the dry run's public key")

	// The files against the signed checksums, and the CLI.
	out = w.runBlock(t, install+"verify-files")
	if !strings.Contains(out, "v"+version) {
		t.Errorf("./gantry version printed %q, want v%s", out, version)
	}
	for _, f := range []string{archive, "gantry-crds.yaml", "gantry-image.digest"} {
		if !strings.Contains(out, f+": OK") {
			t.Errorf("the documented check did not check %s against checksums.txt (%q): is it listed?", f, out)
		}
	}

	// The image archive: what the chart will name, under the digest the release signed.
	digest := strings.TrimSpace(readFile(t, filepath.Join(w.dir, "gantry-image.digest")))
	ref, gantryBin := checkImageArchive(t, filepath.Join(dir, "image", "gantry-image.tar"), digest, version)

	// The CRDs, then the chart from its package with the release's digest.
	w.runBlock(t, install+"crds")
	charts, err := filepath.Glob(filepath.Join(dir, "chart", "gantry-*.tgz"))
	if err != nil || len(charts) != 1 {
		t.Fatalf("the dry run's chart package: %v %v", charts, err)
	}
	helmInstall := fmt.Sprintf(`helm install gantry %s -n gantry-system --create-namespace --set image.digest="$(cat gantry-image.digest)"`, charts[0])
	t.Logf("the test's own way: %s (the doc's pulls oci://ghcr.io/gantry-dev/charts/gantry)", helmInstall)
	if _, stderr, err := w.shell(t, helmInstall); err != nil {
		t.Fatalf("%s: %v: %s", helmInstall, err, stderr)
	}
	wantImage := ref + "@" + digest
	imageIs("gantry-system", "gantry", wantImage).act(t, w)

	// The released binary runs as the Deployment's controller, and a pool is Ready.
	w.gantry = gantryBin
	for _, st := range []docStep{
		startController("gantry-system", "gantry"),
		block(quickstart + "app-secret"),
		block(quickstart + "pool-file"),
		block(quickstart + "pool-apply"),
		poolReady("ci", "linux-x64"),
	} {
		if st.doc != "" {
			w.runBlock(t, st.doc)
			continue
		}
		t.Logf("test: %s", st.what)
		st.act(t, w)
	}

	// An upgrade to the same release: its CRDs over Helm's, then the chart again.
	w.runBlock(t, install+"upgrade-crds")
	helmUpgrade := fmt.Sprintf(`helm upgrade gantry %s -n gantry-system --reset-then-reuse-values --set image.digest="$(cat gantry-image.digest)"`, charts[0])
	if _, stderr, err := w.shell(t, helmUpgrade); err != nil {
		t.Fatalf("%s: %v: %s", helmUpgrade, err, stderr)
	}
	var d appsv1.Deployment
	if err := w.cluster.c.Get(context.Background(), client.ObjectKey{Namespace: "gantry-system", Name: "gantry"}, &d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != wantImage {
		t.Errorf("after the upgrade the image is %q, want %q", img, wantImage)
	}
	w.noCallRefused(t)
	t.Log("not exercised: pulling from ghcr.io or github.com, the keyless signature, running the image in a container runtime (the test cluster has no kubelet)")
}

// cosignUsageErrors are what cosign v2 says when it refuses a command line: an unknown
// flag (cobra), or flags that do not go together (verify-blob, the identity options).
var cosignUsageErrors = []string{"unknown flag", "unknown shorthand flag", "required flag", "provide a key with --key", "--certificate-identity or --certificate-identity-regexp is required", "--certificate-oidc-issuer or --certificate-oidc-issuer-regexp is required"}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkImageArchive reads the dry run's image archive (an OCI image layout) and checks
// that it holds one index, named for the release and with the digest the release
// signed, of a linux/amd64 and a linux/arm64 image; it returns the index's name and
// the gantry binary of the linux/amd64 image, unpacked from its layers, after running
// `gantry version` with it.
func checkImageArchive(t *testing.T, archive, digest, version string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	untar(t, archive, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("%s is not an OCI image layout: %v", archive, err)
	}
	top, err := idx.IndexManifest()
	if err != nil || len(top.Manifests) != 1 {
		t.Fatalf("%s: want one index in the layout, got %+v (%v)", archive, top, err)
	}
	desc := top.Manifests[0]
	ref := desc.Annotations["org.opencontainers.image.ref.name"]
	if want := "ghcr.io/gantry-dev/gantry:v" + version; ref != want {
		t.Errorf("the image archive is named %q, want %q: what the chart's default image names", ref, want)
	}
	if desc.Digest.String() != digest {
		t.Errorf("the image archive's index is %s; gantry-image.digest says %s", desc.Digest, digest)
	}
	images, err := idx.ImageIndex(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := images.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the image index holds %v, want linux/amd64 and linux/arm64", platforms)
	}
	var amd64 v1.Image
	for _, m := range im.Manifests {
		if m.Platform.Architecture == "amd64" {
			if amd64, err = images.Image(m.Digest); err != nil {
				t.Fatal(err)
			}
		}
	}
	if amd64 == nil {
		t.Fatal("no linux/amd64 image")
	}
	cfg, err := amd64.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Entrypoint) != 1 {
		t.Fatalf("the image's entrypoint is %q, want the gantry binary", cfg.Config.Entrypoint)
	}
	entry := strings.TrimPrefix(cfg.Config.Entrypoint[0], "/")
	bin := filepath.Join(t.TempDir(), "gantry")
	rc := mutate.Extract(amd64)
	defer rc.Close()
	tr := tar.NewReader(rc)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") != entry {
			continue
		}
		f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil { //nolint:gosec // the dry run's own binary
			t.Fatal(err)
		}
		f.Close()
		found = true
	}
	if !found {
		t.Fatalf("the linux/amd64 image's layers hold no %s, its entrypoint", entry)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "v"+version) {
		t.Errorf("the image's gantry version: %v: %s; want v%s", err, out, version)
	}
	t.Logf("image archive: %s@%s, linux/amd64 and linux/arm64; the amd64 image's %s says %s", ref, digest, entry, strings.TrimSpace(string(out)))
	return ref, bin
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr) //nolint:gosec // the dry run's own archive
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
