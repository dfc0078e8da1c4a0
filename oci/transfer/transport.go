package transfer

import (
	"context"
	"errors"
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

// The store as a containers/image transport, so copy.Image can write into
// it (pull, import of archives) and read from it (save). It is not
// registered globally: references are made in code only.

// storeTransport is the transport of store references.
type storeTransport struct{}

var _ types.ImageTransport = storeTransport{}

func (storeTransport) Name() string { return "bothy-store" }

func (storeTransport) ParseReference(string) (types.ImageReference, error) {
	return nil, errors.New("bothy-store references cannot be parsed")
}

func (storeTransport) ValidatePolicyConfigurationScope(string) error { return nil }

// storeRef is a store image: the source of a save (digest set) or the
// destination of a pull (dest set).
type storeRef struct {
	s      *oci.Store
	digest digest.Digest // source: manifest digest
	dest   *storeDest    // destination
}

var _ types.ImageReference = storeRef{}

func (r storeRef) Transport() types.ImageTransport { return storeTransport{} }

func (r storeRef) StringWithinTransport() string {
	if r.digest != "" {
		return r.s.Root() + "@" + r.digest.String()
	}
	return r.s.Root()
}

func (r storeRef) DockerReference() reference.Named { return nil }
func (r storeRef) PolicyConfigurationIdentity() string {
	return r.s.Root()
}
func (r storeRef) PolicyConfigurationNamespaces() []string { return nil }

func (r storeRef) NewImage(ctx context.Context, sys *types.SystemContext) (types.ImageCloser, error) {
	src, err := r.NewImageSource(ctx, sys)
	if err != nil {
		return nil, err
	}
	return image.FromSource(ctx, sys, src)
}

func (r storeRef) NewImageSource(ctx context.Context, sys *types.SystemContext) (types.ImageSource, error) {
	if r.digest == "" {
		return nil, errors.New("bothy-store: reference has no image")
	}
	b, err := r.s.ReadBlob(r.digest, oci.MaxManifestSize)
	if err != nil {
		return nil, err
	}
	return &storeSource{ref: r, manifest: b}, nil
}

func (r storeRef) NewImageDestination(ctx context.Context, sys *types.SystemContext) (types.ImageDestination, error) {
	if r.dest == nil {
		return nil, errors.New("bothy-store: reference is not a destination")
	}
	return r.dest, nil
}

func (r storeRef) DeleteImage(ctx context.Context, sys *types.SystemContext) error {
	return errors.New("bothy-store: delete images with Store.Remove")
}

// storeDest receives one image from copy.Image. Every blob is verified
// while written against the digest and size copy.Image gives (the source's
// descriptor) and renamed into place; manifests included. It records the
// blobs it created (for rollback) and the manifest digest.
type storeDest struct {
	s *oci.Store

	mu       sync.Mutex
	created  []digest.Digest
	manifest digest.Digest
}

var _ types.ImageDestination = (*storeDest)(nil)

func (d *storeDest) Reference() types.ImageReference { return storeRef{s: d.s, dest: d} }
func (d *storeDest) Close() error                    { return nil }
func (d *storeDest) SupportedManifestMIMETypes() []string {
	return []string{v1.MediaTypeImageManifest}
}
func (d *storeDest) SupportsSignatures(context.Context) error {
	return errors.New("the bothy image store does not keep signatures")
}

// DesiredLayerCompression keeps layers as the source has them: no
// recompression, so digests are preserved (docker-archive layers stay
// uncompressed tars).
func (d *storeDest) DesiredLayerCompression() types.LayerCompression { return types.PreserveOriginal }
func (d *storeDest) AcceptsForeignLayerURLs() bool                   { return false }
func (d *storeDest) MustMatchRuntimeOS() bool                        { return false }
func (d *storeDest) IgnoresEmbeddedDockerReference() bool            { return true }
func (d *storeDest) HasThreadSafePutBlob() bool                      { return true }

func (d *storeDest) PutBlob(ctx context.Context, stream io.Reader, info types.BlobInfo, _ types.BlobInfoCache, _ bool) (types.BlobInfo, error) {
	size := info.Size
	if size < 0 {
		size = -1
	}
	if info.Digest == "" { // content copy.Image made (recompressed): named by its digest
		dg, n, created, err := d.s.WriteBlob(ctx, stream, "", size)
		if err != nil {
			return types.BlobInfo{}, err
		}
		d.noteCreated(dg, created)
		return types.BlobInfo{Digest: dg, Size: n}, nil
	}
	n, created, err := d.s.WriteBlobDescriptor(ctx, stream, v1.Descriptor{MediaType: info.MediaType, Digest: info.Digest, Size: size})
	if err != nil {
		return types.BlobInfo{}, err
	}
	d.noteCreated(info.Digest, created)
	return types.BlobInfo{Digest: info.Digest, Size: n}, nil
}

func (d *storeDest) noteCreated(dg digest.Digest, created bool) {
	if created {
		d.mu.Lock()
		d.created = append(d.created, dg)
		d.mu.Unlock()
	}
}

// TryReusingBlob reuses a blob the store already has (same digest and, when
// known, same size). The caller holds gc.lock shared, so it cannot vanish.
func (d *storeDest) TryReusingBlob(ctx context.Context, info types.BlobInfo, _ types.BlobInfoCache, _ bool) (bool, types.BlobInfo, error) {
	if info.Digest == "" {
		return false, types.BlobInfo{}, errors.New("bothy-store: cannot reuse a blob with unknown digest")
	}
	size := info.Size // a size of 0 is a claim too: only -1 means unknown
	if size < 0 {
		size = -1
	}
	n, ok := d.s.HasBlob(info.Digest, size)
	if !ok {
		return false, types.BlobInfo{}, nil
	}
	return true, types.BlobInfo{Digest: info.Digest, Size: n}, nil
}

func (d *storeDest) PutManifest(ctx context.Context, m []byte, instanceDigest *digest.Digest) error {
	if instanceDigest != nil {
		return errors.New("bothy-store: manifest lists are not stored; copy one image")
	}
	mt := manifest.GuessMIMEType(m)
	if mt != v1.MediaTypeImageManifest {
		return fmt.Errorf("bothy-store: manifest type %q, want %s", mt, v1.MediaTypeImageManifest)
	}
	dg, created, err := d.s.WriteBlobBytes(ctx, m)
	if err != nil {
		return err
	}
	d.noteCreated(dg, created)
	d.mu.Lock()
	d.manifest = dg
	d.mu.Unlock()
	return nil
}

func (d *storeDest) PutSignatures(ctx context.Context, sigs [][]byte, _ *digest.Digest) error {
	if len(sigs) > 0 {
		return errors.New("the bothy image store does not keep signatures")
	}
	return nil
}

func (d *storeDest) Commit(ctx context.Context, _ types.UnparsedImage) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.manifest == "" {
		return errors.New("bothy-store: commit without a manifest")
	}
	return nil
}

