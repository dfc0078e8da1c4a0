package network

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The test binary doubles as the programs its tests run in network
// namespaces (BOTHY_NETTEST=MODE), and as the watcher and rule installer
// (ipc.Dispatch).
func TestMain(m *testing.M) {
	ipc.Dispatch()
	if mode := os.Getenv("BOTHY_NETTEST"); mode != "" {
		os.Exit(testMode(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func testMode(mode string, args []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case "hold":
		// A sandbox stand-in: in its own network namespace, lo up, alive
		// until its stdin closes (or it is killed). IPv6 is off in it, so
		// that it sends no frame of its own (router solicitations,
		// duplicate address detection) before a test's first connection:
		// a helper must not need one to reach it (TestHelperPublish).
		if lo, err := netlink.LinkByName("lo"); err == nil {
			_ = netlink.LinkSetUp(lo)
		}
		for _, k := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0); err != nil {
				return fail(err)
			}
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case "serve-http":
		l, err := net.Listen("tcp4", args[0])
		if err != nil {
			return fail(err)
		}
		fmt.Println("ready", l.Addr())
		return fail(http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello %s", r.RemoteAddr)
		})))
	case "fetch":
		body, err := fetch(args[0])
		if err != nil {
			return fail(err)
		}
		fmt.Print(body)
		return 0
	case "leader-exits":
		// A process whose leader thread exits (a zombie) while its
		// other threads still hold a listening socket, as a Go program's
		// leader can while the rest of it exits.
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return fail(err)
		}
		fmt.Println("ready", l.Addr())
		go func() { select {} }()
		runtime.LockOSThread()
		unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0)
		return 0
	case "udp-echo":
		c, err := net.ListenPacket("udp4", args[0])
		if err != nil {
			return fail(err)
		}
		fmt.Println("ready", c.LocalAddr())
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return fail(err)
			}
			_, _ = c.WriteTo(append([]byte("echo "), buf[:n]...), from)
		}
	case "udp-ask":
		reply, err := udpAsk(args[0], args[1])
		if err != nil {
			return fail(err)
		}
		fmt.Print(reply)
		return 0
	case "raw-udp":
		// A UDP datagram written as an Ethernet frame on a packet socket
		// (CAP_NET_RAW): what no output hook of the namespace sees.
		// Arguments: source, destination, destination MAC, and "reply" to
		// wait for an answer on the source port (40000).
		var c net.PacketConn
		if len(args) > 3 {
			var err error
			if c, err = net.ListenPacket("udp4", ":40000"); err != nil {
				return fail(err)
			}
			defer c.Close()
		}
		if err := rawUDP(netip.MustParseAddr(args[0]), netip.MustParseAddrPort(args[1]), args[2]); err != nil {
			return fail(err)
		}
		if c != nil {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 2048)
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return fail(err)
			}
			fmt.Print(string(buf[:n]))
		}
		return 0
	case "reserve":
		// A parallel process reserving ports in a shared state directory
		// for the test process (the leases' owner).
		var owner Process
		if err := json.Unmarshal([]byte(os.Getenv("BOTHY_NETTEST_OWNER")), &owner); err != nil {
			return fail(err)
		}
		s, err := openStore(args[0])
		if err != nil {
			return fail(err)
		}
		a := &Attachment{ID: args[1], StateDir: args[0], Owner: owner}
		p := Port{HostIP: DefaultHostIP, ContainerPort: 8000, Proto: "tcp"}
		if err := reserve(context.Background(), s, a, []Port{p}, testPortRange); err != nil {
			return fail(err)
		}
		fmt.Println(a.Ports[0].HostPort)
		return 0
	case "attach":
		// The CLI: attaches, prints what it would record, and waits to
		// be killed.
		var o AttachOptions
		if err := json.Unmarshal([]byte(os.Getenv("BOTHY_NETTEST_OPTIONS")), &o); err != nil {
			return fail(err)
		}
		a, err := Attach(context.Background(), o)
		if err != nil {
			return fail(err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(a)
		select {}
	case "prepare":
		// The CLI killed between Prepare and Attach.
		var o AttachOptions
		if err := json.Unmarshal([]byte(os.Getenv("BOTHY_NETTEST_OPTIONS")), &o); err != nil {
			return fail(err)
		}
		a, err := Prepare(context.Background(), o)
		if err != nil {
			return fail(err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(a)
		select {}
	}
	return fail(fmt.Errorf("unknown test mode %q", mode))
}

func fetch(url string) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), nil
}

func udpAsk(addr, msg string) (string, error) {
	c, err := net.Dial("udp4", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// testPortRange is where the tests allocate host ports: below the
// ephemeral range (an outgoing connection's source port never takes one
// that a test checks is free again) and apart from the default ranges the
// other packages' sandboxes use, one half for root and one for the
// unprivileged user, whose tests make test runs at the same time.
var testPortRange = func() PortRange {
	if os.Geteuid() == 0 {
		return PortRange{First: 18000, Last: 18499}
	}
	return PortRange{First: 18500, Last: 18999}
}()

// rootless reports whether the test runs unprivileged.
func rootless() bool { return os.Geteuid() != 0 }

// randHex returns n random hex digits.
func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// stateDir returns a fresh state directory; at the end of the test it
// must hold no lease and no helper directory.
func stateDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d + "/net"
}

// sandboxNS is a sandbox stand-in: a process in a network namespace of its
// own (and, rootless, a user namespace of its own mapping the caller to
// root, as bothy's sandboxes do).
type sandboxNS struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	Pid   int
}

