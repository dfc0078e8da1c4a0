package rootfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// layerBuilder writes a layer as overlay leaves an upper directory, in the
// xattr namespace of the caller's mounts (trusted. as root, user.
// rootless).
type layerBuilder struct {
	t    *testing.T
	dir  string
	user bool
}

func newLayer(t *testing.T, base, name string) *layerBuilder {
	t.Helper()
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &layerBuilder{t: t, dir: dir, user: os.Geteuid() != 0}
}

func (l *layerBuilder) path(p string) string { return filepath.Join(l.dir, filepath.FromSlash(p)) }

func (l *layerBuilder) file(p, data string, mode os.FileMode) *layerBuilder {
	l.t.Helper()
	l.mkdirs(filepath.Dir(p))
	if err := os.WriteFile(l.path(p), []byte(data), mode); err != nil {
		l.t.Fatal(err)
	}
	if err := unix.Chmod(l.path(p), uint32(mode)); err != nil { // past the umask, setuid kept
		l.t.Fatal(err)
	}
	return l
}

func (l *layerBuilder) mkdirs(p string) *layerBuilder {
	l.t.Helper()
	if err := os.MkdirAll(l.path(p), 0o755); err != nil {
		l.t.Fatal(err)
	}
	return l
}

func (l *layerBuilder) symlink(p, target string) *layerBuilder {
	l.t.Helper()
	l.mkdirs(filepath.Dir(p))
	if err := os.Symlink(target, l.path(p)); err != nil {
		l.t.Fatal(err)
	}
	return l
}

func (l *layerBuilder) whiteout(p string) *layerBuilder {
	l.t.Helper()
	l.mkdirs(filepath.Dir(p))
	if err := unix.Mknod(l.path(p), unix.S_IFCHR, 0); err != nil {
		l.t.Fatalf("whiteout (needs Linux ≥ 5.8 unprivileged): %v", err)
	}
	return l
}

func (l *layerBuilder) overlayAttr(p, name, value string) *layerBuilder {
	l.t.Helper()
	prefix := "trusted."
	if l.user {
		prefix = "user."
	}
	if err := unix.Lsetxattr(l.path(p), prefix+"overlay."+name, []byte(value), 0); err != nil {
		l.t.Fatal(err)
	}
	return l
}

func (l *layerBuilder) opaque(p string) *layerBuilder {
	l.t.Helper()
	l.mkdirs(p)
	return l.overlayAttr(p, "opaque", "y")
}

func ino(t *testing.T, p string) uint64 {
	t.Helper()
	st := lstat(t, p)
	return st.Ino
}

