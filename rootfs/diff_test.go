package rootfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type entry struct {
	typ      byte
	mode     int64
	uid      int
	link     string
	content  string
	modTime  time.Time
	xattrKey string
}

func readLayer(t *testing.T, b []byte) ([]string, map[string]entry) {
	t.Helper()
	var order []string
	out := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		e := entry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, link: h.Linkname, content: string(data), modTime: h.ModTime}
		for k := range h.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") {
				e.xattrKey += strings.TrimPrefix(k, "SCHILY.xattr.") + ";"
			}
		}
		if h.Uname != "" || h.Gname != "" || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: names or times beyond mtime recorded: %+v", h.Name, h)
		}
		order = append(order, h.Name)
		out[h.Name] = e
	}
	return order, out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriteDiff builds an upper directory by hand in both formats overlay
// writes: rootless (userxattr: user.overlay.* attributes) and, as root,
// trusted.overlay.* attributes with 0:0 character-device whiteouts.
func TestWriteDiff(t *testing.T) {
	root := os.Geteuid() == 0
	dir := t.TempDir()
	w := func(p, s string) { must(t, os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)) }
	must(t, os.MkdirAll(filepath.Join(dir, "etc/opaque"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, ".bothy/bin"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755))
	w("etc/new", "hello")
	w("etc/opaque/kept", "k")
	w("etc/hosts", "")
	w(".bothy/bin/bothy-executor", "")
	w("usr/bin/tool", "#!/bin/sh\n")
	must(t, unix.Chmod(filepath.Join(dir, "usr/bin/tool"), 0o4755))
	must(t, os.Link(filepath.Join(dir, "usr/bin/tool"), filepath.Join(dir, "usr/bin/tool2")))
	must(t, os.Symlink("tool", filepath.Join(dir, "usr/bin/alias")))
	must(t, unix.Mkfifo(filepath.Join(dir, "usr/fifo"), 0o600))
	// Rootless forms: the opaque attribute in user.overlay, and a
	// whiteout as a regular file with user.overlay.whiteout.
	must(t, unix.Setxattr(filepath.Join(dir, "etc/opaque"), "user.overlay.opaque", []byte("y"), 0))
	w("etc/gone", "")
	must(t, unix.Setxattr(filepath.Join(dir, "etc/gone"), "user.overlay.whiteout", []byte("y"), 0))
	must(t, unix.Setxattr(filepath.Join(dir, "etc/new"), "user.note", []byte("kept"), 0))
	if root {
		must(t, os.MkdirAll(filepath.Join(dir, "var/opaque"), 0o700))
		must(t, unix.Setxattr(filepath.Join(dir, "var/opaque"), "trusted.overlay.opaque", []byte("y"), 0))
		must(t, unix.Mknod(filepath.Join(dir, "var/removed"), unix.S_IFCHR|0o000, 0))
		must(t, unix.Setxattr(filepath.Join(dir, "etc/new"), "trusted.overlay.origin", []byte("x"), 0))
		must(t, os.Lchown(filepath.Join(dir, "etc/new"), 1234, 1234))
	}
	epoch := time.Unix(1700000000, 0).UTC()
	var first bytes.Buffer
	must(t, WriteDiff(&first, dir, DiffOptions{Epoch: epoch, Exclude: []string{".bothy", "/etc/hosts"}}))
	order, got := readLayer(t, first.Bytes())

	want := map[string]byte{
		"etc/": tar.TypeDir, "etc/new": tar.TypeReg, "etc/.wh.gone": tar.TypeReg, "etc/opaque/": tar.TypeDir,
		"etc/opaque/.wh..wh..opq": tar.TypeReg, "etc/opaque/kept": tar.TypeReg, "usr/": tar.TypeDir,
		"usr/bin/": tar.TypeDir, "usr/bin/alias": tar.TypeSymlink, "usr/bin/tool": tar.TypeReg,
		"usr/bin/tool2": tar.TypeLink, "usr/fifo": tar.TypeFifo,
	}
	if root {
		want["var/"], want["var/opaque/"], want["var/opaque/.wh..wh..opq"], want["var/.wh.removed"] = tar.TypeDir, tar.TypeDir, tar.TypeReg, tar.TypeReg
	}
	for name, typ := range want {
		if e, ok := got[name]; !ok || e.typ != typ {
			t.Errorf("%s: got %+v (present %v), want type %c", name, e, ok, typ)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected entry %s", name)
		}
	}
	if i, j := indexOf(order, "etc/opaque/"), indexOf(order, "etc/opaque/.wh..wh..opq"); j != i+1 {
		t.Errorf("opaque marker not right after its directory: %v", order)
	}
	if e := got["usr/bin/tool2"]; e.link != "usr/bin/tool" {
		t.Errorf("hard link to %q", e.link)
	}
	if e := got["usr/bin/tool"]; e.mode != 0o4755 || e.content != "#!/bin/sh\n" {
		t.Errorf("tool: mode %o content %q", e.mode, e.content)
	}
	if e := got["usr/bin/alias"]; e.link != "tool" {
		t.Errorf("symlink to %q", e.link)
	}
	if e := got["etc/new"]; e.xattrKey != "user.note;" {
		t.Errorf("etc/new xattrs %q, want user.note only (no overlay attributes)", e.xattrKey)
	}
	if root && got["etc/new"].uid != 1234 {
		t.Errorf("etc/new uid %d, want 1234", got["etc/new"].uid)
	}
	for name, e := range got {
		if !e.modTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want clamped to %v", name, e.modTime, epoch)
		}
	}

	// The same changes made again, later: the same bytes.
	now := time.Now()
	must(t, os.Chtimes(filepath.Join(dir, "etc/new"), now, now))
	var second bytes.Buffer
	must(t, WriteDiff(&second, dir, DiffOptions{Epoch: epoch, Exclude: []string{".bothy", "etc/hosts"}}))
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("same upper directory, different layer bytes")
	}
	// A time before the epoch is kept.
	old := time.Unix(1000, 0)
	must(t, os.Chtimes(filepath.Join(dir, "etc/new"), old, old))
	var third bytes.Buffer
	must(t, WriteDiff(&third, dir, DiffOptions{Epoch: epoch}))
	if _, got := readLayer(t, third.Bytes()); !got["etc/new"].modTime.Equal(old.UTC()) {
		t.Errorf("mtime before the epoch changed to %v", got["etc/new"].modTime)
	}
}

