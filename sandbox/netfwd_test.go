package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// The builtin port driver end to end: bothy's forwarder on the host, the
// executor connecting inside, the host splicing the two sockets.

// fwdServer is a Python server for the default image: on TCP 8000, GET
// /big answers 32 MiB of random bytes, GET /big.sum their SHA-256, POST
// the SHA-256 of its body, anything else "hello"; on UDP 9000 it echoes
// "echo " + the datagram.
const fwdServer = `
import hashlib, http.server, os, socket, threading
big = os.urandom(32 << 20)
bigsum = hashlib.sha256(big).hexdigest().encode()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self.answer({"/big": big, "/big.sum": bigsum}.get(self.path, b"hello"))
    def do_POST(self):
        n, h = int(self.headers["Content-Length"]), hashlib.sha256()
        while n:
            b = self.rfile.read(min(n, 1 << 20))
            if not b:
                break
            h.update(b)
            n -= len(b)
        self.answer(h.hexdigest().encode())
    def log_message(self, *a):
        pass
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 9000))
    while True:
        d, a = s.recvfrom(65535)
        s.sendto(b"echo " + d, a)
threading.Thread(target=udp, daemon=True).start()
http.server.ThreadingHTTPServer(("0.0.0.0", 8000), H).serve_forever()
`

func requireDefaultImage(t *testing.T) {
	t.Helper()
	if os.Getenv("BOTHY_DEFAULT_IMAGE") == "" {
		t.Fatal("requires the default image (python3): run through make test or make test-pkg, which build it and set BOTHY_DEFAULT_IMAGE")
	}
}

// fwdCreate starts fwdServer in a sandbox on opts' network.
func (e *netEnv) fwdCreate(opts network.Options) *sandbox.Sandbox {
	e.t.Helper()
	// No image: the default one (BOTHY_DEFAULT_IMAGE, imported on use).
	sb, err := e.m.Create(context.Background(), sandbox.CreateOptions{Network: opts, Cmd: []string{"python3", "-c", fwdServer}})
	if err != nil {
		e.t.Fatal(err)
	}
	return sb
}

// hostPort returns the host address of sb's published port proto/port.
func hostPort(t *testing.T, sb *sandbox.Sandbox, port uint16, proto string) string {
	t.Helper()
	for _, p := range sb.Ports() {
		if p.ContainerPort == port && p.Proto == proto {
			return netip.AddrPortFrom(p.HostIP, p.HostPort).String()
		}
	}
	t.Fatalf("%d/%s is not published: %v", port, proto, sb.Ports())
	return ""
}

// listenerOwner says whether process pid holds the TCP socket listening on
// the host's addr (its inode in /proc/net/tcp among pid's descriptors):
// who carries a published port.
func listenerOwner(t *testing.T, pid int, addr string) bool {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	a4 := ap.Addr().As4()
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", a4[3], a4[2], a4[1], a4[0], ap.Port())
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	inode := ""
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" { // LISTEN
			inode = f[9]
		}
	}
	if inode == "" {
		return false
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == "socket:["+inode+"]" {
			return true
		}
	}
	return false
}