// newSandboxNS starts a process in namespaces of its own (a network
// namespace; rootless, a user namespace too), which holds extra (from
// descriptor 3) as long as it lives.
func newSandboxNS(t testing.TB, extra ...*os.File) *sandboxNS {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "BOTHY_NETTEST=hold")
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if rootless() {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	cmd.ExtraFiles = extra
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a process in new namespaces: %v", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("namespace holder: %q %v", line, err)
	}
	s := &sandboxNS{t: t, cmd: cmd, stdin: stdin, Pid: cmd.Process.Pid}
	t.Cleanup(s.Stop)
	return s
}

// Stop ends the namespace's process (and so, unless something else holds
// it, the namespace).
func (s *sandboxNS) Stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// command returns cmd run in the namespace: nsenter joins its user
// namespace first when rootless (its owner may), as bothy's helpers do.
func (s *sandboxNS) command(env []string, args ...string) *exec.Cmd {
	ns := []string{fmt.Sprintf("--net=/proc/%d/ns/net", s.Pid)}
	if rootless() {
		ns = append([]string{fmt.Sprintf("--user=/proc/%d/ns/user", s.Pid), "--preserve-credentials"}, ns...)
	}
	cmd := exec.Command("nsenter", append(append(ns, "--"), args...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// run runs the test binary in mode inside the namespace and returns its
// output and error.
func (s *sandboxNS) run(mode string, args ...string) (string, error) {
	exe, _ := os.Executable()
	out, err := s.command([]string{"BOTHY_NETTEST=" + mode}, append([]string{exe}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %v in the sandbox: %v: %s", mode, args, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// serve starts the test binary's server mode inside the namespace; it ends
// with the test.
func (s *sandboxNS) serve(mode, addr string) {
	s.t.Helper()
	exe, _ := os.Executable()
	cmd := s.command([]string{"BOTHY_NETTEST=" + mode}, exe, addr)
	startServer(s.t, cmd)
}

// startServer starts a server command and waits for its "ready" line.
func startServer(t testing.TB, cmd *exec.Cmd) string {
	return startServerReady(t, cmd, "ready")
}

// startServerReady starts a server command and waits for a line that
// starts with ready, and returns the rest of it.
func startServerReady(t testing.TB, cmd *exec.Cmd, ready string) string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(out)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("server %v: %q %v", cmd.Args, line, err)
		}
		if strings.HasPrefix(line, ready) {
			go func() { _, _ = io.Copy(io.Discard, r) }()
			return strings.TrimSpace(strings.TrimPrefix(line, ready))
		}
	}
}

// hostServer serves HTTP on addr (HOST:0 for any port) in the test's own
// process and returns its address.
func hostServer(t testing.TB, addr string) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.RemoteAddr)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).AddrPort()
}

// hostAddress returns an IPv4 address of this host that is not on its
// loopback: a rootless sandbox reaches the host's services there (its
// helper connects from the host), not on the host's loopback.
func hostAddress(t testing.TB) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip.Unmap()
			}
		}
	}
	t.Fatal("this host has no IPv4 address off its loopback, which the outbound tests reach")
	return netip.Addr{}
}

// requireTools fails, naming them, when tools the test runs are missing.
func requireTools(t testing.TB, tools ...string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("missing %v: make setup installs them (Debian packages passt, slirp4netns, util-linux, nftables, iperf3)", missing)
	}
}

// requireTun fails with the operator requirement when /dev/net/tun cannot
// be opened: rootless helpers create their tap device with it.
func requireTun(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			t.Fatalf("/dev/net/tun is not usable by uid %d (%v): rootless networking needs it mode 0666, as most distributions ship it; `make setup` does chmod 0666 /dev/net/tun (docs/operator.md)", os.Geteuid(), err)
		}
		t.Fatalf("/dev/net/tun: %v", err)
	}
	f.Close()
}

// rawUDP sends "raw hello" from src to dst in an Ethernet frame to mac,
// out of eth0, through a packet socket.
func rawUDP(src netip.Addr, dst netip.AddrPort, mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return err
	}
	ifi, err := net.InterfaceByName("eth0")
	if err != nil {
		return err
	}
	payload := []byte("raw hello")
	udp := binary.BigEndian.AppendUint16(nil, 40000)
	udp = binary.BigEndian.AppendUint16(udp, dst.Port())
	udp = binary.BigEndian.AppendUint16(udp, uint16(8+len(payload)))
	udp = append(binary.BigEndian.AppendUint16(udp, 0), payload...) // no UDP checksum
	ip := []byte{0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	s4, d4 := src.As4(), dst.Addr().As4()
	ip = append(append(ip, s4[:]...), d4[:]...)
	var sum uint32
	for i := 0; i < len(ip); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	frame := append(append(append(append([]byte{}, hw...), ifi.HardwareAddr...), 0x08, 0x00), append(ip, udp...)...)
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	defer syscall.Close(fd)
	return syscall.Sendto(fd, frame, 0, &syscall.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6})
}
