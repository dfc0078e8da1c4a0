package oci

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/pkg/compression"
	compressiontypes "go.podman.io/image/v5/pkg/compression/types"
)

// ImportOptions configures Import. Zero values give the defaults.
type ImportOptions struct {
	Entrypoint []string
	// Cmd defaults to ["/bin/sh"] when neither Cmd nor Entrypoint is set.
	Cmd []string
	// Env defaults to a standard PATH.
	Env        []string
	WorkingDir string
	User       string
	// Created is the image's creation time; zero means now.
	Created time.Time
	// Platform is "os/arch[/variant]"; empty means the host's.
	Platform string
}

// DefaultPath is the PATH an imported image gets when no Env is given.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Import turns a rootfs tarball (plain, gzip, bzip2, xz or zstd; the
// input is checked to be a tar archive) into a one-layer image named name
// (local rules: "foo" → "localhost/foo:latest"; empty leaves it unnamed). The
// layer is stored gzip-compressed, deterministically, so the same tarball
// always yields the same layer digest. At most one ImportOptions is used.
func (s *Store) Import(ctx context.Context, rootfsTar io.Reader, name string, opts ...ImportOptions) (img *Image, err error) {
	var o ImportOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	var names []string
	if name != "" {
		n, err := NormalizeLocalName(name)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		names = append(names, n)
	}
	plat, err := importPlatform(o.Platform)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}

	gc, err := lockFile(ctx, s.gcLockPath(), false)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	var created []digest.Digest
	defer func() {
		gc.Unlock()
		if err != nil {
			s.rollback(created)
		}
	}()
	note := func(d digest.Digest, c bool) {
		if c {
			created = append(created, d)
		}
	}

	layerDigest, layerSize, diffID, c, err := s.writeLayer(ctx, rootfsTar)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	note(layerDigest, c)

	when := o.Created
	if when.IsZero() {
		when = time.Now()
	}
	when = when.UTC()
	cfg := v1.Image{
		Created:  &when,
		Platform: plat,
		Config: v1.ImageConfig{
			User:       o.User,
			Env:        o.Env,
			Entrypoint: o.Entrypoint,
			Cmd:        o.Cmd,
			WorkingDir: o.WorkingDir,
		},
		RootFS:  v1.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
		History: []v1.History{{Created: &when, CreatedBy: "bothy import"}},
	}
	if len(cfg.Config.Env) == 0 {
		cfg.Config.Env = []string{DefaultPath}
	}
	if len(cfg.Config.Cmd) == 0 && len(cfg.Config.Entrypoint) == 0 {
		cfg.Config.Cmd = []string{"/bin/sh"}
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	configDigest, c, err := s.writeBlobBytes(ctx, cb)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	note(configDigest, c)

	m := v1.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageManifest,
		Config:    v1.Descriptor{MediaType: v1.MediaTypeImageConfig, Digest: configDigest, Size: int64(len(cb))},
		Layers:    []v1.Descriptor{{MediaType: v1.MediaTypeImageLayerGzip, Digest: layerDigest, Size: layerSize}},
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	md, c, err := s.writeBlobBytes(ctx, mb)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	note(md, c)
	img, err = s.commitImage(ctx, md, names)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	return img, nil
}

func importPlatform(p string) (v1.Platform, error) {
	if p == "" {
		plat := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
		if runtime.GOARCH == "arm64" {
			plat.Variant = "v8"
		}
		return plat, nil
	}
	return parsePlatform(p)
}

// writeLayer stores a rootfs tarball as a gzip layer blob. It returns the
// blob's digest and size, the diff ID, and whether the blob is new.
func (s *Store) writeLayer(ctx context.Context, in io.Reader) (d digest.Digest, size int64, diffID digest.Digest, created bool, err error) {
	br := bufio.NewReader(ctxReader{ctx, in})
	if _, err := br.Peek(1); err != nil {
		if err == io.EOF {
			return "", 0, "", false, errors.New("rootfs tarball is empty")
		}
		return "", 0, "", false, fmt.Errorf("read rootfs tarball: %w", err)
	}
	plain, err := decompress(br)
	if err != nil {
		return "", 0, "", false, fmt.Errorf("read rootfs tarball: %w", err)
	}
	defer plain.Close()

	tmp, err := os.CreateTemp(s.tmpDir(), "layer-*")
	if err != nil {
		return "", 0, "", false, fmt.Errorf("write layer: %w", err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	blobDigester := digest.Canonical.Digester()
	counter := &countingWriter{}
	zw, err := gzip.NewWriterLevel(io.MultiWriter(tmp, blobDigester.Hash(), counter), gzip.BestSpeed)
	if err != nil {
		return "", 0, "", false, err
	}
	diffDigester := digest.Canonical.Digester()
	sink := io.MultiWriter(zw, diffDigester.Hash())

	// Walk the tar to check it is one, writing every byte read to sink;
	// then copy whatever follows the end-of-archive marker, so the layer is
	// the input byte for byte.
	tr := tar.NewReader(io.TeeReader(plain, sink))
	for {
		_, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", 0, "", false, fmt.Errorf("read rootfs tarball: not a valid tar archive: %w", err)
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return "", 0, "", false, fmt.Errorf("read rootfs tarball: %w", err)
		}
	}
	if _, err := io.Copy(sink, readerOnly{plain}); err != nil {
		return "", 0, "", false, fmt.Errorf("read rootfs tarball: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", 0, "", false, fmt.Errorf("write layer: %w", err)
	}
	d = blobDigester.Digest()
	created, err = s.commitTemp(tmp, d)
	tmp = nil
	if err != nil {
		return "", 0, "", false, err
	}
	return d, counter.n, diffDigester.Digest(), created, nil
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// decompress returns the uncompressed stream of r (gzip, bzip2, xz, zstd or
// none). gzip, the common case, uses the standard library's reader.
func decompress(r io.Reader) (io.ReadCloser, error) {
	algo, dec, r, err := compression.DetectCompressionFormat(r)
	if err != nil {
		return nil, err
	}
	switch {
	case dec == nil:
		return io.NopCloser(r), nil
	case algo.Name() == compressiontypes.GzipAlgorithmName:
		return gzip.NewReader(r)
	default:
		return dec(r)
	}
}

// readerOnly hides WriteTo and friends of a reader, so io.Copy uses Read only.
type readerOnly struct{ io.Reader }
