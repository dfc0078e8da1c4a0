package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/bothy-sandbox/bothy/oci/ocitest"
)

// An OCI archive whose index.json or manifest names content by a digest or
// size it does not have is refused by ImportOCIArchive, naming the lying
// descriptor, and the store is left exactly as it was.
func TestImportOCIArchiveRefusesLies(t *testing.T) {
	ctx := context.Background()
	good := ociArchive(t, 5, "demo:5")
	for _, tamper := range ocitest.Tampers() {
		t.Run(tamper.Name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "layout")
			ocitest.Untar(t, good, dir)
			lie := tamper.Apply(t, dir)
			bad := filepath.Join(t.TempDir(), "bad.tar")
			ocitest.TarDir(t, dir, bad)

			s := newStore(t)
			// One good image first: the store is not empty, and the lie
			// must not touch what is there.
			if _, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 9)), "other:1"); err != nil {
				t.Fatal(err)
			}
			before := ocitest.Snapshot(t, s)
			_, err := s.ImportOCIArchive(ctx, bad, "bad:1")
			ocitest.CheckLie(t, "import", err, lie)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			}
			if after := ocitest.Snapshot(t, s); after != before {
				t.Errorf("the store changed:\n%s\n---\n%s", before, after)
			}
			if _, err := s.Resolve(ctx, "bad:1"); !errors.Is(err, ErrNotFound) {
				t.Errorf("resolve: %v", err)
			}
		})
	}
}

// The archive's blobs that the image does not use are not kept.
func TestImportOCIArchiveKeepsOnlyTheImage(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "layout")
	ocitest.Untar(t, ociArchive(t, 6, "demo:6"), dir)
	extra := []byte("not part of the image")
	if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", digest.FromBytes(extra).Encoded()), extra, 0o644); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "extra.tar")
	ocitest.TarDir(t, dir, archive)
	s := newStore(t)
	if _, err := s.ImportOCIArchive(ctx, archive, "demo:6"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.HasBlob(digest.FromBytes(extra), -1); ok {
		t.Error("a blob the image does not use was stored")
	}
	ocitest.CheckConsistent(t, s)
}

// A name that carries a digest must carry the digest of the image it names:
// import, tag and names added later cannot pin a digest to other content.
func TestDigestNamesMustMatch(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	img, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 1)), "one:1")
	if err != nil {
		t.Fatal(err)
	}
	forged := digest.FromString("some other manifest")
	before := ocitest.Snapshot(t, s)
	for what, do := range map[string]func() error{
		"import": func() error {
			_, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 2)), "two@"+forged.String())
			return err
		},
		"tag":       func() error { return s.Tag(ctx, "one:1", "localhost/one@"+forged.String()) },
		"add names": func() error { return s.AddNames(ctx, img.Digest, "localhost/one@"+forged.String()) },
		"import archive": func() error {
			_, err := s.ImportOCIArchive(ctx, ociArchive(t, 3, "three:3"), "three@"+forged.String())
			return err
		},
	} {
		err := do()
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), forged.String()) {
			t.Errorf("%s with a forged digest name: %v, want ErrInvalidName naming %s", what, err, forged)
		}
		if after := ocitest.Snapshot(t, s); after != before {
			t.Errorf("%s: the store changed:\n%s\n---\n%s", what, before, after)
		}
	}
	if _, err := s.Resolve(ctx, "localhost/one@"+forged.String()); !errors.Is(err, ErrNotFound) {
		t.Errorf("resolve the forged name: %v", err)
	}
	// The true digest is accepted.
	if err := s.Tag(ctx, "one:1", "localhost/one@"+img.Digest.String()); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Resolve(ctx, "localhost/one@"+img.Digest.String()); err != nil || got.Digest != img.Digest {
		t.Fatalf("resolve by the true digest: %v %v", got, err)
	}
}

// Verify reports a config or layer whose size is not the one its descriptor gives.
func TestVerifyChecksSizes(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	img, err := s.Import(ctx, bytes.NewReader(ocitest.RootfsTar(t, 4)), "four:4")
	if err != nil {
		t.Fatal(err)
	}
	// A config rewritten in place with the same digest cannot happen; a
	// shorter file with the same name is corruption Verify reports.
	p, _ := s.BlobPath(img.ID)
	b, _ := os.ReadFile(p)
	os.Chmod(p, 0o644)
	os.WriteFile(p, b[:len(b)-1], 0o644)
	s.mu.Lock()
	delete(s.cache, img.Digest)
	s.mu.Unlock()
	if err := s.Verify(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), img.ID.String()) {
		t.Errorf("verify: %v, want ErrCorrupt naming the config %s", err, img.ID)
	}
}

