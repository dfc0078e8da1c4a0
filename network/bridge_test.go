package network

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// bridgeEnv is one test's bridge setting: an instance of its own (bridges
// tNNNN0…, nftables tables tNNNN), a /24 of its own, and an upstream: a
// network namespace the test creates, joined to the host by a veth pair
// the test creates, with servers a sandbox reaches through NAT.
type bridgeEnv struct {
	t        testing.TB
	dir      string
	instance string
	subnet   netip.Prefix
	pool     netip.Prefix
	upstream *sandboxNS
	upHost   netip.Addr // the host's end of the upstream link
	upAddr   netip.Addr // the upstream's address
}

func newBridgeEnv(t testing.TB) *bridgeEnv {
	t.Helper()
	if rootless() {
		t.Fatal("newBridgeEnv as an unprivileged user")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	e := &bridgeEnv{
		t:        t,
		dir:      stateDir(t),
		instance: "t" + randHex(4),
		subnet:   netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 199, b[0], 0}), 24),
		pool:     netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 198, b[1] &^ 1, 0}), 23),
		upHost:   netip.AddrFrom4([4]byte{10, 197, b[2], 1}),
		upAddr:   netip.AddrFrom4([4]byte{10, 197, b[2], 2}),
	}
	// What a failed test left attached is reclaimed: veths, rules, the
	// bridge and the tables. Its sandboxes' own cleanups, registered after
	// this one, have ended them by then.
	t.Cleanup(func() { _, _ = Reclaim(context.Background(), e.dir) })
	e.upstream = newSandboxNS(t)
	hostEnd := e.instance + "up"
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostEnd}, PeerName: "eth0", PeerNamespace: netlink.NsPid(e.upstream.Pid)}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("upstream veth: %v", err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(hostEnd); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	mustRun(t, exec.Command("ip", "addr", "add", e.upHost.String()+"/24", "dev", hostEnd))
	mustRun(t, exec.Command("ip", "link", "set", hostEnd, "up"))
	// Replies from the upstream are forwarded to the sandbox: forwarding
	// on this link of the test's (bothy turns it on for its bridges).
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+hostEnd+"/forwarding", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	mustRun(t, e.upstream.command(nil, "ip", "addr", "add", e.upAddr.String()+"/24", "dev", "eth0"))
	mustRun(t, e.upstream.command(nil, "ip", "link", "set", "eth0", "up"))
	mustRun(t, e.upstream.command(nil, "ip", "route", "add", "default", "via", e.upHost.String()))
	return e
}

func mustRun(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", cmd.Args, err, out)
	}
}

// options attaches sb (nil: no sandbox yet, for Prepare).
func (e *bridgeEnv) options(sb *sandboxNS) AttachOptions {
	o := AttachOptions{ID: "s" + randHex(8), Driver: DriverBridge, Instance: e.instance,
		StateDir: e.dir, Subnet: e.subnet, NetworkPool: e.pool, PortRange: testPortRange,
		DNS: []netip.Addr{e.upAddr}}
	if sb != nil {
		o.Pid = sb.Pid
	}
	return o
}

// assertClean fails if anything of the instance is left on the host: a
// bridge, a veth, an nftables table, a lease.
func (e *bridgeEnv) assertClean(ids ...string) {
	t := e.t
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		name := l.Attrs().Name
		if strings.HasPrefix(name, e.instance) && name != e.instance+"up" {
			t.Errorf("link %s left", name)
		}
		for _, id := range ids {
			if name == hostVeth(id) {
				t.Errorf("veth %s of %s left", name, id)
			}
		}
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == e.instance {
			t.Errorf("nftables table %s left (family %d)", tb.Name, tb.Family)
		}
	}
	assertNoLeases(t, e.dir)
}

// An unprivileged user gets a clear refusal for the bridge and for named
// networks, and the default driver is a helper; root's default is the
// bridge.
func TestBridgeDefaultOrRefused(t *testing.T) {
	if !rootless() {
		d, err := ChooseDriver(false, false)
		if err != nil || d != DriverBridge {
			t.Fatalf("root's default driver: %v %v", d, err)
		}
		return
	}
	assertBridgeRefused(t)
}

