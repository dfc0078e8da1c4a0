// Package testenv gives tests the real pieces a sandbox needs: the busybox
// image built from Debian's busybox-static, the static executor and the
// bothy-images binary (from make build, else built once per test binary),
// and short temporary directories for Unix sockets; and, for kernel features
// the test machine's kernel lacks (project quotas), a User-mode Linux kernel
// that RunInUML boots to run a test in.
package testenv

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/testimage"
)

var (
	once sync.Once
	dir  string
	err  error
)

// moduleRoot is the repository root, found from this file's location.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func setup() {
	dir, err = os.MkdirTemp("", "bothy-fixtures-")
	if err != nil {
		return
	}
	if err = testimage.BusyboxArchive(filepath.Join(dir, "busybox.oci.tar"), "busybox:latest"); err != nil {
		return
	}
	if err = testimage.HttpdArchive(filepath.Join(dir, "httpd.oci.tar"), "httpd:latest"); err != nil {
		return
	}
	if os.Getenv("BOTHY_EXECUTOR") != "" {
		return
	}
	// Outside `make test`: build the executor and bothy-plugin, beside
	// it, the way the Makefile does.
	for _, cmd := range []string{"bothy-executor", "bothy-plugin"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "./cmd/"+cmd)
		build.Dir = moduleRoot()
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // they run in images without a libc
		if out, berr := build.CombinedOutput(); berr != nil {
			err = fmt.Errorf("build %s (or set BOTHY_EXECUTOR, as make test does): %v: %s", cmd, berr, out)
			return
		}
	}
}

// Run runs a package's tests and then removes the fixtures directory, which
// outlives every test (the images and executor are made once per binary):
// a TestMain of a package that uses testenv ends with os.Exit(testenv.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	return code
}

func fixtures(t testing.TB) {
	t.Helper()
	once.Do(setup)
	if err != nil {
		if strings.Contains(err.Error(), "busybox-static") {
			t.Skipf("requires busybox-static (make setup): %v", err)
		}
		t.Fatal(err)
	}
}

// BusyboxArchive returns the path of an OCI archive holding busybox:latest.
func BusyboxArchive(t testing.TB) string {
	fixtures(t)
	return filepath.Join(dir, "busybox.oci.tar")
}

// HttpdArchive returns the path of an OCI archive holding httpd:latest, a
// server image with Entrypoint, Cmd, User, WorkingDir and Env
// (testimage.HttpdArchive).
func HttpdArchive(t testing.TB) string {
	fixtures(t)
	return filepath.Join(dir, "httpd.oci.tar")
}

// Executor returns the path of a static bothy-executor.
func Executor(t testing.TB) string {
	fixtures(t)
	if p := os.Getenv("BOTHY_EXECUTOR"); p != "" {
		return p
	}
	return filepath.Join(dir, "bothy-executor")
}

// PluginServer returns the path of a static bothy-plugin, beside Executor's
// (where sandbox.Open finds it by default).
func PluginServer(t testing.TB) string {
	return filepath.Join(filepath.Dir(Executor(t)), "bothy-plugin")
}

var (
	imagesOnce sync.Once
	images     string
	imagesErr  error
)

// ImagesHelper returns bothy-images, the CLI built with containers/image
// that runs bothy's pull, push, save, load and build: $BOTHY_IMAGES (make
// test sets it), else built here the way the Makefile builds it.
func ImagesHelper(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("BOTHY_IMAGES"); p != "" {
		return p
	}
	imagesOnce.Do(func() {
		fixtures(t)
		images = filepath.Join(dir, "bothy-images")
		build := exec.Command("go", "build", "-tags", "containers_image_openpgp exclude_graphdriver_btrfs seccomp bothy_images", "-o", images, "./cmd/bothy")
		build.Dir = moduleRoot()
		if out, err := build.CombinedOutput(); err != nil {
			imagesErr = fmt.Errorf("build bothy-images (or set BOTHY_IMAGES, as make test does): %v: %s", err, out)
		}
	})
	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
	return images
}

// ShortTempDir returns a fresh directory with a short path (executor sockets
// must fit in the 108-byte sun_path) that is removed after the test, even
// when it holds read-only directories.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("chmod", "-R", "u+rwX", d).Run()
		_ = os.RemoveAll(d)
	})
	return d
}

// Snapshot describes every entry under dir (path, type, mode, content or
// link target): two equal snapshots mean nothing under dir changed.
func Snapshot(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v", rel, info.Mode())
		switch {
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", data)
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&b, " -> %s", target)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return b.String()
}

// Decoy is a Unix socket listening where a test says: what a replaced socket
// file would lead a client to.
type Decoy struct {
	Path string
	ln   *net.UnixListener
}

// NewDecoy listens on path until the test ends.
func NewDecoy(t testing.TB, path string) *Decoy {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	t.Cleanup(func() { ln.Close() })
	return &Decoy{Path: path, ln: ln}
}

// Untouched fails the test if anyone connected to the decoy: a connection a
// client made is queued before its call returns, so a short deadline finds
// it.
func (d *Decoy) Untouched(t testing.TB) {
	t.Helper()
	d.ln.SetDeadline(time.Now().Add(50 * time.Millisecond))
	if c, err := d.ln.Accept(); err == nil {
		buf := make([]byte, 512)
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := c.Read(buf)
		c.Close()
		t.Fatalf("a client connected to the decoy and sent %q", buf[:n])
	}
}
