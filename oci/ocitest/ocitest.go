// Package ocitest holds the checks the image store's tests share, in package
// oci and in package transfer. It does not import oci, so that oci's own
// tests can use it: a store is anything with Root, TmpDir and Verify.
package ocitest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
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

// Lie is a descriptor in a tampered image that does not match the content it
// names; a refusal must name it: every string of Want appears in the error.
type Lie struct {
	MediaType string
	Want      []string
}

// Tamper is one way to make an OCI layout lie about its content. Apply edits
// the layout directory dir (one image manifest in index.json) in place.
type Tamper struct {
	Name  string
	Apply func(t testing.TB, dir string) Lie
}

// Tampers returns the ways an OCI layout can lie: index.json naming the
// manifest by a digest or size its bytes do not have, a manifest whose config
// or layer descriptor has the wrong digest or size. Each edit leaves
// everything else consistent, so the lie is the only thing wrong.
func Tampers() []Tamper {
	sized := func(n int64) string { return fmt.Sprintf("(%d bytes)", n) }
	return []Tamper{
		{"index.json: manifest digest", func(t testing.TB, dir string) Lie {
			idx := readIndex(t, dir)
			md := idx.Manifests[0]
			b := readBlob(t, dir, md.Digest)
			forged := append(bytes.Clone(b), '\n') // still a valid manifest, another digest
			writeBlobAt(t, dir, md.Digest, forged)
			idx.Manifests[0].Size = int64(len(forged)) // only the digest lies
			writeIndex(t, dir, idx)
			return Lie{md.MediaType, []string{md.MediaType, md.Digest.String(), digest.FromBytes(forged).String()}}
		}},
		{"index.json: manifest size", func(t testing.TB, dir string) Lie {
			idx := readIndex(t, dir)
			idx.Manifests[0].Size++
			writeIndex(t, dir, idx)
			md := idx.Manifests[0]
			return Lie{md.MediaType, []string{md.MediaType, md.Digest.String(), sized(md.Size), sized(md.Size - 1)}}
		}},
		{"manifest: config digest", func(t testing.TB, dir string) Lie {
			return editManifest(t, dir, func(m *v1.Manifest) Lie {
				c := m.Config
				forged := digest.FromString("forged config " + c.Digest.String())
				writeBlobAt(t, dir, forged, readBlob(t, dir, c.Digest))
				m.Config.Digest = forged
				return Lie{c.MediaType, []string{c.MediaType, forged.String(), c.Digest.String()}}
			})
		}},
		{"manifest: config size", func(t testing.TB, dir string) Lie {
			return editManifest(t, dir, func(m *v1.Manifest) Lie {
				m.Config.Size += 7
				c := m.Config
				return Lie{c.MediaType, []string{c.MediaType, c.Digest.String(), sized(c.Size), sized(c.Size - 7)}}
			})
		}},
		{"manifest: layer digest", func(t testing.TB, dir string) Lie {
			return editManifest(t, dir, func(m *v1.Manifest) Lie {
				l := m.Layers[0]
				forged := digest.FromString("forged layer " + l.Digest.String())
				writeBlobAt(t, dir, forged, readBlob(t, dir, l.Digest))
				m.Layers[0].Digest = forged
				return Lie{l.MediaType, []string{l.MediaType, forged.String(), l.Digest.String()}}
			})
		}},
		{"manifest: layer size", func(t testing.TB, dir string) Lie {
			return editManifest(t, dir, func(m *v1.Manifest) Lie {
				m.Layers[0].Size--
				l := m.Layers[0]
				return Lie{l.MediaType, []string{l.MediaType, l.Digest.String(), sized(l.Size)}}
			})
		}},
	}
}

// CheckLie fails t unless err is a refusal that names lie.
func CheckLie(t testing.TB, what string, err error, lie Lie) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", what)
		return
	}
	for _, w := range lie.Want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error does not name %q: %v", what, w, err)
		}
	}
}

func readIndex(t testing.TB, dir string) *v1.Index {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, v1.ImageIndexFile))
	if err != nil {
		t.Fatal(err)
	}
	var idx v1.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 {
		t.Fatalf("layout %s: %d manifests, want 1", dir, len(idx.Manifests))
	}
	return &idx
}

func writeIndex(t testing.TB, dir string, idx *v1.Index) {
	t.Helper()
	b, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, v1.ImageIndexFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readBlob(t testing.TB, dir string, d digest.Digest) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "blobs", d.Algorithm().String(), d.Encoded()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeBlobAt writes b as the blob named d, whatever b's digest.
func writeBlobAt(t testing.TB, dir string, d digest.Digest, b []byte) {
	t.Helper()
	p := filepath.Join(dir, "blobs", d.Algorithm().String(), d.Encoded())
	os.Remove(p) // may be read-only
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editManifest rewrites the manifest through edit, stores it under its
// digest and points index.json at it.
func editManifest(t testing.TB, dir string, edit func(m *v1.Manifest) Lie) Lie {
	t.Helper()
	idx := readIndex(t, dir)
	var m v1.Manifest
	if err := json.Unmarshal(readBlob(t, dir, idx.Manifests[0].Digest), &m); err != nil {
		t.Fatal(err)
	}
	lie := edit(&m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	d := digest.FromBytes(b)
	writeBlobAt(t, dir, d, b)
	idx.Manifests[0].Digest, idx.Manifests[0].Size = d, int64(len(b))
	writeIndex(t, dir, idx)
	return lie
}

// Untar extracts the tar at path (regular files and directories only) into dir.
func Untar(t testing.TB, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, b, 0o644)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TarDir writes dir's regular files and directories as the tar file out.
func TarDir(t testing.TB, dir, out string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = rel
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// RewriteTar copies the tar at in to a new file in a test directory, passing
// each entry's body through edit (which may change it, or drop the entry by
// returning nil), and returns the new file's path.
func RewriteTar(t testing.TB, in string, edit func(name string, body []byte) []byte) string {
	t.Helper()
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := os.Create(filepath.Join(t.TempDir(), "edited.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tw := tar.NewWriter(out)
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if body = edit(strings.TrimPrefix(h.Name, "./"), body); body == nil {
			continue
		}
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Name()
}