func TestWriteDiffRefusesRedirect(t *testing.T) {
	dir := t.TempDir()
	must(t, os.Mkdir(filepath.Join(dir, "moved"), 0o755))
	must(t, unix.Setxattr(filepath.Join(dir, "moved"), "user.overlay.redirect", []byte("/orig"), 0))
	err := WriteDiff(io.Discard, dir, DiffOptions{})
	if !errors.Is(err, ErrUnsupportedUpper) || !strings.Contains(err.Error(), "moved") {
		t.Errorf("err = %v, want ErrUnsupportedUpper naming the directory", err)
	}
}

func TestWriteDiffRefusesWhiteoutNames(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "etc", ".wh.passwd"), nil, 0o644))
	err := WriteDiff(io.Discard, dir, DiffOptions{})
	if !errors.Is(err, ErrUnsupportedUpper) || !strings.Contains(err.Error(), "etc/.wh.passwd") {
		t.Errorf("err = %v, want ErrUnsupportedUpper naming etc/.wh.passwd", err)
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestWriteDiffLive: a file that changes size while it is read fails the
// layer, unless Live, where it is written at its listed size (cut or padded)
// and the layer stays well formed.
func TestWriteDiffLive(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	must(t, os.WriteFile(p, bytes.Repeat([]byte("a"), 1<<20), 0o644))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.WriteFile(p, bytes.Repeat([]byte("b"), (i%4)<<18), 0o644)
		}
	}()
	defer func() { close(stop); <-done }()
	sawChange := false
	for range 200 {
		var buf bytes.Buffer
		err := WriteDiff(&buf, dir, DiffOptions{Epoch: time.Now()})
		if err != nil {
			if !strings.Contains(err.Error(), "size changed while reading") {
				t.Fatalf("WriteDiff of a changing file: %v", err)
			}
			sawChange = true
		}
		// Live: never an error, always a readable layer.
		buf.Reset()
		if err := WriteDiff(&buf, dir, DiffOptions{Epoch: time.Now(), Live: true}); err != nil {
			t.Fatalf("WriteDiff live: %v", err)
		}
		readLayer(t, buf.Bytes())
		if sawChange {
			return
		}
	}
	t.Log("the file never changed size during a read (the live half was checked all the same)")
}
