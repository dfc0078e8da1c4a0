package oci

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// ImportOCIArchive imports the one image of an OCI archive (a tar of an OCI
// layout, as `bothy save` and the default image's build write it), without
// containers/image. The archive's blobs are staged in tmp/ and hashed; the
// chain index.json → manifest → config and layers is then checked, each
// blob against the descriptor that names it (digest and size, and the
// manifest's media type), and only then are the image's blobs moved into
// the store and the image recorded. A lie is a *MismatchError naming the
// descriptor, and the store is left as it was; blobs the image does not use
// are not kept. It names the image name (local rules; empty leaves it
// unnamed). package transfer's ImportArchive takes every kind of archive.
func (s *Store) ImportOCIArchive(ctx context.Context, path, name string) (img *Image, err error) {
	fail := func(err error) (*Image, error) { return nil, fmt.Errorf("import %s: %w", path, err) }
	var names []string
	if name != "" {
		n, err := NormalizeLocalName(name)
		if err != nil {
			return fail(err)
		}
		names = append(names, n)
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	r, err := Decompress(f)
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	release, err := s.Hold(ctx)
	if err != nil {
		return fail(err)
	}
	staged := map[digest.Digest]*stagedBlob{}
	var created []digest.Digest
	defer func() {
		for _, b := range staged {
			os.Remove(b.path) // those not placed
		}
		release()
		if err != nil {
			s.Rollback(created)
		}
	}()
	var index []byte
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(fmt.Errorf("read archive: %w", err))
		}
		entry := strings.TrimPrefix(h.Name, "./")
		switch {
		case entry == v1.ImageIndexFile:
			if index != nil {
				return fail(errors.New("archive has two index.json"))
			}
			if index, err = io.ReadAll(io.LimitReader(tr, MaxManifestSize+1)); err != nil {
				return fail(err)
			}
			if len(index) > MaxManifestSize {
				return fail(errors.New("index.json too large"))
			}
		case strings.HasPrefix(entry, "blobs/") && h.Typeflag == tar.TypeReg:
			alg, hex, _ := strings.Cut(strings.TrimPrefix(entry, "blobs/"), "/")
			d := digest.NewDigestFromEncoded(digest.Algorithm(alg), hex)
			if err := d.Validate(); err != nil {
				return fail(fmt.Errorf("archive entry %s: %w", entry, err))
			}
			if staged[d] != nil {
				return fail(fmt.Errorf("archive entry %s appears twice", entry))
			}
			b, err := s.stage(ctx, tr, d.Algorithm())
			if err != nil {
				return fail(fmt.Errorf("archive entry %s: %w", entry, err))
			}
			staged[d] = b
		}
	}
	if index == nil {
		return fail(errors.New("not an OCI archive: no index.json"))
	}
	var idx v1.Index
	if err := json.Unmarshal(index, &idx); err != nil {
		return fail(fmt.Errorf("index.json: %w", err))
	}
	if len(idx.Manifests) != 1 {
		return fail(fmt.Errorf("index.json lists %d images, want one", len(idx.Manifests)))
	}
	mdesc := idx.Manifests[0]
	if mt := mdesc.MediaType; mt != v1.MediaTypeImageManifest {
		return fail(fmt.Errorf("the image is a %s, not an image manifest: use bothy load", mt))
	}

	// The chain, each blob against its descriptor, before anything is placed.
	mb, err := s.stagedBytes(staged, mdesc, MaxManifestSize)
	if err != nil {
		return fail(fmt.Errorf("index.json: %w", err))
	}
	m, err := parseManifest(mdesc.Digest, mb)
	if err != nil {
		return fail(err)
	}
	if _, err := s.stagedBytes(staged, m.Config, maxConfigSize); err != nil {
		return fail(fmt.Errorf("manifest %s: %w", mdesc.Digest, err))
	}
	for _, l := range m.Layers {
		if err := checkStaged(staged, l, s); err != nil {
			return fail(fmt.Errorf("manifest %s: %w", mdesc.Digest, err))
		}
	}
	if err := checkDigestNames(names, mdesc.Digest, ""); err != nil {
		return fail(err)
	}

	for _, desc := range append([]v1.Descriptor{mdesc, m.Config}, m.Layers...) {
		b := staged[desc.Digest]
		if b == nil {
			continue // already in the store, or placed for an earlier descriptor
		}
		delete(staged, desc.Digest)
		isNew, err := s.placeTemp(b.path, desc.Digest)
		if err != nil {
			return fail(err)
		}
		if isNew {
			created = append(created, desc.Digest)
		}
	}
	img, err = s.CommitImage(ctx, mdesc.Digest, names)
	if err != nil {
		return fail(err)
	}
	return img, nil
}

// checkStaged checks the blob desc names, staged from the archive or else
// already in the store, against desc's digest and size.
func checkStaged(staged map[digest.Digest]*stagedBlob, desc v1.Descriptor, s *Store) error {
	if err := desc.Digest.Validate(); err != nil {
		return fmt.Errorf("%s %q: %v: %w", kindOf(desc.MediaType), desc.Digest, err, ErrCorrupt)
	}
	b := staged[desc.Digest]
	if b == nil {
		err := s.checkStored(desc)
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%s %s: in neither the archive nor the store: %w", kindOf(desc.MediaType), desc.Digest, ErrNotFound)
		}
		return err
	}
	if b.actual != desc.Digest || b.size != desc.Size {
		return &MismatchError{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, Actual: b.actual, ActualSize: b.size}
	}
	return nil
}

// stagedBytes checks the (small) blob desc names and returns its content,
// verified against desc.
func (s *Store) stagedBytes(staged map[digest.Digest]*stagedBlob, desc v1.Descriptor, limit int64) ([]byte, error) {
	if err := checkStaged(staged, desc, s); err != nil {
		return nil, err
	}
	if desc.Size > limit {
		return nil, fmt.Errorf("%s %s: %d bytes, more than the %d allowed: %w", kindOf(desc.MediaType), desc.Digest, desc.Size, limit, ErrCorrupt)
	}
	var b []byte
	var err error
	if sb := staged[desc.Digest]; sb != nil {
		b, err = os.ReadFile(sb.path)
	} else {
		b, err = s.ReadBlob(desc.Digest, limit)
	}
	if err != nil {
		return nil, err
	}
	if err := VerifyBytes(desc, b); err != nil {
		return nil, err
	}
	return b, nil
}
