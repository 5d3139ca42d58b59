package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Push uploads one image per architecture to ref as a multi-architecture OCI index,
// signing in with the credentials `docker login`, `podman login` or `crane auth login`
// stored (the docker config), and returns the index's digest. A registry on localhost
// or 127.0.0.1 is spoken to over plain HTTP, as docker does.
func Push(ref name.Tag, images map[string]v1.Image, opts ...remote.Option) (v1.Hash, error) {
	if len(images) == 0 {
		return v1.Hash{}, fmt.Errorf("no image to push")
	}
	idx := Index(images)
	opts = append([]remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return idx.Digest()
}

// Index is the multi-architecture OCI index of one image per architecture, in the order
// of the architectures' names.
func Index(images map[string]v1.Image) v1.ImageIndex {
	archs := make([]string, 0, len(images))
	for a := range images {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, a := range archs {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        images[a],
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: a}},
		})
	}
	return idx
}

// WriteIndex writes the multi-architecture index of images, named ref, as an OCI image
// layout in dir (what `make release-dry-run` keeps instead of pushing; `skopeo copy
// oci:DIR docker://…` or `crane push DIR …` pushes it later), and returns its digest.
func WriteIndex(dir string, ref name.Tag, images map[string]v1.Image) (v1.Hash, error) {
	if len(images) == 0 {
		return v1.Hash{}, fmt.Errorf("no image to write")
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	idx := Index(images)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
		return v1.Hash{}, fmt.Errorf("writing the OCI layout: %w", err)
	}
	return idx.Digest()
}
