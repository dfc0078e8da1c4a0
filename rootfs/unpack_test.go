package rootfs

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

var errAny = errors.New("any error")

type unpackCase struct {
	name string
	ents func(s *sandbox) []tarEntry
	opts UnpackOptions
	root string // non-empty: requires root, for this reason
	// wantErr: nil for success, errAny for any error, else errors.Is.
	wantErr error
	check   func(t *testing.T, s *sandbox, notes []Note)
}

func fixed(ents ...tarEntry) func(*sandbox) []tarEntry {
	return func(*sandbox) []tarEntry { return ents }
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantMode(t *testing.T, p string, want uint32) {
	t.Helper()
	if st := lstat(t, p); st.Mode&0o7777 != want {
		t.Errorf("%s: mode %o, want %o", p, st.Mode&0o7777, want)
	}
}

func wantType(t *testing.T, p string, typ uint32) unix.Stat_t {
	t.Helper()
	st := lstat(t, p)
	if st.Mode&unix.S_IFMT != typ {
		t.Fatalf("%s: type %o, want %o", p, st.Mode&unix.S_IFMT, typ)
	}
	return st
}

func wantAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (err %v)", p, err)
	}
}

func wantWhiteout(t *testing.T, p string) {
	t.Helper()
	st := wantType(t, p, unix.S_IFCHR)
	if st.Rdev != 0 {
		t.Errorf("%s: whiteout device %d:%d, want 0:0", p, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
}

func getxattr(p, name string) string {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(p, name, buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

func hasNote(notes []Note, path, substr string) bool {
	for _, n := range notes {
		if n.Path == path && strings.Contains(n.Reason, substr) {
			return true
		}
	}
	return false
}

var rootless = UnpackOptions{Rootless: true}

func unpackCases() []unpackCase {
	return []unpackCase{
		{
			name: "files dirs modes times",
			ents: fixed(
				dirEnt("./", 0o700),
				dirEnt("etc/", 0o755),
				reg("etc/hosts", "127.0.0.1 localhost\n", 0o640),
				dirEnt("ro/", 0o555),
				dirEnt("ro/sub/", 0o500),
				reg("ro/sub/f", "in a read-only dir", 0o400),
				reg("empty", "", 0),
				tarEntry{tar.Header{Typeflag: tar.TypeFifo, Name: "fifo", Mode: 0o620, ModTime: testTime}, ""},
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				if got := readFile(t, filepath.Join(s.dest, "etc/hosts")); got != "127.0.0.1 localhost\n" {
					t.Errorf("hosts = %q", got)
				}
				wantMode(t, filepath.Join(s.dest, "etc/hosts"), 0o640)
				wantMode(t, filepath.Join(s.dest, "ro"), 0o555)
				wantMode(t, filepath.Join(s.dest, "ro/sub"), 0o500)
				wantMode(t, filepath.Join(s.dest, "ro/sub/f"), 0o400)
				wantMode(t, filepath.Join(s.dest, "empty"), 0)
				wantMode(t, filepath.Join(s.dest, "fifo"), 0o620)
				wantType(t, filepath.Join(s.dest, "fifo"), unix.S_IFIFO)
				wantMode(t, s.dest, 0o755) // the root keeps its mode
				for _, p := range []string{"", "etc", "etc/hosts", "ro", "ro/sub", "ro/sub/f", "fifo"} {
					if st := lstat(t, filepath.Join(s.dest, p)); st.Mtim.Sec != testTime.Unix() {
						t.Errorf("/%s: mtime %d, want %d", p, st.Mtim.Sec, testTime.Unix())
					}
				}
			},
		},
		{
			name: "implicit parents",
			ents: fixed(reg("a/b/c/file", "x", 0o644)),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				wantMode(t, filepath.Join(s.dest, "a/b"), 0o755)
				if readFile(t, filepath.Join(s.dest, "a/b/c/file")) != "x" {
					t.Error("wrong content")
				}
			},
		},
		{
			name: "whiteouts",
			ents: fixed(
				reg(".wh.gone", "", 0o644),
				reg("dir/.wh.sub", "", 0o644),
				reg("keep", "mine", 0o644),
				reg(".wh.keep", "", 0o644), // same layer: does not hide keep
				reg(".wh.later", "", 0o644),
				reg("later", "wins", 0o644),
				reg(".wh..wh.plnk", "", 0o644),
				reg(".wh.", "", 0o644),
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, notes []Note) {
				wantWhiteout(t, filepath.Join(s.dest, "gone"))
				wantWhiteout(t, filepath.Join(s.dest, "dir/sub"))
				wantAbsent(t, filepath.Join(s.dest, ".wh.gone"))
				if readFile(t, filepath.Join(s.dest, "keep")) != "mine" {
					t.Error("keep hidden by its own layer")
				}
				if readFile(t, filepath.Join(s.dest, "later")) != "wins" {
					t.Error("later entry did not replace the whiteout")
				}
				wantAbsent(t, filepath.Join(s.dest, ".wh..wh.plnk"))
				if !hasNote(notes, ".wh..wh.plnk", "aufs") {
					t.Errorf("no note for aufs entry: %v", notes)
				}
			},
		},
		{
			name: "opaque rootless",
			ents: fixed(
				dirEnt("o/", 0o755),
				reg("o/.wh..wh..opq", "", 0o644),
				reg("o/f", "kept", 0o644),
				reg("p/.wh..wh..opq", "", 0o644), // parent not in the tar
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				for _, d := range []string{"o", "p"} {
					if v := getxattr(filepath.Join(s.dest, d), "user.overlay.opaque"); v != "y" {
						t.Errorf("%s: user.overlay.opaque = %q", d, v)
					}
				}
				wantAbsent(t, filepath.Join(s.dest, "o/.wh..wh..opq"))
				if readFile(t, filepath.Join(s.dest, "o/f")) != "kept" {
					t.Error("o/f lost")
				}
			},
		},
		{
			name: "opaque root mode",
			root: "trusted.* xattrs need CAP_SYS_ADMIN",
			ents: fixed(dirEnt("o/", 0o755), reg("o/.wh..wh..opq", "", 0o644)),
			check: func(t *testing.T, s *sandbox, _ []Note) {
				if v := getxattr(filepath.Join(s.dest, "o"), "trusted.overlay.opaque"); v != "y" {
					t.Errorf("trusted.overlay.opaque = %q", v)
				}
				if v := getxattr(filepath.Join(s.dest, "o"), "user.overlay.opaque"); v != "" {
					t.Errorf("user.overlay.opaque = %q in root mode", v)
				}
			},
		},
		{
			name: "hardlinks",
			ents: fixed(
				reg("f", "data", 0o644),
				hardlink("g", "f"),
				hardlink("/abs/h", "/f"),
				hardlink("f", "f"),   // self: no-op
				hardlink("g", "./f"), // again: no-op
				symlink("s", "/etc/passwd"),
				hardlink("t", "s"), // to a symlink: links the symlink
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				f, g, h := lstat(t, filepath.Join(s.dest, "f")), lstat(t, filepath.Join(s.dest, "g")), lstat(t, filepath.Join(s.dest, "abs/h"))
				if f.Ino != g.Ino || f.Ino != h.Ino || f.Nlink != 3 {
					t.Errorf("hardlinks: ino %d %d %d nlink %d", f.Ino, g.Ino, h.Ino, f.Nlink)
				}
				st := wantType(t, filepath.Join(s.dest, "t"), unix.S_IFLNK)
				if st.Ino != lstat(t, filepath.Join(s.dest, "s")).Ino {
					t.Error("t is not the symlink s")
				}
			},
		},
		{
			name: "symlink targets are content",
			ents: fixed(symlink("abs", "/etc/passwd"), symlink("rel", "../../../x"), symlink("dangling", "nowhere")),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				for name, want := range map[string]string{"abs": "/etc/passwd", "rel": "../../../x", "dangling": "nowhere"} {
					if got, err := os.Readlink(filepath.Join(s.dest, name)); err != nil || got != want {
						t.Errorf("%s -> %q (%v), want %q", name, got, err, want)
					}
					if st := lstat(t, filepath.Join(s.dest, name)); st.Mtim.Sec != testTime.Unix() {
						t.Errorf("%s: symlink mtime not set", name)
					}
				}
			},
		},
		{name: "dotdot name", ents: fixed(reg("../escape", "x", 0o644)), opts: rootless, wantErr: ErrUnsafePath},
		{name: "dotdot inside name", ents: fixed(reg("a/../../escape", "x", 0o644)), opts: rootless, wantErr: ErrUnsafePath},
		{name: "dotdot dir", ents: fixed(dirEnt("../", 0o755)), opts: rootless, wantErr: ErrUnsafePath},
		{name: "dotdot whiteout", ents: fixed(reg("../.wh.sentinel", "", 0o644)), opts: rootless, wantErr: ErrUnsafePath},
		{name: "dotdot hardlink target", ents: fixed(hardlink("h", "../sentinel/canary")), opts: rootless, wantErr: ErrUnsafePath},
		{
			name: "absolute names stay inside",
			ents: func(s *sandbox) []tarEntry {
				return []tarEntry{reg("/etc/abs", "x", 0o644), reg(s.sentinel+"/canary", "pwned", 0o644)}
			},
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				if readFile(t, filepath.Join(s.dest, "etc/abs")) != "x" {
					t.Error("etc/abs missing")
				}
				if readFile(t, filepath.Join(s.dest, s.sentinel, "canary")) != "pwned" {
					t.Error("absolute entry not placed inside dest")
				}
			},
		},
		{
			name: "write through symlinks stays inside",
			ents: func(s *sandbox) []tarEntry {
				return []tarEntry{
					symlink("abs", s.sentinel),
					reg("abs/canary", "pwned", 0o644),
					reg("abs/sub/passwd", "pwned", 0o644),
					symlink("rel", "../sentinel"),
					reg("rel/canary", "pwned", 0o644),
					symlink("up", "../../../../../../../.."),
					reg("up/"+strings.TrimPrefix(s.sentinel, "/")+"/new", "pwned", 0o644),
					symlink("a", "/etc"),
					reg("a/passwd", "pwned", 0o644),
					symlink("loop", "/loop"),
					dirEnt("up/etc/dir/", 0o755),
					tarEntry{tar.Header{Typeflag: tar.TypeFifo, Name: "rel/fifo", Mode: 0o644}, ""},
					reg("abs/.wh.link", "", 0o644),
					reg("rel/.wh..wh..opq", "", 0o644),
				}
			},
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				if readFile(t, filepath.Join(s.dest, s.sentinel, "canary")) != "pwned" {
					t.Error("abs/canary not written inside dest")
				}
				if readFile(t, filepath.Join(s.dest, "sentinel/canary")) != "pwned" {
					t.Error("rel/canary not written at dest/sentinel/canary")
				}
				if readFile(t, filepath.Join(s.dest, "etc/passwd")) != "pwned" {
					t.Error("etc/passwd not written inside dest")
				}
				wantType(t, filepath.Join(s.dest, "a"), unix.S_IFLNK)
				wantType(t, filepath.Join(s.dest, "sentinel/fifo"), unix.S_IFIFO)
				wantWhiteout(t, filepath.Join(s.dest, s.sentinel, "link"))
			},
		},
		{
			name: "hardlink to outside via absolute path",
			ents: func(s *sandbox) []tarEntry {
				return []tarEntry{hardlink("h", s.sentinel+"/canary")}
			},
			opts:    rootless,
			wantErr: os.ErrNotExist,
		},
		{
			name: "hardlink to outside via symlink",
			ents: fixed(symlink("s", "../sentinel"), hardlink("h", "s/canary")),
			opts: rootless, wantErr: os.ErrNotExist,
		},
		{
			name: "hardlink through symlinked dir stays inside",
			ents: fixed(dirEnt("real/", 0o755), reg("real/f", "x", 0o644), symlink("s", "/real"), hardlink("h", "s/f")),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				if lstat(t, filepath.Join(s.dest, "h")).Ino != lstat(t, filepath.Join(s.dest, "real/f")).Ino {
					t.Error("h is not real/f")
				}
			},
		},
		{name: "hardlink to a directory", ents: fixed(dirEnt("d/", 0o755), hardlink("h", "d")), opts: rootless, wantErr: errAny},
		{name: "hardlink to root", ents: fixed(hardlink("h", "./")), opts: rootless, wantErr: ErrUnsafePath},
		{
			name: "devices rootless",
			ents: fixed(
				device(tar.TypeChar, "dev/null", 1, 3),
				device(tar.TypeBlock, "sda", 8, 0),
				device(tar.TypeChar, "mem", 1, 1),
				device(tar.TypeFifo, "fifo", 0, 0),
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, notes []Note) {
				wantAbsent(t, filepath.Join(s.dest, "dev/null"))
				wantAbsent(t, filepath.Join(s.dest, "sda"))
				wantType(t, filepath.Join(s.dest, "fifo"), unix.S_IFIFO)
				if !hasNote(notes, "sda", "skipped") || !hasNote(notes, "dev/null", "skipped") {
					t.Errorf("notes: %v", notes)
				}
			},
		},
		{
			name: "devices as root",
			root: "mknod of a device needs CAP_MKNOD",
			ents: fixed(device(tar.TypeChar, "null", 1, 3), device(tar.TypeBlock, "sda", 8, 0)),
			check: func(t *testing.T, s *sandbox, _ []Note) {
				st := wantType(t, filepath.Join(s.dest, "null"), unix.S_IFCHR)
				if unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != 3 {
					t.Errorf("null: %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
				}
				wantMode(t, filepath.Join(s.dest, "null"), 0o666)
				wantType(t, filepath.Join(s.dest, "sda"), unix.S_IFBLK)
			},
		},
		{
			name: "setuid stripped",
			ents: fixed(reg("su", "x", 0o4755), reg("sg", "x", 0o2755), dirEnt("sgdir/", 0o3775)),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				wantMode(t, filepath.Join(s.dest, "su"), 0o755)
				wantMode(t, filepath.Join(s.dest, "sg"), 0o755)
				wantMode(t, filepath.Join(s.dest, "sgdir"), 0o3775)
			},
		},
		{
			name: "setuid kept",
			ents: fixed(reg("su", "x", 0o4755)),
			opts: UnpackOptions{Rootless: true, KeepSetuid: true},
			check: func(t *testing.T, s *sandbox, _ []Note) {
				wantMode(t, filepath.Join(s.dest, "su"), 0o4755)
			},
		},
		{
			name: "mount points neutralised",
			ents: fixed(
				symlink("proc", "/host/proc"),
				reg("sys", "not a dir", 0o644),
				dirEnt("dev/", 0o755),
				symlink("dev/pts", "/dev/pts"),
				symlink("dev/shm", "/run/shm"),
				reg("dev/.wh.mqueue", "", 0o644),
				dirEnt("x/", 0o755),
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, notes []Note) {
				for _, p := range []string{"proc", "sys", "dev/pts", "dev/shm"} {
					wantType(t, filepath.Join(s.dest, p), unix.S_IFDIR)
					if !hasNote(notes, p, "mount point") {
						t.Errorf("no note for %s: %v", p, notes)
					}
				}
				wantWhiteout(t, filepath.Join(s.dest, "dev/mqueue"))
			},
		},
		{
			name: "mount points via symlinked parent and hardlink",
			ents: fixed(
				symlink("root", "/"),
				symlink("root/proc", "/etc"),
				reg("f", "x", 0o644),
				hardlink("root/sys", "f"),
				symlink("dev", "/"),
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				for _, p := range []string{"proc", "sys", "dev"} {
					wantType(t, filepath.Join(s.dest, p), unix.S_IFDIR)
				}
			},
		},
		{
			name: "duplicates later wins",
			ents: fixed(
				reg("f", "first", 0o644),
				reg("f", "second", 0o600),
				dirEnt("d/", 0o755), reg("d/child", "x", 0o644),
				reg("d", "file now", 0o644),
				reg("e", "file", 0o644),
				dirEnt("e/", 0o711), reg("e/x", "in dir", 0o644),
				symlink("l", "../sentinel/canary"),
				reg("l", "regular", 0o644),
				symlink("m", "f"),
				symlink("m", "e"),
				dirEnt("k/", 0o755), reg("k/a", "a", 0o644),
				dirEnt("k/", 0o700), // dir over dir keeps contents
				reg("w", "x", 0o644),
				dirEnt("w/", 0o755),
				symlink("w", "e"),
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				if readFile(t, filepath.Join(s.dest, "f")) != "second" {
					t.Error("f not replaced")
				}
				wantMode(t, filepath.Join(s.dest, "f"), 0o600)
				if readFile(t, filepath.Join(s.dest, "d")) != "file now" {
					t.Error("dir not replaced by file")
				}
				wantMode(t, filepath.Join(s.dest, "e"), 0o711)
				if readFile(t, filepath.Join(s.dest, "e/x")) != "in dir" {
					t.Error("file not replaced by dir")
				}
				wantType(t, filepath.Join(s.dest, "l"), unix.S_IFREG)
				if target, _ := os.Readlink(filepath.Join(s.dest, "m")); target != "e" {
					t.Errorf("m -> %q", target)
				}
				wantMode(t, filepath.Join(s.dest, "k"), 0o700)
				if readFile(t, filepath.Join(s.dest, "k/a")) != "a" {
					t.Error("dir over dir lost contents")
				}
				wantType(t, filepath.Join(s.dest, "w"), unix.S_IFLNK)
			},
		},
		{
			name: "xattrs",
			ents: fixed(
				tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: "f", Mode: 0o644, PAXRecords: map[string]string{
					"SCHILY.xattr.user.comment":           "hello",
					"SCHILY.xattr.user.overlay.redirect":  "/etc",
					"SCHILY.xattr.trusted.overlay.opaque": "y",
					"SCHILY.xattr.security.capability":    "\x01\x00\x00\x02",
				}}, ""},
				tarEntry{tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755, PAXRecords: map[string]string{
					"SCHILY.xattr.user.overlay.opaque": "y",
					"SCHILY.xattr.user.ok":             "1",
				}}, ""},
			),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, _ []Note) {
				f, d := filepath.Join(s.dest, "f"), filepath.Join(s.dest, "d")
				if getxattr(f, "user.comment") != "hello" || getxattr(d, "user.ok") != "1" {
					t.Error("user xattrs not restored")
				}
				for _, x := range []string{"user.overlay.redirect", "trusted.overlay.opaque", "security.capability"} {
					if getxattr(f, x) != "" {
						t.Errorf("%s restored", x)
					}
				}
				if getxattr(d, "user.overlay.opaque") != "" {
					t.Error("forged user.overlay.opaque restored")
				}
			},
		},
		{
			name: "chown",
			root: "chown to other ids needs CAP_CHOWN",
			ents: fixed(dirEnt("d/", 0o755), reg("d/f", "x", 0o4755), symlink("s", "d"), reg("deep/f", "x", 0o644)),
			opts: UnpackOptions{Chown: func(uid, gid int) (int, int, error) { return uid + 1000, gid + 2000, nil }, KeepSetuid: true},
			check: func(t *testing.T, s *sandbox, _ []Note) {
				for _, p := range []string{"d", "d/f", "s", "deep"} {
					if st := lstat(t, filepath.Join(s.dest, p)); st.Uid != 1000 || st.Gid != 2000 {
						t.Errorf("%s: owner %d:%d", p, st.Uid, st.Gid)
					}
				}
				wantMode(t, filepath.Join(s.dest, "d/f"), 0o4755) // set after chown
			},
		},
		{
			name:    "chown mapping error",
			ents:    fixed(reg("f", "x", 0o644)),
			opts:    UnpackOptions{Rootless: true, Chown: func(uid, gid int) (int, int, error) { return 0, 0, errors.New("unmapped") }},
			wantErr: unix.EINVAL,
		},
		{
			name: "chown errors ignored",
			ents: fixed(reg("f", "x", 0o644), dirEnt("d/", 0o755), symlink("s", "f")),
			opts: UnpackOptions{Rootless: true, IgnoreChownErrors: true,
				Chown: func(uid, gid int) (int, int, error) { return 0, 0, errors.New("unmapped") }},
			check: func(t *testing.T, s *sandbox, notes []Note) {
				if !hasNote(notes, "f", "chown ignored") {
					t.Errorf("notes: %v", notes)
				}
			},
		},
		{
			name: "root entry not a directory",
			ents: fixed(symlink("./", "/etc"), reg("f", "x", 0o644)),
			opts: rootless,
			check: func(t *testing.T, s *sandbox, notes []Note) {
				wantType(t, s.dest, unix.S_IFDIR)
				if !hasNote(notes, "", "layer root") {
					t.Errorf("notes: %v", notes)
				}
			},
		},
		{name: "empty layer", opts: rootless},
		{name: "write through a symlink loop", ents: fixed(symlink("loop", "/loop"), reg("loop/f", "x", 0o644)), opts: rootless, wantErr: unix.ELOOP},
	}
}

