package files

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// entry describes one archive member for the test archive builders.
type entry struct {
	name string
	typ  byte // tar type flag
	body string
	link string
	mode int64
}

func tFile(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, body: body, mode: 0o644}
}
func tDir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func tSymlink(name, to string) entry {
	return entry{name: name, typ: tar.TypeSymlink, link: to, mode: 0o777}
}
func tHardlink(name, to string) entry {
	return entry{name: name, typ: tar.TypeLink, link: to, mode: 0o644}
}

var testTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func makeTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, ModTime: testTime, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func makeZip(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: testTime}
		var body string
		switch e.typ {
		case tar.TypeDir:
			if !strings.HasSuffix(h.Name, "/") {
				h.Name += "/"
			}
			h.SetMode(fs.ModeDir | fs.FileMode(e.mode))
		case tar.TypeSymlink:
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		case tar.TypeChar:
			h.SetMode(fs.ModeDevice | fs.ModeCharDevice | 0o644)
		case tar.TypeFifo:
			h.SetMode(fs.ModeNamedPipe | 0o644)
		default:
			h.SetMode(fs.FileMode(e.mode))
			body = e.body
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sandbox is a temporary base directory holding dest (where extraction goes)
// and a sentinel directory that must never change.
type sandbox struct {
	base, dest, sentinel string
}

func newSandbox(t testing.TB) sandbox {
	t.Helper()
	base := t.TempDir()
	s := sandbox{base: base, dest: filepath.Join(base, "dest"), sentinel: filepath.Join(base, "sentinel")}
	if err := os.Mkdir(s.sentinel, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.sentinel, "keep"), []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// check fails the test if anything outside dest was created or changed.
func (s sandbox) check(t testing.TB) {
	t.Helper()
	var names []string
	entries, err := os.ReadDir(s.base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if names = slices.DeleteFunc(names, func(n string) bool { return n == "dest" || n == "sentinel" }); len(names) != 0 {
		t.Fatalf("entries appeared next to dest: %v", names)
	}
	entries, err = os.ReadDir(s.sentinel)
	if err != nil || len(entries) != 1 || entries[0].Name() != "keep" {
		t.Fatalf("sentinel directory changed: %v %v", entries, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.sentinel, "keep")); err != nil || string(b) != "untouched" {
		t.Fatalf("sentinel file changed: %q %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(s.sentinel, "keep")); err != nil || fi.Mode() != 0o644 {
		t.Fatalf("sentinel file mode changed: %v %v", fi.Mode(), err)
	}
}

// tree describes a directory for comparisons: relative path -> description.
func tree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "symlink -> " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = "file " + fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
