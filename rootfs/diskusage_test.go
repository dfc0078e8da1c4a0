package rootfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDiskUsage: DiskUsage counts a tree's blocks, a hard-linked file once,
// and never what a symlink in it points at (a directory outside, its
// parent).
func TestDiskUsage(t *testing.T) {
	root := t.TempDir()
	tree, outside := filepath.Join(root, "tree"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(tree, "d"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i) | 1
	}
	if err := os.WriteFile(filepath.Join(tree, "d", "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "big"), append(data, data...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(tree, "d", "f"), filepath.Join(tree, "hard")); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{outside, "..", "/"} {
		if err := os.Symlink(l, filepath.Join(tree, "d", filepath.Base(l)+"-link")); err != nil {
			t.Fatal(err)
		}
	}
	got := DiskUsage(tree)
	if got < 1<<20 || got >= 3<<19 {
		t.Fatalf("DiskUsage = %d, want one copy of the 1 MiB file (and its directories), nothing outside", got)
	}
	if link := DiskUsage(filepath.Join(tree, "d", "outside-link")); link != 0 {
		t.Fatalf("DiskUsage through a symlink = %d, want 0", link)
	}
}