// exerciseForwarded drives a published port: bytes both ways, a large
// transfer each way checksummed, and many connections at once.
func exerciseForwarded(t *testing.T, addr string) {
	t.Helper()
	base := "http://" + addr
	if out, err := fetchHost(base + "/"); err != nil || out != "hello" {
		t.Fatalf("published port %s: %q %v", addr, out, err)
	}
	c := &http.Client{Timeout: 60 * time.Second}
	get := func(path string) ([]byte, error) {
		resp, err := c.Get(base + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	// Sandbox → host, 32 MiB.
	big, err := get("/big")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := get("/big.sum")
	if got := sha256.Sum256(big); err != nil || len(big) != 32<<20 || hex.EncodeToString(got[:]) != string(sum) {
		t.Errorf("GET /big: %d bytes, sha256 %x, the server's %q (%v)", len(big), got, sum, err)
	}
	// Host → sandbox, 24 MiB.
	body := make([]byte, 24<<20)
	_, _ = rand.Read(body)
	resp, err := c.Post(base+"/up", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := sha256.Sum256(body); err != nil || string(got) != hex.EncodeToString(want[:]) {
		t.Errorf("POST 24 MiB: the server's sha256 %q (%v), want %x", got, err, want)
	}
	// 64 connections at once, each its own (no keep-alive).
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			tr := &http.Transport{DisableKeepAlives: true}
			defer tr.CloseIdleConnections()
			cc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
			resp, err := cc.Post(base+"/p", "text/plain", strings.NewReader("conn "+strconv.Itoa(i)))
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := sha256.Sum256([]byte("conn " + strconv.Itoa(i)))
			if err != nil || string(b) != hex.EncodeToString(want[:]) {
				errs <- fmt.Errorf("connection %d: %q %v", i, b, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("parallel: %v", err)
	}
}

// TestNetworkForwarder: TCP ports published through the builtin port
// driver, the default rootless (bridge: slirp4netns; pasta) and on none,
// and asked for as root on the bridge: the forwarder process, not the
// stack, holds the host port; bytes go both ways, 32 MiB and 24 MiB
// arrive intact, 64 connections at once all answer; the executor
// reports the port; rm leaves no forwarder, lease or bound port.
func TestNetworkForwarder(t *testing.T) {
	requireDefaultImage(t)
	e := newNetEnv(t)
	cases := []struct {
		name string
		opts network.Options
	}{
		{"none", network.Options{Mode: "none", Publish: []string{"8000"}}},
		{"bridge", network.Options{Mode: "bridge", Publish: []string{"8000"}, PortDriver: "builtin"}},
		{"pasta", network.Options{Mode: "pasta", Publish: []string{"8000"}}},
	}
	if os.Geteuid() != 0 {
		// The default rootless: no --port-driver.
		cases[1].opts.PortDriver = ""
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := e.fwdCreate(c.opts)
			a := sb.NetworkAttachment
			if a == nil || a.PortDriver != network.PortDriverBuiltin || a.Forwarder == nil || !a.Forwarder.Process.Alive() {
				t.Fatalf("attachment: %+v", a)
			}
			addr := hostPort(t, sb, 8000, "tcp")
			if !listenerOwner(t, a.Forwarder.Process.Pid, addr) {
				t.Errorf("the forwarder (pid %d) does not hold %s", a.Forwarder.Process.Pid, addr)
			}
			if a.Helper != nil && listenerOwner(t, a.Helper.Process.Pid, addr) {
				t.Errorf("%s holds %s too", a.Driver, addr)
			}
			exerciseForwarded(t, addr)
			if c.name == "none" {
				// Still no way out: loopback only.
				if got := run(t, sb, "ls /sys/class/net"); got != "lo" {
					t.Errorf("interfaces on none with a published port: %q", got)
				}
			}
			si, err := sb.Client().ServerInfo(context.Background())
			if err != nil || si.Network == nil || len(si.Network.Ports) != 1 || si.Network.Ports[0].ContainerPort != 8000 {
				t.Errorf("server_info network: %+v %v", si.Network, err)
			}
			in, err := e.m.Inspect(context.Background(), sb.ID)
			if err != nil || in.NetworkError != "" {
				t.Errorf("inspect: %q %v", in.NetworkError, err)
			}
			if err := e.m.Remove(context.Background(), sb.ID, true); err != nil {
				t.Fatal(err)
			}
			e.assertDetached(a)
		})
	}
}

// TestNetworkForwarderUDP: with a UDP port beside a TCP one, the TCP port
// goes through the forwarder and the UDP port through the network driver
// (root: DNAT; rootless: pasta, chosen for UDP), and both answer.
func TestNetworkForwarderUDP(t *testing.T) {
	requireDefaultImage(t)
	e := newNetEnv(t)
	sb := e.fwdCreate(network.Options{Mode: "bridge", Publish: []string{"8000", "9000/udp"}, PortDriver: "builtin"})
	a := sb.NetworkAttachment
	if a == nil || a.Forwarder == nil || a.PortDriver != network.PortDriverBuiltin {
		t.Fatalf("attachment: %+v", a)
	}
	tcpAddr, udpAddr := hostPort(t, sb, 8000, "tcp"), hostPort(t, sb, 9000, "udp")
	if out, err := fetchHost("http://" + tcpAddr + "/"); err != nil || out != "hello" {
		t.Errorf("TCP through the forwarder: %q %v", out, err)
	}
	conn, err := net.Dial("udp4", udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 100)
	var got string
	for range 50 {
		_, _ = conn.Write([]byte("ping"))
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := conn.Read(buf); err == nil {
			got = string(buf[:n])
			break
		}
	}
	if got != "echo ping" {
		t.Errorf("UDP through %s: %q", a.Driver, got)
	}
	if err := e.m.Remove(context.Background(), sb.ID, true); err != nil {
		t.Fatal(err)
	}
	e.assertDetached(a)
}

// TestNetworkForwarderGone: a killed forwarder is reported by inspect (its
// published ports answer no more); a sandbox whose processes are killed
// takes its forwarder with it, and prune removes its lease.
func TestNetworkForwarderGone(t *testing.T) {
	e := newNetEnv(t)
	sb := e.create(sandbox.CreateOptions{Network: network.Options{Mode: "none", Publish: []string{"8000"}}, Cmd: httpdCmd("fwd")})
	a := sb.NetworkAttachment
	if a == nil || a.Forwarder == nil {
		t.Fatalf("attachment: %+v", a)
	}
	if out, err := fetchHost(publishedURL(t, sb)); err != nil || out != "fwd" {
		t.Fatalf("published port: %q %v", out, err)
	}
	killProcess(t, a.Forwarder.Process)
	in := waitNetworkError(t, e.m, sb.ID)
	if !strings.Contains(in.NetworkError, "port forwarder exited") {
		t.Errorf("inspect after the forwarder died: %q", in.NetworkError)
	}
	if err := e.m.Remove(context.Background(), sb.ID, true); err != nil {
		t.Fatal(err)
	}
	e.assertDetached(a)

	// The sandbox dies (its PID 1 killed): the forwarder ends on its own,
	// and prune takes the lease.
	sb = e.create(sandbox.CreateOptions{Network: network.Options{Mode: "none", Publish: []string{"8000"}}, Cmd: httpdCmd("fwd")})
	a = sb.NetworkAttachment
	if a == nil || a.Forwarder == nil {
		t.Fatalf("attachment: %+v", a)
	}
	killProcess(t, network.Process{Pid: sb.Pid, Start: sb.PidStart})
	deadline := time.Now().Add(10 * time.Second)
	for a.Forwarder.Process.Alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if a.Forwarder.Process.Alive() {
		t.Errorf("the forwarder %d outlived its sandbox", a.Forwarder.Process.Pid)
	}
	if _, err := e.m.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.assertDetached(a)
}

// killProcess sends SIGKILL to p through a pidfd opened and checked
// against its start time.
func killProcess(t *testing.T, p network.Process) {
	t.Helper()
	fd, err := unix.PidfdOpen(p.Pid, 0)
	if err != nil || !p.Alive() {
		t.Fatalf("process %d: %v", p.Pid, err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
}

// waitNetworkError inspects sandbox id until it reports a network error
// (10 s at most).
func waitNetworkError(t *testing.T, m *sandbox.Manager, id string) *sandbox.Sandbox {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := m.Inspect(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if in.NetworkError != "" || time.Now().After(deadline) {
			return in
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNetworkForwarderPool: a pool's sandbox published on none through the
// forwarder answers on its port once claimed, with the key the claim gave
// it (the forwarder reads it again), and its forwarder goes with it.
func TestNetworkForwarderPool(t *testing.T) {
	e := newNetEnv(t)
	ctx := context.Background()
	if _, err := e.m.CreatePool(ctx, "fwd", 1, sandbox.CreateOptions{Image: "busybox", Network: network.Options{Publish: []string{"8000"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.m.RemovePool(context.Background(), "fwd") })
	if err := e.m.Fill(ctx, "fwd", nil); err != nil {
		t.Fatal(err)
	}
	sb, how, err := e.m.Claim(ctx, sandbox.ClaimOptions{Pool: "fwd", APIKey: "claimed-key"})
	if err != nil || how.Cold {
		t.Fatalf("claim: %v %+v", err, how)
	}
	a := sb.NetworkAttachment
	if a == nil || a.Forwarder == nil {
		t.Fatalf("attachment: %+v", a)
	}
	if _, err := sb.Client().Start(ctx, api.RunRequest{Cmd: "mkdir -p /www && echo pooled > /www/index.html && exec httpd -f -p 8000 -h /www"}); err != nil {
		t.Fatal(err)
	}
	if out, err := fetchHost(publishedURL(t, sb)); err != nil || out != "pooled" {
		t.Errorf("published port of a claimed sandbox: %q %v", out, err)
	}
	if err := e.m.Remove(ctx, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	e.assertDetached(a)
}