// rootOnly runs the rest of a bridge test as root; unprivileged, the test
// asserts the refusal instead.
func rootOnly(t *testing.T) bool {
	t.Helper()
	if rootless() {
		assertBridgeRefused(t)
		return false
	}
	return true
}

func assertBridgeRefused(t *testing.T) {
	t.Helper()
	sb := newSandboxNS(t)
	dir := stateDir(t)
	_, err := Attach(context.Background(), AttachOptions{ID: "x", Pid: sb.Pid, Driver: DriverBridge, StateDir: dir})
	if !errors.Is(err, ErrBridgeNeedsRoot) || !strings.Contains(err.Error(), "the bridge network needs root: creating the bothy0 bridge, veth pairs and nftables rules takes CAP_NET_ADMIN on the host") {
		t.Fatalf("bridge as uid %d: %v", os.Geteuid(), err)
	}
	_, err = Attach(context.Background(), AttachOptions{ID: "x", Pid: sb.Pid, Driver: DriverPasta, Network: "seg", StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), "named networks need the bridge driver (root)") {
		t.Fatalf("named network rootless: %v", err)
	}
	if d, err := ChooseDriver(true, false); err != nil || d != DriverSlirp4netns {
		t.Fatalf("rootless default driver: %v %v", d, err)
	}
	if d, err := ChooseDriver(true, true); err != nil || d != DriverPasta {
		t.Fatalf("rootless default driver with UDP ports: %v %v", d, err)
	}
	assertNoLeases(t, dir)
}

