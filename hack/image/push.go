package main

import (
	"fmt"
	"sort"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
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
	opts = append([]remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return idx.Digest()
}
