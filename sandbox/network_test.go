package sandbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/api"
	"github.com/bothy-sandbox/bothy/network"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// Sandboxes on attached networks (bridge, pasta, slirp4netns), end to end:
// the network is attached between the container's start and the
// executor's, recorded in the sandbox's state, and detached at removal.
// Traffic stays on this machine: the servers the sandboxes reach are the
// test's, in a network namespace it makes (root: the bridge's NAT takes
// the sandbox's packets there through the host's routing) or on the host's
// own address off its loopback (rootless: the helper connects from the
// host's sockets, and the host's loopback stays out of the sandbox's
// reach).

// netEnv is a test's network: a manager whose attached networks use an
// instance of the test's own (root: a bridge, a subnet and nftables tables
// nothing else uses), a port range of its own, and where the servers
// outside that its sandboxes reach run.
type netEnv struct {
	t        *testing.T
	m        *sandbox.Manager
	cfg      network.Config
	upstream *upstream // root
	hostIP   netip.Addr
}

// testPorts is where the tests' published ports are allocated: apart from
// bothy's defaults and from package network's tests, and root's apart from
// the unprivileged user's (the halves of make test run at once, and root's
// published ports are nftables rules an unprivileged allocator cannot see).
var testPorts = func() network.PortRange {
	if os.Geteuid() == 0 {
		return network.PortRange{First: 34000, Last: 34499}
	}
	return network.PortRange{First: 34500, Last: 34999}
}()

func newNetEnv(t *testing.T) *netEnv {
	t.Helper()
	requireTools(t, "slirp4netns", "pasta", "nsenter")
	e := &netEnv{t: t, cfg: network.Config{PortRange: testPorts}}
	if os.Geteuid() == 0 {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		e.cfg.Instance = "s" + hex.EncodeToString(b[:2])
		e.cfg.Subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 196, b[2], 0}), 24)
		e.cfg.NetworkPool = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 195, b[2] &^ 1, 0}), 23)
		e.upstream = newUpstream(t, e.cfg.Instance+"up", b[2])
		e.cfg.DNS = []netip.Addr{e.upstream.addr}
	} else {
		e.hostIP = hostAddress(t)
		if f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
			t.Fatalf("/dev/net/tun is not usable by uid %d (%v): rootless networking needs it mode 0666 (make setup does it)", os.Geteuid(), err)
		} else {
			f.Close()
		}
	}
	e.m = newManagerWith(t, sandbox.Options{Network: e.cfg})
	t.Cleanup(func() { e.assertNothingLeft() })
	return e
}

// server starts an HTTP server outside the sandboxes that answers body,
// and returns its address as the sandboxes reach it.
func (e *netEnv) server(body string) netip.AddrPort {
	e.t.Helper()
	if e.upstream != nil {
		return e.upstream.serve(body)
	}
	return hostServer(e.t, e.hostIP, body)
}

