package rootfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenRegularAt: only a regular file is opened; a FIFO, a symlink (to a
// regular file outside), a directory and a file replaced since it was seen
// are refused, and the FIFO is never opened: a writer blocked on it stays
// blocked (it would be released by any open for reading).
func TestOpenRegularAt(t *testing.T) {
	base := t.TempDir()
	dir, outside := filepath.Join(base, "dir"), filepath.Join(base, "outside")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.WriteFile(outside, []byte("host secret"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "file"), []byte("ok"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(dir, "link")))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	d, err := os.Open(dir)
	must(t, err)
	defer d.Close()

	released := make(chan struct{})
	go func() {
		// Blocks until something opens the FIFO for reading.
		if f, err := os.OpenFile(filepath.Join(dir, "fifo"), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		close(released)
	}()

	f, err := openRegularAt(d, "file", nil)
	must(t, err)
	buf := make([]byte, 10)
	if n, _ := f.Read(buf); string(buf[:n]) != "ok" {
		t.Errorf("read %q", buf[:n])
	}
	f.Close()
	for _, name := range []string{"fifo", "link", "sub", "missing"} {
		if f, err := openRegularAt(d, name, nil); err == nil {
			f.Close()
			t.Errorf("%s was opened", name)
		}
	}
	seen, err := lstatAt(d, "file")
	must(t, err)
	must(t, os.Rename(filepath.Join(dir, "file"), filepath.Join(dir, "old")))
	must(t, os.WriteFile(filepath.Join(dir, "file"), []byte("swapped"), 0o644))
	if f, err := openRegularAt(d, "file", seen); err == nil {
		f.Close()
		t.Error("a file replaced since it was seen was opened")
	}
	select {
	case <-released:
		t.Error("the FIFO was opened for reading")
	case <-time.After(100 * time.Millisecond):
	}
	// Release the writer.
	if r, err := os.OpenFile(filepath.Join(dir, "fifo"), os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
		<-released
		r.Close()
	}
}

// TestUpperSwapRace: a sandbox that keeps swapping a directory of its upper
// directory with a symlink to a host directory (renameat2 RENAME_EXCHANGE,
// atomic) while the host reads it: neither the layer (WriteDiff) nor the diff
// and its export (Changes, Export) ever holds the host file's content, and
// nothing is written outside the export directory. A walk that looks up a
// path by name after it saw a directory there follows the symlink swapped in
// meanwhile; one that holds each directory open does not.
func TestUpperSwapRace(t *testing.T) {
	base := t.TempDir()
	upper, host := filepath.Join(base, "upper"), filepath.Join(base, "host")
	const secret = "HOST SECRET"
	must(t, os.MkdirAll(filepath.Join(upper, "a"), 0o755))
	must(t, os.MkdirAll(host, 0o755))
	for _, n := range []string{"f", "g", "h"} {
		must(t, os.WriteFile(filepath.Join(upper, "a", n), []byte("sandbox"), 0o644))
		must(t, os.WriteFile(filepath.Join(host, n), []byte(secret), 0o644))
	}
	must(t, os.Symlink(host, filepath.Join(upper, "b")))
	hostBefore := snapshotDir(t, base+"/host")

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a, b := filepath.Join(upper, "a"), filepath.Join(upper, "b")
		for !stop.Load() {
			_ = unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()

	for i := range 300 {
		var layer bytes.Buffer
		if err := WriteDiff(&layer, upper, DiffOptions{}); err == nil && strings.Contains(layer.String(), secret) {
			t.Fatalf("iteration %d: the layer holds the host file's content", i)
		}
		changes, err := Changes(upper, nil)
		if err != nil {
			continue
		}
		// The export follows a list made before the swap: the worst case.
		changes = append(changes, Change{Added, "/a/f"}, Change{Added, "/b/f"})
		dst := filepath.Join(base, "export", string(rune('a'+i%26))+string(rune('a'+i/26)))
		_ = Export(upper, changes, dst)
		_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if data, _ := os.ReadFile(p); strings.Contains(string(data), secret) {
					t.Errorf("iteration %d: export %s holds the host file's content", i, p)
				}
			}
			return nil
		})
	}
	if got := snapshotDir(t, host); got != hostBefore {
		t.Errorf("host directory changed:\n%s\nwas:\n%s", got, hostBefore)
	}
}

func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + info.Mode().String())
		if info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			b.WriteString(" " + string(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return b.String()
}