func (d *storeDest) result() (digest.Digest, []digest.Digest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.manifest, append([]digest.Digest(nil), d.created...)
}

// storeSource serves one store image to copy.Image.
type storeSource struct {
	ref      storeRef
	manifest []byte
}

var _ types.ImageSource = (*storeSource)(nil)

func (src *storeSource) Reference() types.ImageReference { return src.ref }
func (src *storeSource) Close() error                    { return nil }

func (src *storeSource) GetManifest(ctx context.Context, instanceDigest *digest.Digest) ([]byte, string, error) {
	if instanceDigest != nil && *instanceDigest != src.ref.digest {
		return nil, "", fmt.Errorf("manifest %s: %w", *instanceDigest, oci.ErrNotFound)
	}
	return src.manifest, manifest.GuessMIMEType(src.manifest), nil
}

func (src *storeSource) GetBlob(ctx context.Context, info types.BlobInfo, _ types.BlobInfoCache) (io.ReadCloser, int64, error) {
	r, size, err := src.ref.s.OpenBlobSize(info.Digest)
	if err != nil {
		return nil, 0, err
	}
	return r, size, nil
}

func (src *storeSource) HasThreadSafeGetBlob() bool { return true }

func (src *storeSource) GetSignatures(context.Context, *digest.Digest) ([][]byte, error) {
	return nil, nil
}

func (src *storeSource) LayerInfosForCopy(context.Context, *digest.Digest) ([]types.BlobInfo, error) {
	return nil, nil
}
