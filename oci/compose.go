package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Composer writes a new image into the store from layers it already has and
// new layer tarballs: the commit step of an image build. It holds the store
// (Prune waits) from NewComposer until Close. Nothing it wrote stays behind
// unless Commit succeeds: Close rolls back the blobs of an uncommitted image.
type Composer struct {
	s  *Store
	gc *fileLock

	mu        sync.Mutex
	created   []digest.Digest
	committed bool
	closed    bool
}

// NewComposer starts composing an image. Call Close when done.
func (s *Store) NewComposer(ctx context.Context) (*Composer, error) {
	gc, err := lockFile(ctx, s.gcLockPath(), false)
	if err != nil {
		return nil, fmt.Errorf("compose image: %w", err)
	}
	return &Composer{s: s, gc: gc}, nil
}

func (c *Composer) note(d digest.Digest, created bool) {
	if created {
		c.mu.Lock()
		c.created = append(c.created, d)
		c.mu.Unlock()
	}
}

// AddLayer stores an uncompressed layer tarball as a gzip layer blob,
// deterministically (fixed compression level, no name or time in the gzip
// header): the same tar always gives the same blob digest. It may be called
// from several goroutines.
func (c *Composer) AddLayer(ctx context.Context, tarStream io.Reader) (Layer, error) {
	d, size, diffID, created, err := c.s.writeLayer(ctx, tarStream)
	if err != nil {
		return Layer{}, fmt.Errorf("add layer: %w", err)
	}
	c.note(d, created)
	return Layer{Digest: d, DiffID: diffID, MediaType: v1.MediaTypeImageLayerGzip, Size: size}, nil
}

// Commit writes cfg (its RootFS is set from layers) and a manifest for
// layers, bottom first, and records the image with names (canonical names,
// as NormalizeLocalName returns; each moves from any image that had it).
// The same config and layers always give the same manifest digest.
func (c *Composer) Commit(ctx context.Context, cfg v1.Image, layers []Layer, names []string) (*Image, error) {
	if len(layers) == 0 {
		return nil, errors.New("commit image: no layers")
	}
	cfg.RootFS = v1.RootFS{Type: "layers"}
	m := v1.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageManifest,
	}
	for _, l := range layers {
		if _, ok := c.s.HasBlob(l.Digest, l.Size); !ok {
			return nil, fmt.Errorf("commit image: layer %s: %w", l.Digest, ErrNotFound)
		}
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.DiffID)
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size})
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("commit image: %w", err)
	}
	cd, created, err := c.s.WriteBlobBytes(ctx, cb)
	if err != nil {
		return nil, fmt.Errorf("commit image: %w", err)
	}
	c.note(cd, created)
	m.Config = v1.Descriptor{MediaType: v1.MediaTypeImageConfig, Digest: cd, Size: int64(len(cb))}
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("commit image: %w", err)
	}
	md, created, err := c.s.WriteBlobBytes(ctx, mb)
	if err != nil {
		return nil, fmt.Errorf("commit image: %w", err)
	}
	c.note(md, created)
	img, err := c.s.CommitImage(ctx, md, names)
	if err != nil {
		return nil, fmt.Errorf("commit image: %w", err)
	}
	c.mu.Lock()
	c.committed = true
	c.mu.Unlock()
	return img, nil
}

// Close releases the store and, if no image was committed, removes the blobs
// the composer added that no image uses.
func (c *Composer) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	created, committed := c.created, c.committed
	c.mu.Unlock()
	c.gc.Unlock()
	if !committed {
		c.s.Rollback(created)
	}
}

// AddNames gives image md (a manifest digest) the canonical names, taking
// them from any image that had them.
func (s *Store) AddNames(ctx context.Context, md digest.Digest, names ...string) error {
	return s.updateRefs(ctx, func(db *refsDB) error {
		if db.Images[md] == nil {
			return fmt.Errorf("add names to image %s: %w", md, ErrNotFound)
		}
		if err := checkDigestNames(names, md, ""); err != nil {
			return fmt.Errorf("add names to image %s: %w", md, err)
		}
		db.add(md, names...)
		return nil
	})
}
