// Package ocitest holds the checks the image store's tests share, in package
// oci and in package transfer. It does not import oci, so that oci's own
// tests can use it: a store is anything with Root, TmpDir and Verify.
package ocitest

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

// Store is what the checks need of an *oci.Store.
type Store interface {
	Root() string
	TmpDir() string
	Verify(ctx context.Context) error
}

// RootfsTar is a small rootfs tarball; seed varies the content.
func RootfsTar(t testing.TB, seed int) []byte {
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

// Snapshot lists the store's state files (blobs, refs, tmp) with sizes; the
// blob-info cache and lock files are not state.
func Snapshot(t testing.TB, s Store) string {
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

// TmpEntries lists the store's temporary files.
func TmpEntries(t testing.TB, s Store) []string {
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

// CheckConsistent verifies every image (its refs, manifest, config and
// blobs) and that no temporary file is left.
func CheckConsistent(t testing.TB, s Store) {
	t.Helper()
	if err := s.Verify(context.Background()); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if tmp := TmpEntries(t, s); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
	ents, _ := os.ReadDir(s.Root())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".refs.json-") {
			t.Fatalf("temporary refs file left: %s", e.Name())
		}
	}
}