// TestMergeLayers: three layers merged bottom first show what the stack
// shows: files overwritten, whiteouts (of a file below, of the image's,
// over a directory), opaque directories (marked, emptied), a directory
// made where a file was (opaque), a file where a directory was; files and
// whiteouts are the layers' own inodes (hard links); directories take the
// top-most layer's mode, attributes and times, and overlay's own
// attributes stay behind.
func TestMergeLayers(t *testing.T) {
	base := t.TempDir()
	l1 := newLayer(t, base, "l1").
		file("a", "a1", 0o644).file("d/f1", "f1", 0o644).file("d/f2", "f2", 0o644).
		symlink("s", "a").whiteout("image-file").file("x/y", "y", 0o644).
		mkdirs("e/deep").file("e/deep/z", "z", 0o644).file("g", "g1", 0o644).file("kept", "kept", 0o600)
	if err := unix.Mkfifo(l1.path("fifo"), 0o640); err != nil {
		t.Fatal(err)
	}
	l2 := newLayer(t, base, "l2").
		file("a", "a2", 0o600).whiteout("d/f1").file("d/f3", "f3", 0o644).
		opaque("x").file("x/z", "z", 0o644).file("e", "e is a file", 0o644).whiteout("s").
		overlayAttr("", "impure", "y")
	l3 := newLayer(t, base, "l3").
		file("d/f1", "f1 again", 0o4755).mkdirs("e").file("e/new", "new", 0o644).whiteout("g")
	if err := unix.Lsetxattr(l3.path("d"), "user.note", []byte("top"), 0); err != nil {
		t.Fatal(err)
	}
	l3.overlayAttr("d", "origin", "junk")
	if err := os.Chmod(l3.path("d"), 0o751); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(l3.path("d"), when, when); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(base, "merged")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	stats, err := MergeLayers(context.Background(), dst, []string{l1.dir, l2.dir, l3.dir}, MergeOptions{UserXattr: l1.user})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", stats)
	got := snapshot(t, dst, false)
	for p, want := range map[string]string{
		"a":          "content a2 mode 600",
		"d/f1":       "content f1 again mode 4755",
		"d/f2":       "content f2",
		"d/f3":       "content f3",
		"s":          "whiteout",
		"image-file": "whiteout",
		"x/z":        "content z",
		"e/new":      "content new",
		"g":          "whiteout",
		"fifo":       "fifo",
		"kept":       "content kept mode 600",
	} {
		full := filepath.Join(dst, p)
		st := lstat(t, full)
		switch {
		case strings.HasPrefix(want, "content "):
			data, err := os.ReadFile(full)
			body, mode, _ := strings.Cut(strings.TrimPrefix(want, "content "), " mode ")
			if err != nil || string(data) != body {
				t.Errorf("%s: %q %v, want %q", p, data, err, body)
			}
			if mode != "" && fmt.Sprintf("%o", st.Mode&0o7777) != mode {
				t.Errorf("%s: mode %o, want %s", p, st.Mode&0o7777, mode)
			}
		case want == "whiteout":
			if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
				t.Errorf("%s: %s, want a whiteout", p, got[p])
			}
		case want == "fifo":
			if st.Mode&unix.S_IFMT != unix.S_IFIFO {
				t.Errorf("%s: %s, want a fifo", p, got[p])
			}
		}
	}
	for p, layer := range map[string]*layerBuilder{"a": l2, "d/f1": l3, "d/f2": l1, "s": l2, "fifo": l1} {
		if ino(t, filepath.Join(dst, p)) != ino(t, layer.path(p)) {
			t.Errorf("%s is not a hard link of %s's", p, filepath.Base(layer.dir))
		}
	}
	for _, p := range []string{"x/y", "e/deep", "d/f1/x"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s shows through: %s", p, got[p])
		}
	}
	prefix := "trusted."
	if l1.user {
		prefix = "user."
	}
	for p, want := range map[string]string{"x": "y", "e": "y", "d": "", ".": ""} {
		v, _ := lgetxattr(filepath.Join(dst, p), prefix+"overlay.opaque")
		if v != want {
			t.Errorf("%s: opaque %q, want %q", p, v, want)
		}
	}
	for _, k := range []string{"overlay.origin", "overlay.impure"} {
		if _, err := lgetxattr(filepath.Join(dst, "d"), prefix+k); err == nil {
			t.Errorf("d: %s%s kept", prefix, k)
		}
	}
	// The root holds whiteouts: an empty origin says so; d holds none.
	if v, err := lgetxattr(dst, prefix+"overlay.origin"); err != nil || v != "" {
		t.Errorf("/: origin %q %v, want an empty one", v, err)
	}
	if _, err := lgetxattr(dst, prefix+"overlay.impure"); err == nil {
		t.Errorf("/: impure kept")
	}
	if v, err := lgetxattr(filepath.Join(dst, "d"), "user.note"); err != nil || v != "top" {
		t.Errorf("d: user.note %q %v", v, err)
	}
	st := lstat(t, filepath.Join(dst, "d"))
	if st.Mode&0o7777 != 0o751 || st.Mtim.Sec != when.Unix() {
		t.Errorf("d: mode %o mtime %d, want 751 and %d", st.Mode&0o7777, st.Mtim.Sec, when.Unix())
	}
	if stats.Layers != 3 || stats.Whiteouts != 4 || stats.Opaque != 2 {
		t.Errorf("stats %+v: want 3 layers, 4 whiteouts, 2 opaque", stats)
	}
}

