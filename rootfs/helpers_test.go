package rootfs

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var testTime = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

type tarEntry struct {
	hdr  tar.Header
	body string
}

func reg(name, body string, mode int64) tarEntry {
	return tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: testTime}, body}
}

func dirEnt(name string, mode int64) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: testTime}}
}

func symlink(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: testTime}}
}

func hardlink(name, target string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: name, Linkname: target, ModTime: testTime}}
}

func device(typ byte, name string, major, minor int64) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: typ, Name: name, Mode: 0o666, Devmajor: major, Devminor: minor, ModTime: testTime}}
}

func mkTar(t testing.TB, ents ...tarEntry) []byte {
	t.Helper()
	b, err := buildTar(ents...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func buildTar(ents ...tarEntry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := e.hdr
		if h.Format == tar.FormatUnknown && len(h.PAXRecords) > 0 {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("tar header %q: %w", h.Name, err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			return nil, fmt.Errorf("tar body %q: %w", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sandbox is a temporary directory holding dest (where layers go) and a
// sentinel tree beside it that no unpack may touch.
type sandbox struct {
	base, dest, sentinel string
	before               map[string]string
}

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	base := t.TempDir()
	s := &sandbox{base: base, dest: filepath.Join(base, "dest"), sentinel: filepath.Join(base, "sentinel")}
	for _, d := range []string{s.dest, s.sentinel, filepath.Join(s.sentinel, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"canary", "sub/passwd"} {
		if err := os.WriteFile(filepath.Join(s.sentinel, f), []byte("host "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("canary", filepath.Join(s.sentinel, "link")); err != nil {
		t.Fatal(err)
	}
	s.before = snapshot(t, s.sentinel, true)
	// Layers may hold read-only directories: remove them before TempDir's
	// own clean-up (which runs after, clean-ups being LIFO).
	t.Cleanup(func() {
		if err := removeTree(s.dest); err != nil {
			t.Errorf("remove unpacked layer: %v", err)
		}
	})
	return s
}

// checkHost asserts that nothing outside dest changed.
func (s *sandbox) checkHost(t testing.TB) {
	t.Helper()
	after := snapshot(t, s.sentinel, true)
	if d := diffSnap(s.before, after); d != "" {
		t.Fatalf("sentinel tree outside dest changed:\n%s", d)
	}
	ents, err := os.ReadDir(s.base)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[dest sentinel]" {
		t.Fatalf("entries beside dest: %v", names)
	}
}

// snapshot describes every file below root: type, mode, link count, size,
// symlink target, content hash, and (withTimes) mtime.
func snapshot(t testing.TB, root string, withTimes bool) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o", st.Mode)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			desc += fmt.Sprintf(" nlink=%d size=%d", st.Nlink, st.Size)
		}
		if withTimes {
			desc += fmt.Sprintf(" mtime=%d.%d", st.Mtim.Sec, st.Mtim.Nsec)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" sha=%x", sha256.Sum256(b))
		case unix.S_IFCHR, unix.S_IFBLK:
			desc += fmt.Sprintf(" rdev=%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
		m[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return m
}

func diffSnap(a, b map[string]string) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var out bytes.Buffer
	for _, k := range ks {
		if a[k] != b[k] {
			fmt.Fprintf(&out, "%s: %q != %q\n", k, a[k], b[k])
		}
	}
	return out.String()
}

func lstat(t testing.TB, p string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("lstat: %v", err)
	}
	return st
}

// asRoot reports whether the caller is root, so a case that needs privilege
// can run in full. For an unprivileged caller it runs attempt instead, which
// must be refused with EPERM: without the privilege the operation fails
// loudly rather than producing a layer with the wrong owners or types. Both
// halves of `make test` so run every case, each with what it can check.
func asRoot(t testing.TB, why string, attempt func() error) bool {
	t.Helper()
	if os.Geteuid() == 0 {
		return true
	}
	if err := attempt(); !errors.Is(err, unix.EPERM) {
		t.Errorf("unprivileged (%s): got %v, want EPERM", why, err)
	}
	return false
}
