package rootfs

import (
	"os"
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