func runUnpackCases(t *testing.T, walkOnly bool) {
	for _, tc := range unpackCases() {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			var ents []tarEntry
			if tc.ents != nil {
				ents = tc.ents(s)
			}
			if tc.root != "" && !asRoot(t, tc.root, func() error {
				err := unpack(context.Background(), bytes.NewReader(mkTar(t, ents...)), s.dest, tc.opts, walkOnly)
				s.checkHost(t)
				return err
			}) {
				return
			}
			var notes []Note
			opts := tc.opts
			opts.Notify = func(n Note) { notes = append(notes, n) }
			err := unpack(context.Background(), bytes.NewReader(mkTar(t, ents...)), s.dest, opts, walkOnly)
			s.checkHost(t)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Unpack: %v", err)
			case tc.wantErr == errAny && err == nil, tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("Unpack error %v, want %v", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, s, notes)
			}
		})
	}
}

func TestUnpack(t *testing.T) { runUnpackCases(t, false) }

// TestUnpackWalk runs the same cases with the user-space resolver used when
// openat2 is unavailable.
func TestUnpackWalk(t *testing.T) { runUnpackCases(t, true) }

func TestUnpackCancelled(t *testing.T) {
	s := newSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Unpack(ctx, bytes.NewReader(mkTar(t, reg("f", "x", 0o644))), s.dest, rootless)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestUnpackTruncated(t *testing.T) {
	s := newSandbox(t)
	b := mkTar(t, reg("f", strings.Repeat("x", 2000), 0o644))
	err := Unpack(context.Background(), bytes.NewReader(b[:1000]), s.dest, rootless)
	if err == nil {
		t.Fatal("truncated layer unpacked without error")
	}
	s.checkHost(t)
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"a": "a", "./a/": "a", "/a//b/": "a/b", "./": "", "/": "", ".": "", "": "", "a/./b": "a/b",
	} {
		if got, err := cleanName(in); err != nil || got != want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "../a", "a/../b", "a/..", "/../a", "a\x00b"} {
		if _, err := cleanName(in); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("cleanName(%q) err = %v", in, err)
		}
	}
}

