package runtimeimage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/testimage"
	"github.com/bothy-sandbox/bothy/oci"
	"github.com/bothy-sandbox/bothy/plugins"
	"github.com/bothy-sandbox/bothy/runtimeimage"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// busyboxImage imports busybox, with /bin/sh replaced by shell when it is
// not empty, into m's store as name.
func busyboxImage(t *testing.T, m *sandbox.Manager, name, shell string) {
	t.Helper()
	var rootfs bytes.Buffer
	if err := testimage.BusyboxTar(&rootfs); err != nil {
		t.Skipf("requires busybox-static (make setup): %v", err)
	}
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "rootfs.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	tr, tw := tar.NewReader(&rootfs), tar.NewWriter(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "bin/sh" && shell != "" {
			h = &tar.Header{Typeflag: tar.TypeReg, Name: "bin/sh", Mode: 0o755, Size: int64(len(shell)), ModTime: h.ModTime}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte(shell)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	archive := filepath.Join(dir, "image.oci.tar")
	if err := testimage.WriteOCIArchive(tarPath, archive, testimage.ArchiveOptions{Name: name, Cmd: []string{"/bin/sh"}, Env: []string{"PATH=/bin:/usr/bin"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Store().ImportOCIArchive(context.Background(), archive, name); err != nil {
		t.Fatal(err)
	}
}

// layerEntries reads the layer blob l: each entry's header and content.
func layerEntries(t *testing.T, s *oci.Store, l oci.Layer) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	rc, err := s.OpenBlob(l.Digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	heads, data := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return heads, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		heads[h.Name], data[h.Name] = h, string(b)
	}
}

// TestBuildHostileBase: a base image whose /bin/sh, before every command the
// build runs (the plugin check first), plants symlinks to a host file and a
// host directory wherever the host wrote or read for a build (the old setup
// script path in the socket directory, its log, the root, /tmp, /.bothy),
// and in the upper directory the layer is committed from. The build still
// succeeds, the host file and directory are unchanged, and the layer holds
// the links as links, never the host file's content. Stopped by: the setup
// script goes through the executor's file API (written inside the
// sandbox, never through a host path), and the layer writer opens nothing
// through a symlink.
func TestBuildHostileBase(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, sandbox.PathsUnder(testenv.ShortTempDir(t)), testenv.Executor(t))
	hostDir := t.TempDir()
	target := filepath.Join(hostDir, "precious")
	secret := "host secret " + filepath.Base(t.TempDir())
	if err := os.WriteFile(target, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(hostDir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := testenv.Snapshot(t, hostDir)
	shell := fmt.Sprintf(`#!/bin/busybox sh
# A hostile base image's shell: plant links to host paths, then be sh.
for d in /.bothy/run /.bothy /tmp / /etc; do
	for n in setup.sh main.log api.log script.sh .setup.sh; do
		/bin/busybox ln -sfn %[1]q "$d/$n" 2>/dev/null
	done
	/bin/busybox ln -sfn %[2]q "$d/hostdir" 2>/dev/null
done
/bin/busybox ln -sfn %[1]q /evil-file 2>/dev/null
/bin/busybox ln -sfn %[2]q /evil-dir 2>/dev/null
/bin/busybox ln -sfn ../../../../../../../..%[1]s /evil-rel 2>/dev/null
exec /bin/busybox sh "$@"
`, target, filepath.Join(hostDir, "sub"))
	busyboxImage(t, m, "hostile:1", shell)

	// A plugin whose check passes: the check is the first command the
	// build runs, so the links are in place before anything else.
	present := plugins.Recipe{Name: "present-test", Packages: []string{"busybox"}, Check: "true"}
	setup := writeFile(t, "echo built > /built\ncat /evil-file /evil-dir/* 2>/dev/null >> /built || true\n")
	res, err := runtimeimage.Build(ctx, m, runtimeimage.Options{Base: "hostile:1", Plugins: []plugins.Recipe{present}, Setup: setup})
	if after := testenv.Snapshot(t, hostDir); after != before {
		t.Errorf("host directory changed by the build:\n%s\nwas:\n%s", after, before)
	}
	if err != nil {
		t.Fatalf("build on the hostile base: %v", err)
	}
	img, err := m.Store().Resolve(ctx, res.Image)
	if err != nil {
		t.Fatal(err)
	}
	heads, data := layerEntries(t, m.Store(), img.Layers[len(img.Layers)-2])
	for name, want := range map[string]string{"evil-file": target, "evil-dir": filepath.Join(hostDir, "sub"), "tmp/setup.sh": target} {
		if h := heads[name]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != want {
			t.Errorf("layer entry %s: %+v, want a symlink to %s", name, h, want)
		}
	}
	if data["built"] != "built\n" {
		t.Errorf("layer's /built: %q", data["built"])
	}
	for name, content := range data {
		if strings.Contains(content, secret) {
			t.Errorf("layer entry %s holds the host file's content", name)
		}
		if strings.HasPrefix(name, ".bothy") || strings.Contains(name, "setup-") {
			t.Errorf("layer holds %s", name)
		}
	}
	noSandboxes(t, m)
}

// listener accepts TCP connections on the host's 127.0.0.1 and counts them.
func listener(t *testing.T) (port int, accepted *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted = &atomic.Int64{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Write([]byte("host service\n"))
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, accepted
}

// TestBuildNetwork: a build sandbox is on the bridge network by default:
// an interface with a default route out, and a service on the host's
// loopback out of its reach; on none it has loopback only; with Network
// "host" (--build-network host) the service is reached. The host
// listener's count is the proof.
func TestBuildNetwork(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, sandbox.PathsUnder(testenv.ShortTempDir(t)), testenv.Executor(t))
	busyboxImage(t, m, "netbox:1", "")
	port, accepted := listener(t)
	setup := writeFile(t, fmt.Sprintf("if nc -w 5 127.0.0.1 %d </dev/null >/dev/null; then echo reached; else echo blocked; fi > /net-result\n"+
		"ip route show default | cut -d' ' -f1-3,5 > /net-route\n", port))

	for _, c := range []struct{ network, route string }{{"", "default via 10."}, {sandbox.NetworkNone, ""}} {
		res, err := runtimeimage.Build(ctx, m, runtimeimage.Options{Base: "netbox:1", Setup: setup, Network: c.network, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if n := accepted.Load(); n != 0 {
			t.Errorf("the host listener accepted %d connections from a build on network %q", n, c.network)
		}
		if got := sh(t, m, res.Image, "cat /net-result"); got != "blocked" {
			t.Errorf("network %q: the setup script says %q", c.network, got)
		}
		if got := sh(t, m, res.Image, "cat /net-route"); !strings.HasPrefix(got, c.route) || (c.route == "") != (got == "") {
			t.Errorf("network %q: the build sandbox's default route is %q, want %q…", c.network, got, c.route)
		}
	}

	res, err := runtimeimage.Build(ctx, m, runtimeimage.Options{Base: "netbox:1", Setup: setup, Network: sandbox.NetworkHost, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := accepted.Load(); n == 0 {
		t.Error("the host listener accepted nothing from a build with --build-network host")
	}
	if got := sh(t, m, res.Image, "cat /net-result"); got != "reached" {
		t.Errorf("host network: the setup script says %q", got)
	}

	noSandboxes(t, m)
}
