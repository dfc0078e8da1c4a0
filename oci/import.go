package oci

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/ulikunitz/xz"

	"github.com/bothy-sandbox/bothy/internal/ctxio"
	"github.com/bothy-sandbox/bothy/rootfs"
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
			s.Rollback(created)
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
	configDigest, c, err := s.WriteBlobBytes(ctx, cb)
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
	md, c, err := s.WriteBlobBytes(ctx, mb)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	note(md, c)
	img, err = s.CommitImage(ctx, md, names)
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
	return ParsePlatform(p)
}

// writeLayer stores a rootfs tarball as a gzip layer blob. It returns the
// blob's digest and size, the diff ID, and whether the blob is new.
func (s *Store) writeLayer(ctx context.Context, in io.Reader) (d digest.Digest, size int64, diffID digest.Digest, created bool, err error) {
	br := bufio.NewReader(ctxio.Reader(ctx, in))
	if _, err := br.Peek(1); err != nil {
		if err == io.EOF {
			return "", 0, "", false, errors.New("rootfs tarball is empty")
		}
		return "", 0, "", false, fmt.Errorf("read rootfs tarball: %w", err)
	}
	plain, err := Decompress(br)
	if err != nil {
		return "", 0, "", false, fmt.Errorf("read rootfs tarball: %w", err)
	}
	defer plain.Close()

	tmp, err := os.CreateTemp(s.TmpDir(), "layer-*")
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

// Decompress returns the uncompressed stream of r: gzip, zstd, bzip2, xz or
// none, told by its first bytes.
func Decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(10)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	switch {
	case len(head) == 10 && bytes.HasPrefix(head, []byte("BZh")) && head[3] >= '1' && head[3] <= '9' &&
		bytes.Equal(head[4:], []byte{0x31, 0x41, 0x59, 0x26, 0x53, 0x59}):
		return io.NopCloser(bzip2.NewReader(br)), nil
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}):
		xr, err := xz.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("xz: %w", err)
		}
		return io.NopCloser(xr), nil
	}
	return rootfs.Decompress(br) // gzip, zstd, none
}

// readerOnly hides WriteTo and friends of a reader, so io.Copy uses Read only.
type readerOnly struct{ io.Reader }

// ParsePlatform parses "os/arch[/variant]".
func ParsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" || (len(parts) == 3 && parts[2] == "") {
		return v1.Platform{}, fmt.Errorf("platform %q: want os/arch[/variant]", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}