// create creates a sandbox on the network opts asks for.
func (e *netEnv) create(opts sandbox.CreateOptions) *sandbox.Sandbox {
	e.t.Helper()
	if opts.Image == "" {
		opts.Image = "busybox"
	}
	sb, err := e.m.Create(context.Background(), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return sb
}

// httpdCmd serves body on port 8000 in the sandbox (busybox httpd).
func httpdCmd(body string) []string {
	return []string{"sh", "-c", "mkdir -p /www && echo " + body + " > /www/index.html && exec httpd -f -p 8000 -h /www"}
}

// fetchIn fetches url from inside sb (busybox wget, 5 s: its own -T
// crashes Debian 12's busybox-static).
func fetchIn(sb *sandbox.Sandbox, url string) (string, error) {
	res, err := sb.Client().Run(context.Background(), api.RunRequest{Argv: []string{"timeout", "5", "wget", "-q", "-O", "-", url}, Wait: true, Timeout: 10})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("wget %s: exit %d: %s", url, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return strings.TrimSpace(res.Stdout), nil
}

// fetchHost fetches url from the host, retrying for a few seconds while
// the sandbox's server starts.
func fetchHost(url string) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	var err error
	for range 50 {
		var resp *http.Response
		if resp, err = c.Get(url); err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == 200 {
				return strings.TrimSpace(string(body)), nil
			}
			err = fmt.Errorf("%s: %s %v", url, resp.Status, rerr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", err
}

func publishedURL(t *testing.T, sb *sandbox.Sandbox) string {
	t.Helper()
	ports := sb.Ports()
	if len(ports) != 1 || ports[0].ContainerPort != 8000 || ports[0].HostPort < testPorts.First || ports[0].HostPort > testPorts.Last || ports[0].HostIP != network.DefaultHostIP {
		t.Fatalf("published ports: %v", ports)
	}
	return fmt.Sprintf("http://%s/", netip.AddrPortFrom(ports[0].HostIP, ports[0].HostPort))
}

// TestNetworkAttached: on bridge (root: the bridge driver; rootless: the
// default helper, slirp4netns), pasta and slirp4netns, a sandbox fetches
// from a server outside, answers on its published port from the host's
// loopback, has the attachment's address and nameservers, and cannot
// change its network from inside; a sandbox on none reaches nothing; after
// rm nothing of the network is left.
func TestNetworkAttached(t *testing.T) {
	e := newNetEnv(t)
	srv := e.server("outside")
	url := fmt.Sprintf("http://%s/", srv)
	none := e.create(sandbox.CreateOptions{})
	if out, err := fetchIn(none, url); err == nil {
		t.Errorf("a sandbox on none fetched %q", out)
	}
	if info, err := none.Client().Info(context.Background()); err != nil || info.Network != nil {
		t.Errorf("info on none: network %+v, %v; want none", info.Network, err)
	}
	for _, mode := range []string{"bridge", "pasta", "slirp4netns"} {
		t.Run(mode, func(t *testing.T) {
			sb := e.create(sandbox.CreateOptions{Network: network.Options{Mode: mode, Publish: []string{"8000"}}, Cmd: httpdCmd("inside-" + mode)})
			in, err := e.m.Inspect(context.Background(), sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			a := in.NetworkAttachment
			wantDriver := network.Driver(mode)
			if mode == "bridge" && os.Geteuid() != 0 {
				wantDriver = network.DriverSlirp4netns
			}
			if a == nil || a.Driver != wantDriver || in.Network != mode || in.NetworkError != "" || in.Status != sandbox.StatusRunning {
				t.Fatalf("inspect: network %q, attachment %+v, error %q", in.Network, a, in.NetworkError)
			}
			if out, err := fetchIn(sb, url); err != nil || out != "outside" {
				t.Errorf("fetch from %s: %q %v", url, out, err)
			}
			if out, err := fetchHost(publishedURL(t, sb)); err != nil || out != "inside-"+mode {
				t.Errorf("published port: %q %v", out, err)
			}
			// The executor reports the network and its published port,
			// from the file the host wrote read-only before it started.
			si, err := sb.Client().ServerInfo(context.Background())
			if err != nil || si.Network == nil || si.Network.Mode != mode || si.Network.Driver != string(wantDriver) ||
				len(si.Network.Ports) != 1 || si.Network.Ports[0].HostPort != int(a.Ports[0].HostPort) || si.Network.Ports[0].ContainerPort != 8000 ||
				si.Network.Address != a.Address.String() {
				t.Errorf("server_info network %+v (%v), want %s on %s with %v", si.Network, err, mode, wantDriver, a.Ports)
			}
			if res, err := sb.Client().Run(context.Background(), api.RunRequest{Cmd: "echo x > " + api.NetworkInfoPath, Wait: true, Timeout: 10}); err != nil || res.ExitCode == 0 {
				t.Errorf("the network's description written from inside: %v %+v", err, res)
			}
			if got := run(t, sb, "cat /etc/resolv.conf"); got != strings.TrimSpace(a.ResolvConf()) || got == "" {
				t.Errorf("resolv.conf %q, want %q", got, a.ResolvConf())
			}
			if got := run(t, sb, "ip -4 -o addr show dev eth0 | awk '{print $4}'"); got != a.Address.String() {
				t.Errorf("eth0's address %q, want %s", got, a.Address)
			}
			// Root in the sandbox has no CAP_NET_ADMIN over its
			// namespace: its address, route and rules stay as made.
			for _, cmd := range []string{"ip route del default", "ip link set eth0 down", "ip addr flush dev eth0"} {
				res, err := sb.Client().Run(context.Background(), api.RunRequest{Cmd: cmd, Wait: true, Timeout: 10})
				if err != nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "not permitted") {
					t.Errorf("%s inside: %v %+v, want it refused", cmd, err, res)
				}
			}
			if out, err := fetchIn(sb, url); err != nil || out != "outside" {
				t.Errorf("fetch after the attempts: %q %v", out, err)
			}
			if err := e.m.Remove(context.Background(), sb.ID, true); err != nil {
				t.Fatal(err)
			}
			e.assertDetached(a)
		})
	}
}

// TestNetworkEgress: --egress deny blocks outbound traffic while the
// published port answers; an allow-list admits its server and blocks
// another. The policy is the host's (root) or the namespace's (a helper:
// and then CAP_NET_RAW is dropped, so that no raw frame goes around it).
func TestNetworkEgress(t *testing.T) {
	e := newNetEnv(t)
	allowed, other := e.server("allowed"), e.server("other")
	deny := e.create(sandbox.CreateOptions{Network: network.Options{Mode: "bridge", Publish: []string{"8000"}, Egress: "deny"}, Cmd: httpdCmd("denied-inside")})
	if out, err := fetchIn(deny, fmt.Sprintf("http://%s/", allowed)); err == nil {
		t.Errorf("deny: fetched %q", out)
	}
	if out, err := fetchHost(publishedURL(t, deny)); err != nil || out != "denied-inside" {
		t.Errorf("deny: published port: %q %v", out, err)
	}
	in, err := e.m.Inspect(context.Background(), deny.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !in.NetworkAttachment.Egress.Deny {
		t.Errorf("deny not recorded: %+v", in.NetworkAttachment.Egress)
	}
	capRaw := run(t, deny, "grep CapEff /proc/self/status")
	if raw := capEff(t, capRaw)&(1<<13) != 0; raw == (os.Geteuid() != 0) {
		t.Errorf("deny: CAP_NET_RAW in the sandbox: %v (%s)", raw, capRaw)
	}

	list := e.create(sandbox.CreateOptions{Network: network.Options{Mode: "bridge", EgressAllow: []string{allowed.String()}}})
	if out, err := fetchIn(list, fmt.Sprintf("http://%s/", allowed)); err != nil || out != "allowed" {
		t.Errorf("allow-list: the allowed server: %q %v", out, err)
	}
	if out, err := fetchIn(list, fmt.Sprintf("http://%s/", other)); err == nil {
		t.Errorf("allow-list: the other server: %q", out)
	}
	// A policy a raw socket would bypass cannot be asked for with one.
	if os.Geteuid() != 0 {
		_, err := e.m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Network: network.Options{Mode: "bridge", Egress: "deny"},
			Security: sandbox.Security{CapAdd: []string{"NET_RAW"}}})
		if err == nil || !strings.Contains(err.Error(), "--cap-add NET_RAW: the egress policy of a sandbox on bridge is enforced in its network namespace") {
			t.Errorf("deny with --cap-add NET_RAW: %v", err)
		}
	}
}

// capEff parses /proc/self/status's CapEff line.
func capEff(t *testing.T, line string) uint64 {
	t.Helper()
	var v uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "CapEff:")), "%x", &v); err != nil {
		t.Fatalf("CapEff %q: %v", line, err)
	}
	return v
}

