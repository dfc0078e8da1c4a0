package main

import (
	"bufio"
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
