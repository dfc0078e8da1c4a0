package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/bothy-sandbox/bothy/internal/testimage"
)

// TestBuildShip builds a runtime image on busybox (the CLI tests' default
// image), ships it by push, save and load to another store, and runs it there.
func TestBuildShip(t *testing.T) {
	c := newCLI(t)
	setup := filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(setup, []byte("echo built > /etc/bothy-built\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Path    string
		Image   string
		Names   []string
		Added   []string
		Seconds float64
	}
	if err := json.Unmarshal([]byte(c.ok("build", "-q", "--setup", setup, "--format", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Path != "scratch" || len(res.Names) != 3 || len(res.Added) != 3 || !strings.HasPrefix(res.Image, "sha256:") || res.Seconds <= 0 {
		t.Fatalf("build: %+v", res)
	}
	if out := c.ok("build", "-q", "--setup", setup); !strings.Contains(out, "path: reuse") || !strings.HasPrefix(out, res.Image) {
		t.Errorf("second build:\n%s", out)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	dest := strings.TrimPrefix(srv.URL, "http://") + "/team/runtime:1"
	if out := c.ok("push", "-q", "--tls-verify=false", res.Names[0], dest); strings.TrimSpace(out) != res.Image {
		t.Errorf("push printed %q", out)
	}
	archive := filepath.Join(t.TempDir(), "runtime.tar")
	c.ok("save", "-q", res.Names[2], archive)

	other := newCLI(t)
	if out := other.ok("pull", "-q", "--tls-verify=false", dest); strings.TrimSpace(out) != res.Image {
		t.Errorf("pull gave %q, pushed %s", out, res.Image)
	}
	if out := other.ok("load", archive, "shipped:1"); strings.TrimSpace(out) != res.Image {
		t.Errorf("load gave %q, saved %s", out, res.Image)
	}
	if out := other.ok("run", "--rm", "shipped:1", "--", "cat", "/etc/bothy-built"); out != "built\n" {
		t.Errorf("run on the shipped image: %q", out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--plugins", "nope"}, "unknown plugin"},
		{[]string{"build", "--format", "yaml"}, "unknown format"},
		{[]string{"build", "--setup", "/nonexistent/s.sh"}, "/nonexistent/s.sh"},
		{[]string{"build", "--build-network", "bridged"}, `unknown network mode "bridged"`},
		{[]string{"push", "no/such:image", "oci-archive:/tmp/x.tar"}, "not found"},
	} {
		if _, errOut, code := c.run("", tc.args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bothy %s: exit %d, stderr %q, want %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

// TestBuildNetworkFlag: without --build-network (bridge) and with none or
// bridge the build sandbox cannot reach a service on the host's loopback;
// with --build-network host it can.
// The host listener's count is the proof.
func TestBuildNetworkFlag(t *testing.T) {
	c := newCLI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conn.Close()
		}
	}()
	setup := filepath.Join(t.TempDir(), "setup.sh")
	script := fmt.Sprintf("if nc -w 5 127.0.0.1 %d </dev/null >/dev/null; then echo reached; else echo blocked; fi > /net-result\n", l.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(setup, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "blocked"},
		{[]string{"--build-network", "none"}, "blocked"},
		{[]string{"--build-network", "bridge"}, "blocked"},
		{[]string{"--build-network", "host"}, "reached"},
	} {
		before := accepted.Load()
		var res struct{ Image string }
		args := append([]string{"build", "-q", "--force", "--setup", setup, "--format", "json"}, tc.args...)
		if err := json.Unmarshal([]byte(c.ok(args...)), &res); err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(c.ok("run", "--rm", res.Image, "--", "cat", "/net-result"))
		n := accepted.Load() - before
		if got != tc.want || (n > 0) != (tc.want == "reached") {
			t.Errorf("bothy %s: the script says %q and the host listener accepted %d connections, want %s",
				strings.Join(args, " "), got, n, tc.want)
		}
	}
}

// TestBuildBrokenPipe: a build whose output reader has gone (`bothy build
// 2>&1 | head -1` once head has exited) is not killed by SIGPIPE on its next
// write: it ends as on Ctrl-C, removing its build sandbox. Then SIGHUP (the
// terminal closed) ends a build the same way.
func TestBuildBrokenPipe(t *testing.T) {
	k := newKillEnv(t, true)
	setup := filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(setup, []byte("echo started; sleep 0.5; while :; do echo tick; sleep 0.1; done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"SIGPIPE", "SIGHUP"} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(k.bin, "build", "--force", "--build-network", "none", "--setup", setup)
		cmd.Env, cmd.Stdout, cmd.Stderr = k.env, pw, pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		lines := bufio.NewScanner(pr)
		for lines.Scan() && !strings.Contains(lines.Text(), "started") {
		}
		if len(k.list()) != 1 {
			t.Fatalf("%s: no build sandbox listed while the setup script runs", how)
		}
		if how == "SIGPIPE" {
			pr.Close() // head -1 has exited
		} else {
			cmd.Process.Signal(syscall.SIGHUP)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("%s: build still running 2 minutes later", how)
		}
		pr.Close()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
			t.Errorf("%s: build killed by %v", how, ee.Sys().(syscall.WaitStatus).Signal())
		}
		if left := k.list(); len(left) != 0 {
			t.Errorf("%s: the build sandbox %s is left (%s)", how, left[0].ID, left[0].Status)
		}
	}
}

// TestDuplicateLayers: an image that lists the same layer twice runs (the
// overlay lists it once, where it is top-most: /x is the top layer's), and
// bothy build --base on a runtime image replaces its executor layer rather
// than stacking a second one.
func TestDuplicateLayers(t *testing.T) {
	c := newCLI(t)
	layer := func(write func(*tar.Writer)) v1.Layer {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		write(tw)
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	file := func(content string) v1.Layer {
		return layer(func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Name: "x", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))})
			tw.Write([]byte(content))
		})
	}
	base := layer(func(tw *tar.Writer) {
		var rootfs bytes.Buffer
		if err := testimage.BusyboxTar(&rootfs); err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(&rootfs)
		for {
			h, err := tr.Next()
			if err != nil {
				return
			}
			tw.WriteHeader(h)
			io.Copy(tw, tr)
		}
	})
	top, other := file("top\n"), file("other\n")
	img, err := mutate.AppendLayers(empty.Image, base, top, other, top)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	c.ok("load", dir, "twice:1")
	if out := c.ok("run", "--rm", "twice:1", "--", "cat", "/x"); out != "top\n" {
		t.Errorf("/x in an image listing a layer twice: %q, want the top layer's", out)
	}

	setup := filepath.Join(t.TempDir(), "setup.sh")
	if err := os.WriteFile(setup, []byte("echo a > /etc/a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var first, second struct{ Image string }
	if err := json.Unmarshal([]byte(c.ok("build", "-q", "--build-network", "none", "--setup", setup, "--format", "json")), &first); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(setup, []byte("echo b > /etc/b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(c.ok("build", "-q", "--build-network", "none", "--base", first.Image, "--setup", setup, "--format", "json")), &second); err != nil {
		t.Fatal(err)
	}
	layers := func(ref string) int {
		var list []struct {
			Digest string
			Layers []json.RawMessage
		}
		if err := json.Unmarshal([]byte(c.ok("images", "--format", "json")), &list); err != nil {
			t.Fatal(err)
		}
		for _, img := range list {
			if img.Digest == ref {
				return len(img.Layers)
			}
		}
		t.Fatalf("images: no %s", ref)
		return 0
	}
	// busybox, changes, executor; then busybox, changes, changes, executor.
	if n1, n2 := layers(first.Image), layers(second.Image); n1 != 3 || n2 != 4 {
		t.Errorf("layers: %d on busybox, %d built on that: want 3 and 4 (one executor layer)", n1, n2)
	}
	if out := c.ok("run", "--rm", second.Image, "--", "cat", "/etc/a", "/etc/b"); out != "a\nb\n" {
		t.Errorf("run on the image built on a runtime image: %q", out)
	}
}
