package oci

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bothy-sandbox/bothy/internal/testimage"
	"github.com/bothy-sandbox/bothy/oci/ocitest"
)

// ociArchive writes an OCI archive (as the default image's build does) of a
// small rootfs, named name.
func ociArchive(t testing.TB, seed int, name string) string {
	t.Helper()
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs.tar")
	if err := os.WriteFile(rootfs, ocitest.RootfsTar(t, seed), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.oci.tar")
	if err := testimage.WriteOCIArchive(rootfs, out, testimage.ArchiveOptions{Name: name, Cmd: []string{"/bin/sh"}}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportOCIArchive(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	archive := ociArchive(t, 1, "demo:1")
	img, err := s.ImportOCIArchive(ctx, archive, "demo:1")
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Names) != 1 || img.Names[0] != "localhost/demo:1" || len(img.Layers) != 1 {
		t.Fatalf("imported %+v", img)
	}
	got, err := s.Resolve(ctx, "demo:1")
	if err != nil || got.Digest != img.Digest {
		t.Fatalf("resolve: %v %v", got, err)
	}
	ocitest.CheckConsistent(t, s)
	// Again: the same image, nothing new.
	before := ocitest.Snapshot(t, s)
	if again, err := s.ImportOCIArchive(ctx, archive, ""); err != nil || again.Digest != img.Digest {
		t.Fatalf("second import: %v %v", again, err)
	}
	if after := ocitest.Snapshot(t, s); after != before {
		t.Errorf("second import changed the store:\n%s\n---\n%s", before, after)
	}
}

// A corrupt, missing or mislabelled blob is an error that leaves the store
// as it was.
func TestImportOCIArchiveRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	good := ociArchive(t, 2, "demo:2")
	// The layer is the largest blob.
	var layer string
	var largest int
	ocitest.RewriteTar(t, good, func(name string, body []byte) []byte {
		if strings.HasPrefix(name, "blobs/") && len(body) > largest {
			layer, largest = name, len(body)
		}
		return body
	})
	for what, edit := range map[string]func(string, []byte) []byte{
		"corrupt layer": func(name string, b []byte) []byte {
			if name == layer {
				b = append([]byte{}, b...)
				b[len(b)/2] ^= 0xff
			}
			return b
		},
		"missing layer": func(name string, b []byte) []byte {
			if name == layer {
				return nil
			}
			return b
		},
		"no index": func(name string, b []byte) []byte {
			if name == "index.json" {
				return nil
			}
			return b
		},
		"bad blob name": func(name string, b []byte) []byte {
			if name == layer {
				return b[:len(b)-1]
			}
			return b
		},
	} {
		s := newStore(t)
		before := ocitest.Snapshot(t, s)
		if _, err := s.ImportOCIArchive(ctx, ocitest.RewriteTar(t, good, edit), "bad"); err == nil {
			t.Errorf("%s: imported", what)
		}
		if after := ocitest.Snapshot(t, s); after != before {
			t.Errorf("%s: the store changed:\n%s", what, after)
		}
		if _, err := s.Resolve(ctx, "bad"); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: resolve: %v", what, err)
		}
	}
}
