package userns

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveTreeSymlinks: a tree a sandbox wrote, with a mode-000 directory
// (so that the first removal fails unprivileged and the directories are made
// writable) and symlinks to a host directory and a host file (read-only, so a
// chmod through a link would show): the tree goes, the host's entries keep
// their modes and contents.
func TestRemoveTreeSymlinks(t *testing.T) {
	base := t.TempDir()
	tree, host := filepath.Join(base, "tree"), filepath.Join(base, "host")
	for _, d := range []string{filepath.Join(tree, "locked", "in"), filepath.Join(host, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(host, "file"), []byte("keep"), 0o400); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"locked/in/dir": filepath.Join(host, "dir"), "locked/file": filepath.Join(host, "file"), "up": "../host/dir",
	} {
		if err := os.Symlink(target, filepath.Join(tree, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Join(host, "dir"), filepath.Join(tree, "locked")} {
		if err := os.Chmod(d, 0o500); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(tree, "locked", "in"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(host, "dir"), 0o755) })

	if err := RemoveTree(tree); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tree); !os.IsNotExist(err) {
		t.Errorf("tree left: %v", err)
	}
	for p, want := range map[string]os.FileMode{filepath.Join(host, "dir"): os.ModeDir | 0o500, filepath.Join(host, "file"): 0o400} {
		if st, err := os.Lstat(p); err != nil || st.Mode() != want {
			t.Errorf("host %s: %v, %v; want mode %v", p, st.Mode(), err, want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(host, "file")); err != nil || string(data) != "keep" {
		t.Errorf("host file: %q, %v", data, err)
	}
}

// TestCancelled: with its context done, RemoveAs removes nothing and
// ChangesAs lists nothing; both say why.
func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range []Mapping{{Mode: MapHost}, {Mode: MapSubID}} {
		if err := RemoveAs(ctx, "/nonexistent/bothy-init", m, dir); !errors.Is(err, context.Canceled) {
			t.Errorf("RemoveAs %s: %v, want context.Canceled", m.Mode, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "sub")); err != nil {
			t.Errorf("RemoveAs %s with a cancelled context removed: %v", m.Mode, err)
		}
		if ch, err := ChangesAs(ctx, "/nonexistent/bothy-init", m, ChangesRequest{Upper: dir}); !errors.Is(err, context.Canceled) || ch != nil {
			t.Errorf("ChangesAs %s: %v %v, want context.Canceled", m.Mode, ch, err)
		}
	}
}
