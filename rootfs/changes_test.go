package rootfs

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree builds files under dir from a compact description: "d name" a
// directory, "f name" a file, "l name target" a symlink, "w name" a whiteout
// character device, "x name" an xattr whiteout, "o name" an opaque directory.
func tree(t *testing.T, dir, prefix string, entries ...string) {
	t.Helper()
	for _, e := range entries {
		f := strings.Fields(e)
		p := filepath.Join(dir, f[1])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch f[0] {
		case "d":
			err = os.MkdirAll(p, 0o755)
		case "o":
			if err = os.MkdirAll(p, 0o755); err == nil {
				err = unix.Setxattr(p, prefix+"overlay.opaque", []byte("y"), 0)
			}
		case "f":
			err = os.WriteFile(p, []byte(f[1]), 0o644)
		case "l":
			err = os.Symlink(f[2], p)
		case "w":
			// Unprivileged since Linux 5.8, as overlayfs itself does.
			err = unix.Mknod(p, unix.S_IFCHR, 0)
		case "x":
			if err = os.WriteFile(p, nil, 0o644); err == nil {
				err = unix.Setxattr(p, prefix+"overlay.whiteout", nil, 0)
			}
		}
		if err != nil {
			t.Fatalf("build %s: %v", e, err)
		}
	}
}

// xattrFormats are the overlay xattr namespaces the caller can write:
// trusted.* needs CAP_SYS_ADMIN, user.* is what rootless overlays use.
func xattrFormats() []string {
	if os.Geteuid() == 0 {
		return []string{"trusted.", "user."}
	}
	return []string{"user."}
}

func TestChanges(t *testing.T) {
	for _, prefix := range xattrFormats() {
		t.Run(strings.TrimSuffix(prefix, "."), func(t *testing.T) {
			base := t.TempDir()
			low2, low1, upper := filepath.Join(base, "l2"), filepath.Join(base, "l1"), filepath.Join(base, "u")
			// Bottom layer.
			tree(t, low2, prefix, "d etc/apt/sources.d", "f etc/apt/sources.d/a", "f etc/passwd", "f etc/group",
				"d usr/lib", "f usr/lib/x", "d gone", "f gone/y", "l link /etc", "d var/cache", "f var/cache/c1")
			// A layer above: deletes etc/group (both whiteout formats)
			// and makes var/cache opaque.
			tree(t, low1, prefix, "d etc", "w etc/group", "o var/cache", "f var/cache/c2", "d usr", "x usr/lib")
			// The sandbox's changes.
			tree(t, upper, prefix,
				"d etc", "f etc/passwd", "f etc/new", "w etc/apt", // passwd changed, apt deleted
				"w gone",                        // dir deleted
				"o var/cache", "f var/cache/c3", // cache emptied, refilled
				"d usr", "f usr/lib", // lib was whited out below: new
				"f link",                         // symlink replaced by a file
				"d newdir/sub", "f newdir/sub/f", // added tree
				"w etc/group", // whiteout of what lowers lack: nothing
			)
			got, err := Changes(upper, []string{low1, low2})
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, c := range got {
				lines = append(lines, c.String())
			}
			want := []string{
				"C /etc", "D /etc/apt", "A /etc/new", "C /etc/passwd",
				"D /gone",
				"C /link",
				"A /newdir", "A /newdir/sub", "A /newdir/sub/f",
				"C /usr", "A /usr/lib",
				"C /var", "C /var/cache", "D /var/cache/c2", "A /var/cache/c3",
			}
			if !slices.Equal(lines, want) {
				t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestChangesNoFollow: a symlink in a lower layer is never followed to decide
// whether a path exists below it.
func TestChangesNoFollow(t *testing.T) {
	base := t.TempDir()
	outside, lower, upper := filepath.Join(base, "outside"), filepath.Join(base, "lower"), filepath.Join(base, "upper")
	tree(t, outside, "user.", "f secret")
	tree(t, lower, "user.", "l esc "+outside)
	tree(t, upper, "user.", "d esc", "f esc/secret")
	got, err := Changes(upper, []string{lower})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].String() != "C /esc" || got[1].String() != "A /esc/secret" {
		t.Errorf("diff = %v, want C /esc, A /esc/secret", got)
	}
}

// TestExport: added and changed entries are copied; symlinks stay links,
// even ones aiming out of the tree; whiteouts and deletions are not copied.
func TestExport(t *testing.T) {
	base := t.TempDir()
	lower, upper, dst := filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "out")
	tree(t, lower, "user.", "f keep", "f gone", "d dir")
	tree(t, upper, "user.", "f keep", "w gone", "l evil /etc", "l rel ../../..", "d dir/new", "f dir/new/file")
	if err := os.Chmod(filepath.Join(upper, "keep"), 0o751); err != nil {
		t.Fatal(err)
	}
	changes, err := Changes(upper, []string{lower})
	if err != nil {
		t.Fatal(err)
	}
	if err := Export(upper, changes, dst); err != nil {
		t.Fatal(err)
	}
	var got []string
	_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(dst, p)
		info, _ := d.Info()
		line := rel + " " + info.Mode().String()
		if info.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			line += " -> " + target
		} else if info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			line += " " + string(data)
		}
		got = append(got, line)
		return nil
	})
	want := []string{". drwxr-xr-x", "dir drwxr-xr-x", "dir/new drwxr-xr-x", "dir/new/file -rw-r--r-- dir/new/file",
		"evil Lrwxrwxrwx -> /etc", "keep -rwxr-x--x keep", "rel Lrwxrwxrwx -> ../../.."}
	if !slices.Equal(got, want) {
		t.Errorf("export:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := Export(upper, changes, dst); err == nil {
		t.Error("export into a non-empty directory succeeded")
	}
}

