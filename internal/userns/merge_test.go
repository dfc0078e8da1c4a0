package userns

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/rootfs"
)

// TestMergeAs: the merge helper, re-executed in a user namespace, merges
// layers a sandbox wrote (a whiteout, an opaque directory, and a symlink to
// a host directory where the next layer has a directory) into one, and
// replies with what it made; the host directory is untouched.
func TestMergeAs(t *testing.T) {
	base := t.TempDir()
	host := filepath.Join(base, "host")
	l1, l2, dst := filepath.Join(base, "l1"), filepath.Join(base, "l2"), filepath.Join(base, "merged")
	for _, d := range []string{host, filepath.Join(l1, "o"), filepath.Join(l2, "d"), filepath.Join(l2, "o"), dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{"l1/gone": "x", "l1/o/old": "old", "l2/d/f": "f", "l2/o/new": "new"} {
		if err := os.WriteFile(filepath.Join(base, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(host, filepath.Join(l1, "d")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(l2, "gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(l2, "o"), "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	stats, err := MergeAs(context.Background(), self(t), singleMapping(), dst, []string{l1, l2}, rootfs.MergeOptions{UserXattr: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Layers != 2 || stats.Whiteouts != 1 || stats.Opaque != 2 {
		t.Errorf("stats %+v: want 2 layers, 1 whiteout, 2 opaque (o, and d made where a symlink was)", stats)
	}
	if entries, _ := os.ReadDir(host); len(entries) != 0 {
		t.Errorf("the host directory has %v", entries)
	}
	if data, err := os.ReadFile(filepath.Join(dst, "d", "f")); err != nil || string(data) != "f" {
		t.Errorf("d/f: %q %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "o", "old")); !os.IsNotExist(err) {
		t.Errorf("o/old under an opaque directory: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dst, "gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("gone: mode %o %v, want a whiteout", st.Mode, err)
	}
}