// FuzzImportOCIArchive feeds ImportOCIArchive archives made from a good one
// and from every tampered one: whatever the bytes, an import either fails
// and leaves the store as it was, or records an image whose every blob
// matches its descriptor, under the digest index.json gives.
func FuzzImportOCIArchive(f *testing.F) {
	seeds := []string{ociArchive(f, 7, "fuzz:1")}
	for _, tamper := range ocitest.Tampers() {
		dir := filepath.Join(f.TempDir(), "layout")
		ocitest.Untar(f, seeds[0], dir)
		tamper.Apply(f, dir)
		out := filepath.Join(f.TempDir(), "bad.tar")
		ocitest.TarDir(f, dir, out)
		seeds = append(seeds, out)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, archive []byte) {
		ctx := context.Background()
		p := filepath.Join(t.TempDir(), "in.tar")
		if err := os.WriteFile(p, archive, 0o644); err != nil {
			t.Fatal(err)
		}
		s := newStore(t)
		before := ocitest.Snapshot(t, s)
		img, err := s.ImportOCIArchive(ctx, p, "fuzz:1")
		if err != nil {
			if after := ocitest.Snapshot(t, s); after != before {
				t.Fatalf("failed import (%v) changed the store:\n%s", err, after)
			}
			return
		}
		ocitest.CheckConsistent(t, s)
		idx, err := readIndexFromTar(archive)
		if err != nil {
			t.Fatalf("imported an archive whose index.json does not parse: %v", err)
		}
		if img.Digest != idx.Manifests[0].Digest {
			t.Fatalf("recorded %s, index.json names %s", img.Digest, idx.Manifests[0].Digest)
		}
		mb, err := s.ReadBlob(img.Digest, MaxManifestSize)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyBytes(idx.Manifests[0], mb); err != nil {
			t.Fatalf("recorded a manifest that does not match index.json: %v", err)
		}
	})
}

// readIndexFromTar returns the index.json of an OCI archive in memory.
func readIndexFromTar(archive []byte) (*v1.Index, error) {
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(h.Name, "./") == v1.ImageIndexFile {
			var idx v1.Index
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			return &idx, json.Unmarshal(b, &idx)
		}
	}
}

// FuzzVerifyReader: the reader accepts exactly the content that has the
// descriptor's digest and size, and never reads more than one byte past the
// claimed size.
func FuzzVerifyReader(f *testing.F) {
	f.Add([]byte("hello"), int64(5), false, uint8(3))
	f.Add([]byte("hello"), int64(4), false, uint8(1))
	f.Add([]byte("hello"), int64(6), false, uint8(0))
	f.Add([]byte("hello"), int64(-1), true, uint8(2))
	f.Add([]byte{}, int64(0), false, uint8(1))
	f.Fuzz(func(t *testing.T, content []byte, size int64, wrongDigest bool, chunk uint8) {
		if size < -1 {
			size = -1
		}
		d := digest.FromBytes(content)
		if wrongDigest {
			d = digest.FromBytes(append(bytes.Clone(content), 0))
		}
		src := &countingReader{r: bytes.NewReader(content)}
		vr, err := VerifyReader(src, v1.Descriptor{MediaType: v1.MediaTypeImageLayer, Digest: d, Size: size})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, int(chunk)+1)
		var got []byte
		for {
			n, err := vr.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				if wrongDigest || (size >= 0 && int64(len(content)) != size) {
					t.Fatalf("accepted content that does not match (size %d, claimed %d, wrong digest %v)", len(content), size, wrongDigest)
				}
				if !bytes.Equal(got, content) {
					t.Fatal("content changed")
				}
				return
			}
			if err != nil {
				var m *MismatchError
				if !errors.As(err, &m) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error %v is not a MismatchError", err)
				}
				if !wrongDigest && (size < 0 || int64(len(content)) == size) {
					t.Fatalf("refused matching content: %v", err)
				}
				if size >= 0 && src.n > size+1 {
					t.Fatalf("read %d bytes for a claim of %d", src.n, size)
				}
				return
			}
		}
	})
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