// FuzzChanges builds lower and upper trees from the input (the upper
// directory is written by the sandbox: untrusted) and checks that Changes
// and Export hold their invariants: sorted unique paths, A and C only for
// what the upper holds, D only for what the lowers show, nothing written
// outside the export directory, no symlink followed.
func FuzzChanges(f *testing.F) {
	f.Add([]byte{0, 1, 6, 1, 13, 2, 21, 3, 4, 5})
	f.Add([]byte{1, 0, 7, 0, 3, 1, 9, 4, 2, 6, 8, 2})
	names := []string{"a", "a/b", "a/b/c", "b", "b/a", "c", "a/c", ".wh.a"}
	targets := []string{"/", "..", "../../outside", "a", "/a/b", "../.."}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			return
		}
		base := t.TempDir()
		lower, upper := filepath.Join(base, "lower"), filepath.Join(base, "upper")
		outside, dst := filepath.Join(base, "outside"), filepath.Join(base, "out")
		for _, d := range []string{lower, upper, outside} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(ops); i += 2 {
			kind, dir := ops[i]%6, lower
			if ops[i]/6%2 == 1 {
				dir = upper
			}
			name := names[int(ops[i+1])%len(names)]
			if !realDirs(dir, path.Dir(name)) {
				continue // the test itself must not write through a link
			}
			p := filepath.Join(dir, name)
			switch kind {
			case 0:
				_ = os.Mkdir(p, 0o755)
			case 1:
				_ = os.WriteFile(p, []byte{ops[i+1]}, 0o644)
			case 2:
				_ = os.Symlink(targets[int(ops[i+1])%len(targets)], p)
			case 3:
				_ = unix.Mknod(p, unix.S_IFCHR, 0)
			case 4:
				if os.Mkdir(p, 0o755) == nil {
					_ = unix.Setxattr(p, "user.overlay.opaque", []byte("y"), 0)
				}
			case 5:
				if os.WriteFile(p, nil, 0o644) == nil {
					_ = unix.Setxattr(p, "user.overlay.whiteout", nil, 0)
				}
			}
		}
		changes, err := Changes(upper, []string{lower})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range changes {
			if !strings.HasPrefix(c.Path, "/") || (i > 0 && changes[i-1].Path >= c.Path) {
				t.Fatalf("paths not sorted, unique and absolute: %v", changes)
			}
			rel := c.Path[1:]
			switch c.Kind {
			case Added, Changed:
				st, err := os.Lstat(filepath.Join(upper, rel))
				if err != nil || isWhiteout(filepath.Join(upper, rel), st) {
					t.Fatalf("%v: not in the upper directory (%v)", c, err)
				}
				if (c.Kind == Changed) != lowerHas([]string{lower}, rel) && !strings.Contains(rel, "/") {
					t.Fatalf("%v: the lower layer has it: %v", c, lowerHas([]string{lower}, rel))
				}
			case Deleted:
				if !lowerHas([]string{lower}, rel) {
					t.Fatalf("%v: the lower layer lacks it", c)
				}
			default:
				t.Fatalf("kind %q", c.Kind)
			}
		}
		if err := Export(upper, changes, dst); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(base)
		if len(entries) != 4 {
			t.Fatalf("export wrote beside its directory: %v", entries)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 1 {
			t.Fatalf("export wrote outside its directory: %v", entries)
		}
		_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if data, _ := os.ReadFile(p); string(data) == "host secret" {
					t.Fatalf("export followed a symlink to %s", p)
				}
			}
			return nil
		})
	})
}

// realDirs creates the directories of rel under dir and reports whether each
// is a real directory, not a symlink.
func realDirs(dir, rel string) bool {
	cur := dir
	for _, c := range strings.Split(rel, "/") {
		if c == "." {
			continue
		}
		cur = filepath.Join(cur, c)
		_ = os.Mkdir(cur, 0o755)
		if st, err := os.Lstat(cur); err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}
