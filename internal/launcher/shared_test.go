package launcher

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/bothy-sandbox/bothy/rootfs"
)

// TestDirectoryShimOnce: launches that need a directory shim another is
// making wait for it and use it instead of each making one (a job array's
// first tasks); the next maker removes what a killed one left; the shim
// keeps the layers' directory modes.
func TestDirectoryShimOnce(t *testing.T) {
	lower := t.TempDir()
	for _, d := range []struct {
		path string
		mode fs.FileMode
	}{{"a", 0o755}, {"a/b", 0o555}, {"t", 0o777 | fs.ModeSticky}} {
		if err := os.Mkdir(filepath.Join(lower, d.path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(lower, d.path), d.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "a", "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	layers := []ipc.Layer{{DiffID: "sha256:2f2b7c1b9c6cd1e1d5b4a3c8f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1"}}
	ctx := context.Background()

	// A first launch makes it: its path, with the layer's directories.
	dst, err := directoryShim(ctx, cache, layers, []string{lower})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]fs.FileMode{"a": 0o755, "a/b": 0o555, "t": 0o777 | fs.ModeSticky} {
		fi, err := os.Lstat(filepath.Join(dst, path))
		if err != nil || !fi.IsDir() || fi.Mode()&(fs.ModePerm|fs.ModeSticky) != want {
			t.Errorf("shim's %s: %v, %v; want a directory of mode %v", path, fi, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "a", "file")); err == nil {
		t.Error("the shim holds the layer's file: it should hold directories only")
	}

	// While another launch holds the lock (making it), launches wait, make
	// nothing, and take the one it made.
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	unlock, err := rootfs.LockFile(ctx, dst+".lock")
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	done := make(chan error, n)
	for range n {
		go func() {
			got, err := directoryShim(ctx, cache, layers, []string{lower})
			if err == nil && got != dst {
				t.Errorf("shim at %s, want %s", got, dst)
			}
			done <- err
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if len(done) > 0 {
		t.Fatalf("a launch returned while another held the shim's lock: %v", <-done)
	}
	if tmp, _ := filepath.Glob(filepath.Join(cache, "shims", "tmp-*")); len(tmp) > 0 {
		t.Errorf("launches waiting for the lock made shims of their own: %v", tmp)
	}
	if err := os.Mkdir(dst, 0o700); err != nil { // what the holder made
		t.Fatal(err)
	}
	unlock()
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	// What a maker killed midway left is removed by the next one.
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(cache, "shims", "tmp-"+filepath.Base(dst)+"-1234", "tree", "a")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := directoryShim(ctx, cache, layers, []string{lower}); err != nil {
		t.Fatal(err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(cache, "shims", "tmp-*")); len(tmp) > 0 {
		t.Errorf("left after a shim was made: %v", tmp)
	}
	if !rootfs.IsDir(filepath.Join(dst, "a", "b")) {
		t.Errorf("no shim made at %s", dst)
	}
}