// A sandbox on the bridge reaches the upstream through NAT (the upstream
// sees the host's address), with its address, gateway and DNS; one left on
// "none" does not; after Detach nothing of it is left.
func TestBridgeOutbound(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	e.upstream.serve("serve-http", "0.0.0.0:80")
	sb := newSandboxNS(t)
	// Async, as the manager attaches: Working is called once, from Wait,
	// when the sandbox can reach out.
	o := e.options(sb)
	o.Async = true
	worked := 0
	o.Working = func() {
		worked++
		if out, err := sb.run("fetch", "http://"+e.upAddr.String()+"/"); err != nil {
			t.Errorf("Working called before the network works: %q %v", out, err)
		}
	}
	a := attachT(t, o)
	if err := a.Wait(context.Background()); err != nil || worked != 1 {
		t.Fatalf("Wait: %v; Working called %d times, want once", err, worked)
	}
	if a.Bridge != e.instance+"0" || a.Gateway != e.subnet.Addr().Next() || a.Address.Bits() != 24 || !e.subnet.Contains(a.Address.Addr()) || a.ResolvConf() != "nameserver "+e.upAddr.String()+"\n" {
		t.Errorf("attachment: %+v", a)
	}
	out, err := sb.run("fetch", "http://"+e.upAddr.String()+"/")
	if err != nil || !strings.HasPrefix(out, "hello "+e.upHost.String()+":") {
		t.Fatalf("fetch from the upstream: %q %v (want it from the host's address %s: masqueraded)", out, err, e.upHost)
	}
	if err := Check(a); err != nil {
		t.Error(err)
	}
	none := newSandboxNS(t)
	if out, err := none.run("fetch", "http://"+e.upAddr.String()+"/"); err == nil {
		t.Errorf("a sandbox without network fetched %q", out)
	}
	if err := Detach(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := Check(a); err == nil {
		t.Error("Check after Detach: no error")
	}
	e.assertClean(a.ID)
}

// Sandboxes on the default network reach neither each other nor the
// host's own services; on a named network they reach each other and not
// the default network's; the host itself (another user's process, a
// rootless sandbox's helper) reaches a sandbox only through its published
// ports.
func TestBridgeIsolation(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	var sbs []*sandboxNS
	var as []*Attachment
	for i := range 4 {
		sb := newSandboxNS(t)
		sb.serve("serve-http", "0.0.0.0:8080")
		o := e.options(sb)
		if i >= 2 {
			o.Network = "seg"
		}
		if i == 0 {
			o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 8080, Proto: "tcp"}}
		}
		sbs, as = append(sbs, sb), append(as, attachT(t, o))
	}
	// On hosts without br_netfilter, the bridge's port isolation is what
	// keeps the default network's sandboxes apart (here, with
	// bridge-nf-call-iptables on, the forward chain does too).
	for i, a := range as {
		l, err := netlink.LinkByName(a.HostVeth)
		if err != nil {
			t.Fatal(err)
		}
		pi, err := netlink.LinkGetProtinfo(l)
		if err != nil {
			t.Fatal(err)
		}
		if pi.Isolated != (a.Network == "") {
			t.Errorf("sandbox %d on network %q: bridge port isolated=%v", i, a.Network, pi.Isolated)
		}
	}
	url := func(a *Attachment) string { return "http://" + a.Address.Addr().String() + ":8080/" }
	if as[2].Bridge == as[0].Bridge || as[2].Bridge != as[3].Bridge || !e.pool.Contains(as[2].Address.Addr()) {
		t.Fatalf("networks: %v %v %v", as[0].Bridge, as[2].Bridge, as[2].Address)
	}
	for _, c := range []struct {
		from, to int
		ok       bool
	}{{0, 1, false}, {1, 0, false}, {2, 3, true}, {3, 2, true}, {2, 0, false}, {0, 2, false}} {
		out, err := sbs[c.from].run("fetch", url(as[c.to]))
		if (err == nil) != c.ok {
			t.Errorf("sandbox %d (%s) → sandbox %d (%s): %q %v, want reachable=%v", c.from, as[c.from].Network, c.to, as[c.to].Network, out, err, c.ok)
		}
	}
	host := hostServer(t, "0.0.0.0:0")
	if out, err := sbs[0].run("fetch", fmt.Sprintf("http://%s:%d/", as[0].Gateway, host.Port())); err == nil {
		t.Errorf("a sandbox reached the host's own service on its gateway address: %q", out)
	}
	// The host: a process of another user, as a rootless sandbox's pasta
	// would connect.
	exe, _ := os.Executable()
	other := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", exe, url(as[0]))
	other.Env = append(os.Environ(), "BOTHY_NETTEST=fetch")
	if out, err := other.CombinedOutput(); err == nil {
		t.Errorf("a host process reached a sandbox's internal address: %s", out)
	}
	if out, err := fetch(url(as[0])); err == nil {
		t.Errorf("the host reached a sandbox's internal address: %s", out)
	}
	if out, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", as[0].Ports[0].HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("the published port: %q %v", out, err)
	}
	for _, a := range as {
		if err := Detach(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	e.assertClean()
}

// Published ports: on 127.0.0.1 by default, not on the host's other
// addresses; on every address when asked; UDP too.
func TestBridgePublish(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	sb := newSandboxNS(t)
	sb.serve("serve-http", "0.0.0.0:8080")
	sb.serve("udp-echo", "0.0.0.0:5353")
	o := e.options(sb)
	o.Publish = []Port{
		{HostIP: DefaultHostIP, ContainerPort: 8080, Proto: "tcp"},
		{HostIP: DefaultHostIP, ContainerPort: 5353, Proto: "udp"},
		{HostIP: netip.IPv4Unspecified(), ContainerPort: 8080, Proto: "tcp"},
	}
	a := attachT(t, o)
	tcp, udp, all := a.Ports[0], a.Ports[1], a.Ports[2]
	if out, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", tcp.HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("published TCP port: %q %v", out, err)
	}
	if out, err := udpAsk(fmt.Sprintf("127.0.0.1:%d", udp.HostPort), "ping"); err != nil || out != "echo ping" {
		t.Errorf("published UDP port: %q %v", out, err)
	}
	hostIP := hostAddress(t)
	if out, err := fetch(fmt.Sprintf("http://%s:%d/", hostIP, all.HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("port published on 0.0.0.0, through %s: %q %v", hostIP, out, err)
	}
	if out, err := fetch(fmt.Sprintf("http://%s:%d/", hostIP, tcp.HostPort)); err == nil {
		t.Errorf("port published on 127.0.0.1 answers on %s: %q", hostIP, out)
	}
	// From the upstream, as a remote client: only the 0.0.0.0 port.
	if out, err := e.upstream.run("fetch", fmt.Sprintf("http://%s:%d/", e.upHost, all.HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("0.0.0.0 port from another host: %q %v", out, err)
	}
	if out, err := e.upstream.run("fetch", fmt.Sprintf("http://%s:%d/", e.upHost, tcp.HostPort)); err == nil {
		t.Errorf("127.0.0.1 port from another host: %q", out)
	}
	if err := Detach(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", tcp.HostPort)); err == nil {
		t.Error("the port answers after Detach")
	}
	e.assertClean(a.ID)
}

// The egress policy on the host side: deny stops everything, DNS included,
// while published ports answer; an allow-list admits one server and not
// another; nothing done inside the sandbox's namespace, even with every
// capability there, changes that.
func TestBridgeEgress(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	requireTools(t, "nft")
	e := newBridgeEnv(t)
	e.upstream.serve("serve-http", "0.0.0.0:80")
	e.upstream.serve("serve-http", "0.0.0.0:81")
	e.upstream.serve("udp-echo", "0.0.0.0:53")
	up := e.upAddr.String()

	sb := newSandboxNS(t)
	sb.serve("serve-http", "0.0.0.0:8080")
	o := e.options(sb)
	o.Egress = Egress{Deny: true}
	o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 8080, Proto: "tcp"}}
	a := attachT(t, o)
	if out, err := sb.run("fetch", "http://"+up+"/"); err == nil {
		t.Errorf("deny: fetched %q", out)
	}
	if out, err := sb.run("udp-ask", up+":53", "query"); err == nil {
		t.Errorf("deny: DNS answered: %q", out)
	}
	if out, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", a.Ports[0].HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("deny: published port: %q %v", out, err)
	}
	// Root in the sandbox's namespace, every capability: its own ruleset
	// is not where the policy is.
	for _, args := range [][]string{{"nft", "flush", "ruleset"}, {"ip", "route", "replace", "default", "via", a.Gateway.String()}} {
		_ = sb.command(nil, args...).Run()
	}
	if out, err := sb.run("fetch", "http://"+up+"/"); err == nil {
		t.Errorf("deny, after the sandbox flushed its ruleset: fetched %q", out)
	}

	sb2 := newSandboxNS(t)
	o = e.options(sb2)
	pol, err := ParseEgress("", []string{up + ":80"})
	if err != nil {
		t.Fatal(err)
	}
	o.Egress = pol
	attachT(t, o)
	if out, err := sb2.run("fetch", "http://"+up+"/"); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("allow-list: the allowed server: %q %v", out, err)
	}
	if out, err := sb2.run("fetch", "http://"+up+":81/"); err == nil {
		t.Errorf("allow-list: another port: %q", out)
	}
	if out, err := sb2.run("udp-ask", up+":53", "query"); err == nil {
		t.Errorf("allow-list: DNS answered: %q", out)
	}

	sb3 := newSandboxNS(t)
	attachT(t, e.options(sb3))
	if out, err := sb3.run("udp-ask", up+":53", "query"); err != nil || out != "echo query" {
		t.Errorf("allow: DNS: %q %v", out, err)
	}
}

