package files

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func writeString(t *testing.T, p, s string, opts WriteOptions) (*Info, error) {
	t.Helper()
	return Write(context.Background(), p, strings.NewReader(s), opts)
}

func TestWriteCreatesParents(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "a", "b", "c.txt")
	in, err := writeString(t, p, "hello", WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "hello" {
		t.Errorf("content %q", b)
	}
	if in.Type != TypeFile || in.Size != 5 || in.Mode != 0o644 || in.Path != p {
		t.Errorf("info %+v", in)
	}
	if fi, _ := os.Stat(filepath.Join(d, "a", "b")); fi.Mode().Perm() != DefaultDirMode {
		t.Errorf("parent mode %v", fi.Mode().Perm())
	}
	assertNoTemp(t, filepath.Dir(p))
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".bothy-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestWriteKeepsMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "run.sh")
	os.WriteFile(p, []byte("old"), 0o600)
	os.Chmod(p, 0o751)
	if _, err := writeString(t, p, "new", WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o751 {
		t.Errorf("mode %v, want 0751", fi.Mode().Perm())
	}
	if _, err := writeString(t, p, "newer", WriteOptions{Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	if _, err := writeString(t, p, "x", WriteOptions{Mode: 0o755 | fs.ModeSetgid}); err != nil {
		t.Fatal(err)
	}
	if in, _ := Stat(context.Background(), p); in.Mode != 0o2755 {
		t.Errorf("mode %o, want 2755", in.Mode)
	}
}

func TestWriteIsAtomicReplacement(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "f")
	os.WriteFile(p, []byte("old"), 0o644)
	keep, _ := os.Open(p) // a reader of the old file keeps seeing it
	defer keep.Close()
	writeString(t, p, "new", WriteOptions{})
	b := make([]byte, 3)
	keep.Read(b)
	if string(b) != "old" {
		t.Errorf("old reader sees %q", b)
	}
}

func TestWriteOptions(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "f")
	writeString(t, p, "one\n", WriteOptions{})
	if _, err := writeString(t, p, "two\n", WriteOptions{Append: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one\ntwo\n" {
		t.Errorf("append: %q", b)
	}
	if _, err := writeString(t, p, "x", WriteOptions{Exclusive: true}); !errors.Is(err, ErrExists) {
		t.Errorf("exclusive: %v", err)
	}
	if _, err := writeString(t, p, "0123456789", WriteOptions{MaxBytes: 5}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("max bytes: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one\ntwo\n" {
		t.Errorf("failed write changed the file: %q", b)
	}
	if _, err := writeString(t, p, "01234", WriteOptions{MaxBytes: 5}); err != nil {
		t.Errorf("exactly max bytes: %v", err)
	}
	if _, err := writeString(t, filepath.Join(d, "app"), "new", WriteOptions{Append: true, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(d, "app")); fi.Mode().Perm() != 0o600 {
		t.Errorf("append-created mode %v", fi.Mode().Perm())
	}
	assertNoTemp(t, d)
}

func TestWriteErrors(t *testing.T) {
	d := t.TempDir()
	f := filepath.Join(d, "file")
	os.WriteFile(f, nil, 0o644)
	for _, tt := range []struct {
		path string
		want error
	}{
		{"rel", ErrInvalidPath},
		{d, ErrIsDir},
		{"/", ErrIsDir},
		{filepath.Join(f, "child"), ErrNotDir},
		{filepath.Join(f, "a", "b"), ErrNotDir},
	} {
		if _, err := writeString(t, tt.path, "x", WriteOptions{}); !errors.Is(err, tt.want) {
			t.Errorf("Write(%q) = %v, want %v", tt.path, err, tt.want)
		}
	}
}

func TestWriteFollowsSymlink(t *testing.T) {
	d := t.TempDir()
	target := filepath.Join(d, "target")
	os.WriteFile(target, []byte("old"), 0o644)
	link := filepath.Join(d, "link")
	os.Symlink("target", link)
	if _, err := writeString(t, link, "new", WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("symlink was replaced")
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Errorf("target %q", b)
	}
}

// asRoot reports whether the caller is root, so a case that gives files to
// other users can run in full. For an unprivileged caller it checks instead
// that the attempt fails with EPERM (chown(2) to another user needs
// CAP_CHOWN): the request is refused, never half-done with the wrong owner.
func asRoot(t *testing.T, attempt func() error) bool {
	t.Helper()
	if os.Geteuid() == 0 {
		return true
	}
	if err := attempt(); !errors.Is(err, syscall.EPERM) {
		t.Errorf("unprivileged chown to another user: got %v, want EPERM", err)
	}
	return false
}

func owner(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

func TestWriteSetsOwner(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "new", "f")
	opts := WriteOptions{Owner: &Owner{UID: 1234, GID: 2345}, Mode: 0o4755}
	if !asRoot(t, func() error {
		_, err := writeString(t, p, "x", opts)
		if _, serr := os.Stat(p); err != nil && serr == nil {
			t.Errorf("refused write left %s behind", p)
		}
		return err
	}) {
		return
	}
	in, err := writeString(t, p, "x", opts)
	if err != nil {
		t.Fatal(err)
	}
	if u, g := owner(t, p); u != 1234 || g != 2345 || in.UID != 1234 || in.GID != 2345 {
		t.Errorf("owner %d:%d (info %d:%d)", u, g, in.UID, in.GID)
	}
	if in.Mode != 0o4755 {
		t.Errorf("mode %o, want 4755 (chmod after chown)", in.Mode)
	}
	if u, g := owner(t, filepath.Join(d, "new")); u != 1234 || g != 2345 {
		t.Errorf("created parent owner %d:%d", u, g)
	}
	// Rewriting without Owner keeps the existing owner.
	if _, err := writeString(t, p, "y", WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u, g := owner(t, p); u != 1234 || g != 2345 {
		t.Errorf("owner after rewrite %d:%d", u, g)
	}
}