// TestMergeLayersRefused: a layer with a redirect (a renamed directory) or
// a metacopy (a metadata-only copy-up) is refused: its meaning depends on
// the layers below.
func TestMergeLayersRefused(t *testing.T) {
	for _, attr := range []string{"redirect", "metacopy"} {
		t.Run(attr, func(t *testing.T) {
			base := t.TempDir()
			l := newLayer(t, base, "l").file("d/f", "f", 0o644)
			target := "d"
			if attr == "metacopy" {
				target = "d/f"
			}
			l.overlayAttr(target, attr, "/elsewhere")
			dst := filepath.Join(base, "merged")
			if err := os.Mkdir(dst, 0o700); err != nil {
				t.Fatal(err)
			}
			_, err := MergeLayers(context.Background(), dst, []string{l.dir}, MergeOptions{UserXattr: l.user})
			if !errors.Is(err, ErrUnmergeable) || !strings.Contains(err.Error(), attr) {
				t.Fatalf("%v, want ErrUnmergeable naming %s", err, attr)
			}
		})
	}
}

// TestMergeLayersHostile: layers a sandbox wrote to lead the merge out of
// its tree. A layer has symlinks where later layers have directories (to a
// host directory, absolute, and by ".."), and a symlink to a host file
// that a later layer whites out; the later layers write files, whiteouts
// and an opaque directory through those names. Nothing outside the merge
// changes (contents, modes, times), and the merge holds directories where
// the links were.
func TestMergeLayersHostile(t *testing.T) {
	s := newSandbox(t)
	l1 := newLayer(t, s.base, "l1").
		symlink("d", s.sentinel).symlink("up", "../sentinel/sub").symlink("f", filepath.Join(s.sentinel, "canary")).
		symlink("o", s.sentinel)
	l2 := newLayer(t, s.base, "l2").
		file("d/canary", "evil", 0o666).whiteout("d/link").file("up/passwd", "evil", 0o666).whiteout("f").
		opaque("o").file("o/evil", "evil", 0o644)
	if err := os.Chmod(l2.path("d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.dest, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := MergeLayers(context.Background(), s.dest, []string{l1.dir, l2.dir}, MergeOptions{UserXattr: l1.user}); err != nil {
		t.Fatal(err)
	}
	// checkHost wants only dest and sentinel beside each other.
	for _, l := range []string{l1.dir, l2.dir} {
		if err := os.RemoveAll(l); err != nil {
			t.Fatal(err)
		}
	}
	s.checkHost(t)
	for _, p := range []string{"d", "up", "o"} {
		if st := lstat(t, filepath.Join(s.dest, p)); st.Mode&unix.S_IFMT != unix.S_IFDIR {
			t.Errorf("%s in the merge: mode %o, want a directory", p, st.Mode)
		}
	}
}

// TestMergeLayersForeignNamespace: in trusted mode (root's overlay), the
// user.overlay.* attributes a root sandbox may set on its own files mean
// nothing to overlay, nor to the merge: a directory marked so is not
// opaque (what is below it stays), a redirect there is not refused, and
// the attributes stay the files' own.
func TestMergeLayersForeignNamespace(t *testing.T) {
	base := t.TempDir()
	l1 := newLayer(t, base, "l1").file("d/below", "below", 0o644)
	l2 := newLayer(t, base, "l2").file("d/above", "above", 0o644).file("f", "f", 0o644)
	for p, kv := range map[string][2]string{"d": {"user.overlay.opaque", "y"}, "f": {"user.overlay.redirect", "/x"}} {
		if err := unix.Lsetxattr(l2.path(p), kv[0], []byte(kv[1]), 0); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(base, "merged")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := MergeLayers(context.Background(), dst, []string{l1.dir, l2.dir}, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d/below", "d/above", "f"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if v, err := lgetxattr(filepath.Join(dst, "d"), "user.overlay.opaque"); err != nil || v != "y" {
		t.Errorf("d: user.overlay.opaque %q %v, want kept as the directory's own", v, err)
	}
}
