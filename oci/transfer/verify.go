package transfer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"

	"github.com/bothy-sandbox/bothy/oci"
)

// containers/image checks a blob against its digest, and a manifest against
// the digest of a reference or of an index's instance, but not an oci: or
// oci-archive: manifest against the index.json entry that names it, and no
// size anywhere. bothy does not rely on it: every source is wrapped so that
// each manifest, index, config and layer it serves is checked against the
// descriptor that names it, digest and size, before copy.Image sees it.

// verifiedRef is a source reference whose image sources check what they
// serve (verifiedSource).
type verifiedRef struct {
	types.ImageReference
	// top is what the source's top-level manifest or index must be: a
	// reference's digest (size unknown), an index.json entry. nil when
	// nothing names it (a tag, a docker archive).
	top   *v1.Descriptor
	state *verifyState
}

// verifyState is what the sources of a verifiedRef learned.
type verifyState struct {
	mu          sync.Mutex
	topVerified bool // the top-level manifest matched top
}

// verified returns the digest the top-level manifest was verified to have,
// or "" if nothing claimed one.
func (r verifiedRef) verified() digest.Digest {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	if r.top == nil || !r.state.topVerified {
		return ""
	}
	return r.top.Digest
}

func newVerifiedRef(ref types.ImageReference, top *v1.Descriptor) verifiedRef {
	return verifiedRef{ImageReference: ref, top: top, state: &verifyState{}}
}

func (r verifiedRef) NewImageSource(ctx context.Context, sys *types.SystemContext) (types.ImageSource, error) {
	src, err := r.ImageReference.NewImageSource(ctx, sys)
	if err != nil {
		return nil, err
	}
	return &verifiedSource{ImageSource: src, ref: r, instances: map[digest.Digest]v1.Descriptor{}}, nil
}

func (r verifiedRef) NewImage(ctx context.Context, sys *types.SystemContext) (types.ImageCloser, error) {
	src, err := r.NewImageSource(ctx, sys)
	if err != nil {
		return nil, err
	}
	return image.FromSource(ctx, sys, src)
}

// verifiedSource checks what an image source serves:
//   - the top-level manifest or index against the verifiedRef's top,
//   - an instance of that index against the index's descriptor for it,
//   - a blob (config, layer) against the BlobInfo copy.Image asks for, which
//     it takes from the verified manifest: the reader fails in place of EOF
//     on a wrong digest or size, and as soon as it is longer than claimed.
//
// Mismatches are *oci.MismatchError, naming the descriptor.
type verifiedSource struct {
	types.ImageSource
	ref verifiedRef

	mu        sync.Mutex
	instances map[digest.Digest]v1.Descriptor // of the verified top-level index
}

func (s *verifiedSource) GetManifest(ctx context.Context, instanceDigest *digest.Digest) ([]byte, string, error) {
	b, mt, err := s.ImageSource.GetManifest(ctx, instanceDigest)
	if err != nil {
		return nil, "", err
	}
	if instanceDigest != nil {
		s.mu.Lock()
		desc, ok := s.instances[*instanceDigest]
		s.mu.Unlock()
		if !ok {
			desc = oci.Descriptor(mt, *instanceDigest)
		}
		if err := verifyManifest(desc, b, mt); err != nil {
			return nil, "", err
		}
		return b, mt, nil
	}
	if top := s.ref.top; top != nil {
		desc := *top
		if desc.MediaType == "" {
			desc.MediaType = mt // a reference's digest says nothing of the type
		}
		if err := verifyManifest(desc, b, mt); err != nil {
			return nil, "", err
		}
		s.ref.state.mu.Lock()
		s.ref.state.topVerified = true
		s.ref.state.mu.Unlock()
	}
	if manifest.MIMETypeIsMultiImage(mt) {
		var idx v1.Index // an OCI index and a Docker list have the same manifests[]
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, "", fmt.Errorf("index: %v: %w", err, oci.ErrCorrupt)
		}
		s.mu.Lock()
		for _, d := range idx.Manifests {
			if _, dup := s.instances[d.Digest]; !dup {
				s.instances[d.Digest] = d
			}
		}
		s.mu.Unlock()
	}
	return b, mt, nil
}

// verifyManifest checks manifest or index bytes against desc.
func verifyManifest(desc v1.Descriptor, b []byte, mt string) error {
	if mt == manifest.DockerV2Schema1SignedMediaType {
		// The digest of a signed schema 1 manifest leaves the signatures out.
		if d, err := manifest.Digest(b); err == nil && d == desc.Digest && (desc.Size < 0 || desc.Size == int64(len(b))) {
			return nil
		}
	}
	return oci.VerifyBytes(desc, b)
}

func (s *verifiedSource) GetBlob(ctx context.Context, info types.BlobInfo, cache types.BlobInfoCache) (io.ReadCloser, int64, error) {
	rc, size, err := s.ImageSource.GetBlob(ctx, info, cache)
	if err != nil {
		return nil, 0, err
	}
	if info.Digest == "" {
		return rc, size, nil // nothing to check against; the store names it by its content
	}
	want := info.Size
	if want < 0 {
		want = -1
	}
	vr, err := oci.VerifyReader(rc, v1.Descriptor{MediaType: info.MediaType, Digest: info.Digest, Size: want})
	if err != nil {
		rc.Close()
		return nil, 0, err
	}
	return readCloser{vr, rc}, size, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// pinnedDescriptor is the descriptor a docker:// reference pins the image to:
// its digest, if it has one.
func pinnedDescriptor(ref types.ImageReference) *v1.Descriptor {
	if c, ok := ref.DockerReference().(reference.Canonical); ok {
		d := oci.Descriptor("", c.Digest())
		return &d
	}
	return nil
}