// TestNetworkAttachFails: an attach that fails (an explicit host port
// something on the host holds) fails the creation with its reason and
// leaves nothing: no sandbox, no lease, no helper, no veth.
func TestNetworkAttachFails(t *testing.T) {
	e := newNetEnv(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = e.m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox",
		Network: network.Options{Mode: "bridge", Publish: []string{fmt.Sprintf("%d:8000", port)}}})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("host port %d/tcp is in use on the host", port)) {
		t.Fatalf("publishing a port in use: %v", err)
	}
	if list, _ := e.m.List(context.Background()); len(list) != 0 {
		t.Errorf("sandboxes left: %d", len(list))
	}
}

// TestNetworkHelperGone: a sandbox whose helper died has no network, and
// inspect says so (never a hang), while its port published through the
// builtin driver, which the helper's watcher forwards (one process for
// both), still answers; rm removes what is left.
func TestNetworkHelperGone(t *testing.T) {
	e := newNetEnv(t)
	sb := e.create(sandbox.CreateOptions{Network: network.Options{Mode: "slirp4netns", Publish: []string{"8000"}}, Cmd: httpdCmd("gone")})
	a := sb.NetworkAttachment
	if a == nil || a.Helper == nil || !a.Helper.Process.Alive() {
		t.Fatalf("attachment: %+v", a)
	}
	if a.Forwarder == nil || a.Forwarder.Process != a.Helper.Watcher {
		t.Errorf("the port forwarder %+v is not the helper's watcher %+v", a.Forwarder, a.Helper.Watcher)
	}
	// The helper bothy started for this sandbox, by pid and start time.
	fd, err := unix.PidfdOpen(a.Helper.Process.Pid, 0)
	if err != nil || !a.Helper.Process.Alive() {
		t.Fatalf("helper: %v", err)
	}
	err = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var in *sandbox.Sandbox
	for time.Now().Before(deadline) {
		if in, err = e.m.Inspect(context.Background(), sb.ID); err != nil {
			t.Fatal(err)
		}
		if in.NetworkError != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(in.NetworkError, "network helper exited: slirp4netns") {
		t.Errorf("inspect after the helper died: %q", in.NetworkError)
	}
	if out, err := fetchHost(publishedURL(t, sb)); err != nil || out != "gone" {
		t.Errorf("the published port after the helper died: %q %v", out, err)
	}
	if err := e.m.Remove(context.Background(), sb.ID, true); err != nil {
		t.Fatal(err)
	}
	e.assertDetached(a)
}

// TestNetworkNamed: as root, sandboxes on bridge:NAME reach each other,
// and one on the default bridge reaches neither; rootless, named networks
// are refused, saying why.
func TestNetworkNamed(t *testing.T) {
	e := newNetEnv(t)
	if os.Geteuid() != 0 {
		_, err := e.m.Create(context.Background(), sandbox.CreateOptions{Image: "busybox", Network: network.Options{Mode: "bridge:seg"}})
		if err == nil || !strings.Contains(err.Error(), "named networks need the bridge driver (root)") {
			t.Errorf("bridge:seg rootless: %v", err)
		}
		return
	}
	a := e.create(sandbox.CreateOptions{Network: network.Options{Mode: "bridge:seg"}, Cmd: httpdCmd("on-seg")})
	b := e.create(sandbox.CreateOptions{Network: network.Options{Mode: "bridge:seg"}})
	c := e.create(sandbox.CreateOptions{Network: network.Options{Mode: "bridge"}})
	url := fmt.Sprintf("http://%s:8000/", a.NetworkAttachment.Address.Addr())
	var out string
	var err error
	for range 50 { // while httpd starts
		if out, err = fetchIn(b, url); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || out != "on-seg" {
		t.Errorf("a sandbox on the same named network: %q %v", out, err)
	}
	if out, err := fetchIn(c, url); err == nil {
		t.Errorf("a sandbox on the default network reached a named one: %q", out)
	}
	if a.Network != "bridge:seg" || a.NetworkAttachment.Network != "seg" || a.NetworkAttachment.Bridge == c.NetworkAttachment.Bridge {
		t.Errorf("networks: %q %+v, default bridge %s", a.Network, a.NetworkAttachment, c.NetworkAttachment.Bridge)
	}
}

// assertDetached fails if anything of the attachment a is left on the
// host: its lease and helper directory, its helper and watcher, its veth,
// its host port.
func (e *netEnv) assertDetached(a *network.Attachment) {
	t := e.t
	t.Helper()
	dir := network.StateDir(e.m.Paths().State)
	for _, f := range []string{filepath.Join(dir, "leases", a.ID+".json"), filepath.Join(dir, "helpers", a.ID)} {
		if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left (%v)", f, err)
		}
	}
	if a.Helper != nil {
		for _, p := range []network.Process{a.Helper.Watcher, a.Helper.Process} {
			if p.Alive() {
				t.Errorf("%s's process %d left", a.Driver, p.Pid)
			}
		}
	}
	if a.Forwarder != nil && a.Forwarder.Process.Alive() {
		t.Errorf("port forwarder %d left", a.Forwarder.Process.Pid)
	}
	if a.HostVeth != "" {
		if _, err := netlink.LinkByName(a.HostVeth); err == nil {
			t.Errorf("veth %s left", a.HostVeth)
		}
	}
	for _, p := range a.Ports {
		if l, err := net.Listen("tcp4", netip.AddrPortFrom(p.HostIP, p.HostPort).String()); err != nil {
			t.Errorf("host port %s still bound: %v", p, err)
		} else {
			l.Close()
		}
	}
}

// assertNothingLeft fails, once the test's sandboxes are removed, on
// anything of its network instance left: leases, helper directories, and
// as root its bridges and nftables tables.
func (e *netEnv) assertNothingLeft() {
	t := e.t
	ctx := context.Background()
	list, _ := e.m.List(ctx)
	for _, sb := range list {
		_ = e.m.Remove(ctx, sb.ID, true)
	}
	dir := network.StateDir(e.m.Paths().State)
	for _, sub := range []string{"leases", "helpers"} {
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, x := range entries {
			t.Errorf("%s/%s left", sub, x.Name())
		}
	}
	if e.cfg.Instance == "" {
		return
	}
	links, _ := netlink.LinkList()
	for _, l := range links {
		if name := l.Attrs().Name; strings.HasPrefix(name, e.cfg.Instance) && name != e.upstream.hostEnd {
			t.Errorf("link %s left", name)
		}
		if strings.HasPrefix(l.Attrs().Alias, "bothy sandbox ") {
			for _, sb := range list {
				if l.Attrs().Alias == "bothy sandbox "+sb.ID {
					t.Errorf("veth %s of sandbox %s left", l.Attrs().Name, sb.ID)
				}
			}
		}
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, _ := c.ListTables()
	for _, tb := range tables {
		if tb.Name == e.cfg.Instance {
			t.Errorf("nftables table %s left (family %d)", tb.Name, tb.Family)
		}
	}
}

// upstream is a network namespace the test makes, joined to the host by a
// veth pair (hostEnd on the host, 10.194.N.1, and eth0 there, 10.194.N.2,
// its default route the host): "the outside" of a root sandbox, reached
// through the bridge's NAT and the host's routing.
type upstream struct {
	t       *testing.T
	holder  *exec.Cmd
	hostEnd string
	host    netip.Addr
	addr    netip.Addr
	ports   int
}

func newUpstream(t *testing.T, hostEnd string, n byte) *upstream {
	t.Helper()
	requireTools(t, "ip", "unshare", "busybox")
	u := &upstream{t: t, hostEnd: hostEnd,
		host: netip.AddrFrom4([4]byte{10, 194, n, 1}), addr: netip.AddrFrom4([4]byte{10, 194, n, 2})}
	u.holder = exec.Command("unshare", "--net", "sleep", "infinity")
	if err := u.holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = u.holder.Process.Kill()
		_ = u.holder.Wait()
		if l, err := netlink.LinkByName(hostEnd); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	ns := fmt.Sprintf("/proc/%d/ns/net", u.holder.Process.Pid)
	// unshare has made the namespace once it has executed sleep.
	for range 100 {
		if self, _ := os.Readlink("/proc/self/ns/net"); func() bool { l, _ := os.Readlink(ns); return l != "" && l != self }() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"ip", "link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "addr", "add", u.host.String() + "/24", "dev", hostEnd},
		{"ip", "link", "set", hostEnd, "up"},
		{"nsenter", "--net=" + ns, "ip", "addr", "add", u.addr.String() + "/24", "dev", "eth0"},
		{"nsenter", "--net=" + ns, "ip", "link", "set", "eth0", "up"},
		{"nsenter", "--net=" + ns, "ip", "link", "set", "lo", "up"},
		{"nsenter", "--net=" + ns, "ip", "route", "add", "default", "via", u.host.String()},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	// Replies from the upstream are forwarded to the sandboxes: forwarding
	// on the test's own link (bothy turns it on for its bridges).
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+hostEnd+"/forwarding", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	return u
}

// serve starts busybox httpd in the upstream namespace answering body, on
// a port of its own.
func (u *upstream) serve(body string) netip.AddrPort {
	u.t.Helper()
	u.ports++
	dir := u.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(body+"\n"), 0o644); err != nil {
		u.t.Fatal(err)
	}
	addr := netip.AddrPortFrom(u.addr, uint16(8000+u.ports))
	cmd := exec.Command("nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", u.holder.Process.Pid), "busybox", "httpd", "-f", "-p", addr.String(), "-h", dir)
	if err := cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	u.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return addr
}

// hostServer serves body over HTTP on ip (an address of the host), on a
// free port.
func hostServer(t *testing.T, ip netip.Addr, body string) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp4", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, body) })}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).AddrPort()
}

// hostAddress is an IPv4 address of this host off its loopback: a
// rootless sandbox reaches the host's services there, through its helper.
func hostAddress(t *testing.T) netip.Addr {
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
	t.Fatal("this host has no IPv4 address off its loopback, which the rootless outbound tests reach")
	return netip.Addr{}
}

// requireTools fails, naming them, when tools the test runs are missing.
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("missing %v: make setup installs them (Debian packages passt, slirp4netns, util-linux, iproute2, busybox-static)", missing)
	}
}
