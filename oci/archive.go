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
// containers/image: every blob is verified against its name as it is
// copied, and the image is recorded only once it is complete. It names the
// image name (local rules; empty leaves it unnamed). package transfer's
// ImportArchive takes every kind of archive.
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
	var created []digest.Digest
	defer func() {
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
			_, _, isNew, err := s.WriteBlob(ctx, tr, d, h.Size)
			if err != nil {
				return fail(fmt.Errorf("archive entry %s: %w", entry, err))
			}
			if isNew {
				created = append(created, d)
			}
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
	if mt := idx.Manifests[0].MediaType; mt != v1.MediaTypeImageManifest {
		return fail(fmt.Errorf("the image is a %s, not an image manifest: use bothy load", mt))
	}
	img, err = s.CommitImage(ctx, idx.Manifests[0].Digest, names)
	if err != nil {
		return fail(err)
	}
	return img, nil
}