func TestIDMapChown(t *testing.T) {
	chown := IDMapChown(
		[]specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}},
		[]specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 10}, {ContainerID: 100, HostID: 5, Size: 1}},
	)
	if u, g, err := chown(1000, 100); err != nil || u != 101000 || g != 5 {
		t.Errorf("chown(1000, 100) = %d, %d, %v", u, g, err)
	}
	if _, _, err := chown(0, 50); err == nil {
		t.Error("unmapped gid accepted")
	}
	if _, _, err := chown(-1, 0); err == nil {
		t.Error("negative uid accepted")
	}
}

func BenchmarkUnpack(b *testing.B) {
	var ents []tarEntry
	for d := range 50 {
		dir := "usr/share/d" + strings.Repeat("x", d%7) + string(rune('a'+d%26)) + "/" + string(rune('a'+d/26))
		ents = append(ents, dirEnt(dir+"/", 0o755))
		for f := range 40 {
			ents = append(ents, reg(dir+"/file"+string(rune('a'+f%26))+string(rune('a'+f/26)), "some content", 0o644))
		}
	}
	data := mkTar(b, ents...)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		dest := b.TempDir()
		if err := Unpack(context.Background(), bytes.NewReader(data), dest, rootless); err != nil {
			b.Fatal(err)
		}
	}
}
