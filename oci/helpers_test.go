package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rootfsTar is a small rootfs tarball; seed varies the content.
func rootfsTar(t testing.TB, seed int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct{ name, body string }{
		{"bin/", ""},
		{"bin/sh", "#!fake shell\n"},
		{"etc/", ""},
		{"etc/hostname", fmt.Sprintf("host-%d\n", seed)},
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// snapshot lists the store's state files (blobs, refs, tmp) with sizes; the
// blob-info cache and lock files are not state.
func snapshot(t testing.TB, s *Store) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(s.Root(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.Root(), p)
		if rel == "cache" {
			return filepath.SkipDir
		}
		if d.IsDir() || strings.HasSuffix(rel, ".lock") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %d", rel, fi.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func tmpEntries(t testing.TB, s *Store) []string {
	t.Helper()
	ents, err := os.ReadDir(s.TmpDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// checkConsistent verifies every image, the refs database, and that no
// temporary file is left.
func checkConsistent(t testing.TB, s *Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.Verify(ctx); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if _, err := s.List(ctx); err != nil {
		t.Fatalf("list: %v", err)
	}
	if tmp := tmpEntries(t, s); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
	ents, _ := os.ReadDir(s.Root())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".refs.json-") {
			t.Fatalf("temporary refs file left: %s", e.Name())
		}
	}
}