// A sandbox that claims another's address (to borrow a wider policy) gets
// nothing through: the bridge's rules keep each port to its address.
func TestBridgeAntiSpoof(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	e.upstream.serve("serve-http", "0.0.0.0:80")
	open := newSandboxNS(t)
	oa := attachT(t, e.options(open))
	sb := newSandboxNS(t)
	o := e.options(sb)
	o.Egress = Egress{Deny: true}
	a := attachT(t, o)
	// Root in its namespace moves to the allowed sandbox's address.
	mustRun(t, sb.command(nil, "ip", "addr", "flush", "dev", "eth0"))
	mustRun(t, sb.command(nil, "ip", "addr", "add", oa.Address.String(), "dev", "eth0"))
	mustRun(t, sb.command(nil, "ip", "route", "add", "default", "via", a.Gateway.String()))
	if out, err := sb.run("fetch", "http://"+e.upAddr.String()+"/"); err == nil {
		t.Errorf("with another sandbox's address: fetched %q", out)
	}
}

// Parallel attachments never share an address; Detach from the recorded
// attachment after the attaching process was killed leaves nothing; a
// lease whose sandbox is gone is reclaimed.
func TestBridgeParallelAndCleanup(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	const n = 8
	as := make([]*Attachment, n)
	errs := make([]error, n)
	sbs := make([]*sandboxNS, n)
	for i := range sbs {
		sbs[i] = newSandboxNS(t)
	}
	var wg sync.WaitGroup
	for i := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := e.options(sbs[i])
			o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 80, Proto: "tcp"}}
			as[i], errs[i] = Attach(context.Background(), o)
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for i, a := range as {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if seen[a.Address.Addr()] {
			t.Errorf("address %s given twice", a.Address.Addr())
		}
		seen[a.Address.Addr()] = true
	}
	// The attaching CLI is killed; another process detaches from what it
	// recorded.
	sb := newSandboxNS(t)
	killed := attachInChild(t, e.options(sb))
	if _, err := net.InterfaceByName(killed.HostVeth); err != nil {
		t.Fatalf("veth of the killed CLI's sandbox: %v", err)
	}
	if err := Detach(context.Background(), killed); err != nil {
		t.Fatal(err)
	}
	// Sandboxes that exit leave leases and rules, reclaimed by prune.
	for i := range n / 2 {
		sbs[i].Stop()
	}
	ids, err := Reclaim(context.Background(), e.dir)
	if err != nil || len(ids) != n/2 {
		t.Fatalf("Reclaim: %v %v", ids, err)
	}
	for _, a := range as[n/2:] {
		if err := Detach(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	for _, a := range append(as, killed) {
		all = append(all, a.ID)
	}
	e.assertClean(all...)
}

// The bridge's policy is on the host: a frame written on a packet socket
// by root in the sandbox's namespace (every capability) passes the same
// rules. The same frame from a sandbox that may reach the upstream gets
// its answer: the frame is well formed.
func TestBridgeEgressRawFrames(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	e.upstream.serve("udp-echo", "0.0.0.0:53")
	dst := netip.AddrPortFrom(e.upAddr, 53).String()
	for _, deny := range []bool{false, true} {
		sb := newSandboxNS(t)
		o := e.options(sb)
		o.Egress.Deny = deny
		a := attachT(t, o)
		br, err := net.InterfaceByName(a.Bridge)
		if err != nil {
			t.Fatal(err)
		}
		out, err := sb.run("raw-udp", a.Address.Addr().String(), dst, br.HardwareAddr.String(), "reply")
		if deny && err == nil {
			t.Errorf("deny: a raw frame got an answer: %q", out)
		}
		if !deny && (err != nil || out != "echo raw hello") {
			t.Errorf("allow: a raw frame: %q %v", out, err)
		}
	}
}

// A stopped sandbox's lease is reclaimed and its address and host port go
// to another sandbox; removing the first later (Detach from its record, as
// bothy rm does) leaves the second's policy and published port alone.
func TestBridgeStaleRecord(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	e.upstream.serve("serve-http", "0.0.0.0:80")
	port := testPortRange.Last - 7
	old := newSandboxNS(t)
	o := e.options(old)
	o.Egress = Egress{Deny: true}
	o.Publish = []Port{{HostIP: DefaultHostIP, HostPort: port, ContainerPort: 8080, Proto: "tcp"}}
	stale := attachT(t, o)
	old.Stop()

	sb := newSandboxNS(t)
	sb.serve("serve-http", "0.0.0.0:8080")
	o = e.options(sb)
	o.Egress = Egress{Deny: true}
	o.Publish = []Port{{HostIP: DefaultHostIP, HostPort: port, ContainerPort: 8080, Proto: "tcp"}}
	a := attachT(t, o) // reclaims the stale lease
	if a.Address != stale.Address || a.Ports[0].HostPort != port {
		t.Fatalf("the new sandbox did not get the old one's address and port: %v %v, %v", a.Address, a.Ports, stale.Address)
	}
	if err := Detach(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	if out, err := sb.run("fetch", "http://"+e.upAddr.String()+"/"); err == nil {
		t.Errorf("deny lifted by the stale sandbox's removal: fetched %q", out)
	}
	if out, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", port)); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("published port after the stale sandbox's removal: %q %v", out, err)
	}
	if err := Detach(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	e.assertClean(a.ID, stale.ID)
}

// verdictChain reads the chain of a verdict as google/nftables hands a
// map element's data over.
func TestVerdictChain(t *testing.T) {
	attr := func(typ uint16, payload []byte) []byte {
		b := binary.NativeEndian.AppendUint16(nil, uint16(4+len(payload)))
		b = binary.NativeEndian.AppendUint16(b, typ)
		b = append(b, payload...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	code := attr(1, binary.BigEndian.AppendUint32(nil, 0xfffffffd)) // NFT_JUMP
	for _, c := range []struct {
		data []byte
		want string
	}{
		{slices.Concat(code, attr(2, []byte("eg-abc\x00"))), "eg-abc"},
		{slices.Concat(code, attr(2, []byte("pub-x\x00"))[:10]), "pub-x"},
		{code, ""},
		{nil, ""},
		{[]byte{3, 0, 2, 0}, ""},
		{[]byte{200, 0, 2, 0, 'a'}, ""},
	} {
		if got := verdictChain(c.data); got != c.want {
			t.Errorf("verdictChain(%x) = %q, want %q", c.data, got, c.want)
		}
	}
}

// A bridge whose maker was killed between creating it and setting bothy's
// alias is bothy's by its lease (BridgeMade): while the maker's lease
// lives, the next sandbox on that network adopts it (the alias is set);
// once the maker is gone, reclaim removes it with the lease.
func TestBridgeMadeInterrupted(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	interrupted := func(owner Process) (*Attachment, string) {
		name := bridgeName(e.instance, "")
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
			t.Fatal(err)
		}
		a := &Attachment{ID: "s" + randHex(8), Driver: DriverBridge, StateDir: e.dir, Owner: owner, Instance: e.instance, Bridge: name, BridgeMade: true}
		s, err := openStore(e.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.writeLease(a); err != nil {
			t.Fatal(err)
		}
		return a, name
	}
	// The maker's lease lives (its owner runs): the bridge is adopted.
	self, err := identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	maker, name := interrupted(self)
	sb := newSandboxNS(t)
	a := attachT(t, e.options(sb))
	if l, err := netlink.LinkByName(name); err != nil || l.Attrs().Alias != bridgeAlias("") || a.Bridge != name {
		t.Fatalf("the interrupted bridge after another attach: %v %+v", err, l)
	}
	for _, x := range []*Attachment{a, maker} {
		if err := Detach(context.Background(), x); err != nil {
			t.Fatal(err)
		}
	}
	e.assertClean(a.ID, maker.ID)
	// The maker is gone: reclaim removes the bridge it left without alias.
	dead, name := interrupted(Process{Pid: 1 << 30, Start: 1})
	if ids, err := Reclaim(context.Background(), e.dir); err != nil || len(ids) != 1 || ids[0] != dead.ID {
		t.Fatalf("Reclaim: %v %v", ids, err)
	}
	if _, err := netlink.LinkByName(name); err == nil {
		t.Errorf("bridge %s left after its maker's lease was reclaimed", name)
	}
	e.assertClean(dead.ID)
}

// Prepare makes the lease and the rules before the sandbox's namespace
// exists, owned by the caller, and no veth; Attach on it makes the veth and
// gives the lease to the sandbox, which then reaches the upstream at the
// prepared address, and its published port works. Async, the lease is
// the sandbox's once Wait has returned.
func TestBridgePrepared(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) { testBridgePrepared(t, async) })
	}
}

func testBridgePrepared(t *testing.T, async bool) {
	e := newBridgeEnv(t)
	e.upstream.serve("serve-http", "0.0.0.0:80")
	sb := newSandboxNS(t)
	sb.serve("serve-http", "0.0.0.0:8080")
	o := e.options(nil)
	o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 8080, Proto: "tcp"}}
	p, err := Prepare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Detach(context.Background(), p) })
	if !e.subnet.Contains(p.Address.Addr()) || p.ResolvConf() != "nameserver "+e.upAddr.String()+"\n" || len(p.Ports) != 1 || p.Ports[0].HostPort == 0 {
		t.Fatalf("prepared: %+v", p)
	}
	lease := func() *Attachment {
		s, err := openStore(e.dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		l, err := s.readLease(o.ID)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := lease(); l.Owner.Pid != os.Getpid() || l.Address != p.Address {
		t.Errorf("prepared lease: owner %d (want this process, %d), address %v", l.Owner.Pid, os.Getpid(), l.Address)
	}
	if _, err := netlink.LinkByName(hostVeth(o.ID)); err == nil {
		t.Errorf("veth %s made before the sandbox's namespace", hostVeth(o.ID))
	}
	if _, err := netlink.LinkByName(p.Bridge); err != nil {
		t.Errorf("bridge %s not made: %v", p.Bridge, err)
	}
	o.Pid, o.Prepared, o.Async = sb.Pid, p, async
	a, err := Attach(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := lease(); l.Owner.Pid != sb.Pid || a.Owner.Pid != sb.Pid || a.Address != p.Address || a.Ports[0] != p.Ports[0] {
		t.Errorf("attached: lease owner %d, attachment owner %d (want the sandbox's, %d); address %v, ports %v (prepared %v, %v)", l.Owner.Pid, a.Owner.Pid, sb.Pid, a.Address, a.Ports, p.Address, p.Ports)
	}
	if out, err := sb.run("fetch", "http://"+e.upAddr.String()+"/"); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("fetch from the upstream: %q %v", out, err)
	}
	if out, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", a.Ports[0].HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
		t.Errorf("published port: %q %v", out, err)
	}
	if err := Detach(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	e.assertClean(a.ID)
}

// What Prepare made is removed whatever comes after it: the caller killed
// before Attach (the lease's owner is gone: reclaim, or DetachID as bothy
// rm does), or Attach failing (a process in the host's namespace).
func TestBridgePreparedUndone(t *testing.T) {
	if !rootOnly(t) {
		return
	}
	e := newBridgeEnv(t)
	prepared := func() AttachOptions {
		o := e.options(nil)
		o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 80, Proto: "tcp"}, {HostIP: DefaultHostIP, ContainerPort: 53, Proto: "udp"}}
		return o
	}
	assertMade := func(id string) {
		t.Helper()
		c, err := nftables.New()
		if err != nil {
			t.Fatal(err)
		}
		chains, err := c.ListChains()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(chains, func(ch *nftables.Chain) bool { return ch.Table.Name == e.instance && ch.Name == pubChain(id) }) {
			t.Fatalf("no chain %s after Prepare", pubChain(id))
		}
	}
	// Killed after Prepare: reclaimed.
	o := prepared()
	killed := inChild(t, "prepare", o)
	assertMade(killed.ID)
	if ids, err := Reclaim(context.Background(), e.dir); err != nil || len(ids) != 1 || ids[0] != o.ID {
		t.Fatalf("Reclaim: %v %v", ids, err)
	}
	e.assertClean(o.ID)
	// Killed after Prepare: detached from the lease (bothy rm).
	o = prepared()
	inChild(t, "prepare", o)
	assertMade(o.ID)
	if err := DetachID(context.Background(), e.dir, o.ID); err != nil {
		t.Fatal(err)
	}
	e.assertClean(o.ID)
	// Attach fails: the prepared attachment goes with it.
	o = prepared()
	p, err := Prepare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	assertMade(o.ID)
	o.Pid, o.Prepared = os.Getpid(), p
	if _, err := Attach(context.Background(), o); err == nil || !strings.Contains(err.Error(), "this process's network namespace") {
		t.Fatalf("Attach to this process: %v", err)
	}
	e.assertClean(o.ID)
}
