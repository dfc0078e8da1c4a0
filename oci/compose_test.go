package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"a", "b", "c"} {
		content, ok := files[name]
		if !ok {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(content))
	}
	tw.Close()
	return buf.Bytes()
}

func blobCount(t *testing.T, s *Store) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(s.Root(), "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestComposer(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	layerTar := tarOf(t, map[string]string{"a": "one", "b": "two"})
	epoch := time.Unix(0, 0).UTC()
	cfg := v1.Image{Created: &epoch, Platform: v1.Platform{OS: "linux", Architecture: "amd64"},
		Config: v1.ImageConfig{Cmd: []string{"/bin/sh"}, Labels: map[string]string{"k": "v"}}}

	compose := func(names ...string) *Image {
		c, err := s.NewComposer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l1, err := c.AddLayer(ctx, bytes.NewReader(layerTar))
		if err != nil {
			t.Fatal(err)
		}
		l2, err := c.AddLayer(ctx, bytes.NewReader(tarOf(t, map[string]string{"c": "three"})))
		if err != nil {
			t.Fatal(err)
		}
		img, err := c.Commit(ctx, cfg, []Layer{l1, l2}, names)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	a := compose("localhost/built:1")
	if len(a.Layers) != 2 || a.Config.Config.Labels["k"] != "v" || len(a.Config.RootFS.DiffIDs) != 2 {
		t.Fatalf("composed image: %+v", a)
	}
	// The same inputs, again: the same digest, and the name is kept.
	b := compose("localhost/built:2")
	if b.Digest != a.Digest {
		t.Errorf("same inputs, digests %s and %s", a.Digest, b.Digest)
	}
	img, err := s.Resolve(ctx, "built:1")
	if err != nil || img.Digest != a.Digest {
		t.Fatalf("built:1: %v", err)
	}
	if err := s.AddNames(ctx, a.Digest, "localhost/built:3"); err != nil {
		t.Fatal(err)
	}
	if img, err := s.Resolve(ctx, "built:3"); err != nil || img.Digest != a.Digest {
		t.Errorf("built:3: %v", err)
	}
	if err := s.AddNames(ctx, digest.Digest("sha256:"+string(bytes.Repeat([]byte("0"), 64))), "localhost/x:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddNames on a missing image: %v", err)
	}

	// An uncommitted composition leaves no blob behind.
	before := blobCount(t, s)
	c, err := s.NewComposer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddLayer(ctx, bytes.NewReader(tarOf(t, map[string]string{"a": "never committed"}))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddLayer(ctx, bytes.NewReader([]byte("not a tar archive, not at all........"))); err == nil {
		t.Error("AddLayer took something that is not a tar")
	}
	c.Close()
	if after := blobCount(t, s); after != before {
		t.Errorf("%d blobs before, %d after an abandoned composition", before, after)
	}
	// Committing a layer the store does not have fails.
	c, _ = s.NewComposer(ctx)
	defer c.Close()
	if _, err := c.Commit(ctx, cfg, []Layer{{Digest: digest.Digest("sha256:" + string(bytes.Repeat([]byte("1"), 64))), Size: 1}}, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("commit with a missing layer: %v", err)
	}
}
