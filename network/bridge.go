package network

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Root's bridge networks: a Linux bridge per network (bothy0 for the
// default one, created on first use and removed with its last sandbox), a
// veth pair per sandbox, addresses leased from the network's subnet, and the
// nftables rules of bridge_nft.go. All of it but the veth pair is made
// before the sandbox's network namespace exists (Prepare, prepareBridge);
// once it does, the pair is made with the sandbox's end, eth0, directly in
// it (Attach, completeBridge). The pair is not made on the host and moved
// in: moving a link between namespaces waits for RCU grace periods, 17-20
// ms here against 1 ms for a pair made across the two.

// DefaultInstance names a bothy's bridges and nftables tables: the default
// network's bridge is bothy0.
const DefaultInstance = "bothy"

var instancePattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,4}$`)

// DefaultSubnet is the default network's subnet. podman's default network
// is 10.88.0.0/16 and its named networks take 10.89.0.0/24 on; Docker takes
// 172.17.0.0/16 and then 172.18-31 and 192.168; Kubernetes' defaults are
// 10.96.0.0/12 (services), 10.244.0.0/16 (flannel), 10.42/10.43 (k3s);
// libvirt 192.168.122.0/24; slirp4netns and pasta here 10.0.2.0/24;
// Parallels 10.211.55.0/24. 10.77.0.0/16 is none of those, so bothy's
// sandboxes can run beside any of them.
var DefaultSubnet = netip.MustParsePrefix("10.77.0.0/16")

// DefaultNetworkPool is where named networks take a /24 each.
var DefaultNetworkPool = netip.MustParsePrefix("10.78.0.0/16")

// ErrBridgeNeedsRoot is returned when the bridge driver is asked for
// without the privilege it needs.
var ErrBridgeNeedsRoot = errors.New("the bridge network needs root: creating the bothy0 bridge, veth pairs and nftables rules takes CAP_NET_ADMIN on the host; rootless sandboxes get bridge networking from pasta or slirp4netns (leave the driver unset)")

// aliases mark what bothy created, so that nothing else is ever removed.
func bridgeAlias(network string) string { return "bothy network " + cmpOr(network, "(default)") }
func vethAlias(id string) string        { return "bothy sandbox " + id }

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// hostVeth names the host end of a sandbox's veth pair (15 bytes at most).
func hostVeth(id string) string {
	h := sha256.Sum256([]byte(id))
	return "bv" + hex.EncodeToString(h[:6])
}

// bridgeName names a network's bridge (15 bytes at most).
func bridgeName(instance, network string) string {
	if network == "" {
		return instance + "0"
	}
	h := sha256.Sum256([]byte(network))
	return instance + hex.EncodeToString(h[:5])
}

// prepareBridge makes a root sandbox's host side, before its network
// namespace need exist: its lease (address, gateway, DNS, host ports), the
// network's bridge and rules, and the sandbox's rules, keyed by the name of
// its veth to be (completeBridge makes it). It runs under the store's lock,
// with leases the live leases. On error nothing of it is left.
func prepareBridge(ctx context.Context, s *store, o *AttachOptions, a *Attachment, leases []*Attachment) (err error) {
	if os.Geteuid() != 0 {
		return ErrBridgeNeedsRoot
	}
	a.Instance = o.Instance
	a.Bridge = bridgeName(o.Instance, o.Network)
	a.HostVeth = hostVeth(a.ID)
	a.Interface = "eth0"
	subnet, err := networkSubnet(o, a.Bridge, leases)
	if err != nil {
		return err
	}
	addr, err := leaseAddress(subnet, a.Bridge, leases)
	if err != nil {
		return err
	}
	a.Gateway = subnet.Masked().Addr().Next()
	a.Address = netip.PrefixFrom(addr, subnet.Bits())
	a.DNS = o.DNS
	if len(a.DNS) == 0 {
		a.DNS, a.Warnings = hostNameservers(a.Warnings)
	}
	taken := takenPorts(leases)
	if a.Ports, err = allocatePorts(o.Publish, o.PortRange, taken, portStart(a.ID, o.PortRange)); err != nil {
		return err
	}
	// The lease is written before anything is made: whatever an
	// interruption leaves, the lease names it.
	if err := s.writeLease(a); err != nil {
		return err
	}
	trace.Mark("network", "lease written")
	defer func() {
		if err != nil {
			if derr := detachLocked(context.WithoutCancel(ctx), s, a, leases); derr != nil {
				err = fmt.Errorf("%w (and undo: %v)", err, derr)
			}
		}
	}()
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	// Before the bridge is made, the lease says this attachment makes it.
	made := func() error {
		a.BridgeMade = true
		return s.writeLease(a)
	}
	if _, err := ensureBridge(h, o.Network, a.Bridge, a.Gateway, subnet, leases, made); err != nil {
		return err
	}
	trace.Mark("network", "bridge ready")
	if w := forwardingWarning(h); w != "" {
		a.Warnings = append(a.Warnings, w)
	}
	nc, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	defer nc.CloseLasting()
	rules := newHostRules(nc, a.Instance)
	if err := rules.ensure(); err != nil {
		return err
	}
	if err := rules.addNetwork(a.Bridge, o.Network != ""); err != nil {
		return err
	}
	// The sandbox's rules come before its veth: no packet of it ever
	// passes unchecked.
	if err := rules.addSandbox(a); err != nil {
		return err
	}
	trace.Mark("network", "rules added")
	return nil
}

// completeBridge makes the sandbox's veth pair, once its network namespace
// nsfd exists: the host end on its network's bridge, the sandbox's, eth0,
// in the namespace with its address and default route. It starts the
// forwarder of the ports the builtin port driver carries. The caller
// records the lease, and undoes a on error.
func completeBridge(s *store, o *AttachOptions, a *Attachment, nsfd *os.File) error {
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	br, err := h.LinkByName(a.Bridge)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", a.Bridge, err)
	}
	if err := addVeth(h, br, a, nsfd, o.Network == ""); err != nil {
		return err
	}
	trace.Mark("network", "veth created")
	if slices.ContainsFunc(a.Ports, func(p Port) bool { return forwarded(a.PortDriver, p) }) {
		dir, err := s.helperDir(a.ID)
		if err != nil {
			return err
		}
		if err := startForwarder(o, a, dir); err != nil {
			return err
		}
	}
	return nil
}

// networkSubnet returns the network's subnet: the default network's, a
// named network's from its other sandboxes' leases, or a new named
// network's: the first /24 of the pool no lease uses.
func networkSubnet(o *AttachOptions, bridge string, leases []*Attachment) (netip.Prefix, error) {
	if o.Network == "" {
		return o.Subnet, nil
	}
	used := map[netip.Prefix]bool{}
	for _, l := range leases {
		if l.Driver != DriverBridge || !l.Address.IsValid() {
			continue
		}
		if l.Bridge == bridge {
			return l.Address.Masked(), nil
		}
		used[l.Address.Masked()] = true
	}
	pool := o.NetworkPool.Masked()
	if pool.Bits() > 24 {
		return netip.Prefix{}, fmt.Errorf("network pool %s: smaller than a /24", pool)
	}
	for p := netip.PrefixFrom(pool.Addr(), 24); pool.Contains(p.Addr()); {
		if !used[p] && !p.Overlaps(o.Subnet) {
			return p, nil
		}
		next := p.Addr().As4()
		if next[2] == 255 {
			if next[1] == 255 {
				break
			}
			next[1]++
		}
		next[2]++
		p = netip.PrefixFrom(netip.AddrFrom4(next), 24)
	}
	return netip.Prefix{}, fmt.Errorf("network %q: every /24 of the pool %s is in use", o.Network, pool)
}

// leaseAddress returns the lowest address of subnet that no lease on the
// bridge holds (after the network address and the gateway, before the
// broadcast address).
func leaseAddress(subnet netip.Prefix, bridge string, leases []*Attachment) (netip.Addr, error) {
	held := map[netip.Addr]bool{}
	for _, l := range leases {
		if l.Driver == DriverBridge && l.Bridge == bridge && l.Address.IsValid() {
			held[l.Address.Addr()] = true
		}
	}
	subnet = subnet.Masked()
	a := subnet.Addr().Next().Next() // .0 is the network, .1 the gateway
	for ; subnet.Contains(a); a = a.Next() {
		if !subnet.Contains(a.Next()) {
			break // the broadcast address
		}
		if !held[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free address in %s", subnet)
}

// ensureBridge returns the network's bridge, creating it if need be. A
// link of that name that bothy did not make is refused, and so is a
// subnet that overlaps a route of the host's.
func ensureBridge(h *netlink.Handle, network, name string, gw netip.Addr, subnet netip.Prefix, leases []*Attachment, beforeCreate func() error) (netlink.Link, error) {
	link, err := h.LinkByName(name)
	if err == nil && link.Type() == "bridge" && link.Attrs().Alias == "" && slices.ContainsFunc(leases, func(l *Attachment) bool { return l.Bridge == name && l.BridgeMade }) {
		// A lease says it made this bridge, killed before its alias was
		// set: bothy's, finished now.
		if err := h.LinkSetAlias(link, bridgeAlias(network)); err != nil {
			return nil, fmt.Errorf("bridge %s: set alias: %w", name, err)
		}
		return h.LinkByName(name)
	}
	if err == nil {
		if link.Attrs().Alias != bridgeAlias(network) || link.Type() != "bridge" {
			return nil, fmt.Errorf("network %q: a %s named %s exists that bothy did not create (alias %q)", cmpOr(network, "default"), link.Type(), name, link.Attrs().Alias)
		}
		return link, nil
	}
	var nf netlink.LinkNotFoundError
	if !errors.As(err, &nf) {
		return nil, fmt.Errorf("look up bridge %s: %w", name, err)
	}
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		if !ok {
			continue
		}
		dp := netip.PrefixFrom(dst.Unmap(), ones)
		if ones > 0 && dp.Overlaps(subnet) { // not the default route
			ifname := fmt.Sprint(r.LinkIndex)
			if l, err := h.LinkByIndex(r.LinkIndex); err == nil {
				ifname = l.Attrs().Name
			}
			return nil, fmt.Errorf("network %q: subnet %s overlaps the host's route to %s on %s: choose another subnet", cmpOr(network, "default"), subnet, dp, ifname)
		}
	}
	if err := beforeCreate(); err != nil {
		return nil, err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, TxQLen: -1}}
	if err := h.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("create bridge %s: %w", name, err)
	}
	// The alias marks it bothy's (the kernel ignores one given at
	// creation).
	if err := h.LinkSetAlias(br, bridgeAlias(network)); err != nil {
		_ = h.LinkDel(br)
		return nil, fmt.Errorf("bridge %s: set alias: %w", name, err)
	}
	// IPv4 only: no IPv6 address on the bridge, forwarding on, and
	// loopback-sourced packets (connections to 127.0.0.1:HOSTPORT, DNATed
	// to a sandbox) routed out of it.
	for path, val := range map[string]string{
		"ipv6/conf/" + name + "/disable_ipv6":   "1",
		"ipv4/conf/" + name + "/forwarding":     "1",
		"ipv4/conf/" + name + "/route_localnet": "1",
	} {
		if err := os.WriteFile("/proc/sys/net/"+path, []byte(val), 0); err != nil && !(errors.Is(err, os.ErrNotExist) && strings.HasPrefix(path, "ipv6")) {
			return nil, fmt.Errorf("bridge %s: set %s: %w", name, path, err)
		}
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: gw.AsSlice(), Mask: net.CIDRMask(subnet.Bits(), 32)}}
	if err := h.AddrAdd(br, addr); err != nil {
		return nil, fmt.Errorf("bridge %s: add address %s: %w", name, gw, err)
	}
	if err := h.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("bridge %s: up: %w", name, err)
	}
	return br, nil
}

// addVeth makes the sandbox's veth pair: the host end on the bridge
// (isolated on the default network), eth0 in the sandbox with its address
// and default route.
func addVeth(h *netlink.Handle, br netlink.Link, a *Attachment, nsfd *os.File, isolated bool) error {
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: a.HostVeth, MasterIndex: br.Attrs().Index, TxQLen: -1},
		PeerName:      a.Interface,
		PeerNamespace: netlink.NsFd(int(nsfd.Fd())),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", a.HostVeth, err)
	}
	host, err := h.LinkByName(a.HostVeth)
	if err != nil {
		return fmt.Errorf("veth %s: %w", a.HostVeth, err)
	}
	if err := h.LinkSetAlias(host, vethAlias(a.ID)); err != nil {
		_ = h.LinkDel(host)
		return fmt.Errorf("veth %s: set alias: %w", a.HostVeth, err)
	}
	if isolated {
		if err := h.LinkSetIsolated(host, true); err != nil {
			return fmt.Errorf("veth %s: isolate: %w", a.HostVeth, err)
		}
	}
	if err := h.LinkSetUp(host); err != nil {
		return fmt.Errorf("veth %s: up: %w", a.HostVeth, err)
	}
	in, err := netlink.NewHandleAt(netns.NsHandle(int(nsfd.Fd())))
	if err != nil {
		return fmt.Errorf("netlink in the sandbox's namespace: %w", err)
	}
	defer in.Close()
	lo, err := in.LinkByName("lo")
	if err == nil {
		err = in.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("sandbox's lo: %w", err)
	}
	eth, err := in.LinkByName(a.Interface)
	if err != nil {
		return fmt.Errorf("sandbox's %s: %w", a.Interface, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.Address.Addr().AsSlice(), Mask: net.CIDRMask(a.Address.Bits(), 32)}}
	if err := in.AddrAdd(eth, addr); err != nil {
		return fmt.Errorf("sandbox's %s: add address %s: %w", a.Interface, a.Address, err)
	}
	if err := in.LinkSetUp(eth); err != nil {
		return fmt.Errorf("sandbox's %s: up: %w", a.Interface, err)
	}
	route := &netlink.Route{LinkIndex: eth.Attrs().Index, Gw: a.Gateway.AsSlice()}
	if err := in.RouteAdd(route); err != nil {
		return fmt.Errorf("sandbox's default route via %s: %w", a.Gateway, err)
	}
	return nil
}

// detachBridge removes a bridge sandbox's rules and veth and, when it was
// its network's last sandbox, the network's bridge and rules (and with the
// last network, bothy's tables). others are the leases left.
func detachBridge(a *Attachment, others []*Attachment) error {
	if os.Geteuid() != 0 {
		return ErrBridgeNeedsRoot
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	nc, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	defer nc.CloseLasting()
	rules := newHostRules(nc, a.Instance)
	ok, err := rules.exists()
	if err != nil {
		return err
	}
	if ok {
		if err := rules.removeSandbox(a); err != nil {
			return err
		}
	}
	if a.HostVeth != "" {
		if err := delLink(h, a.HostVeth, vethAlias(a.ID)); err != nil {
			return err
		}
	}
	if a.Bridge == "" {
		return nil
	}
	inUse := func(match func(l *Attachment) bool) bool {
		return slices.ContainsFunc(others, func(l *Attachment) bool { return l.Driver == DriverBridge && l.ID != a.ID && match(l) })
	}
	if inUse(func(l *Attachment) bool { return l.Bridge == a.Bridge }) {
		return nil
	}
	if ok {
		if err := rules.removeNetwork(a.Bridge); err != nil {
			return err
		}
	}
	if err := delBridge(h, a); err != nil {
		return err
	}
	if ok && !inUse(func(*Attachment) bool { return true }) {
		return rules.deleteTables()
	}
	return nil
}

// delBridge deletes a's bridge if it is there and carries bothy's alias,
// or, when a made it, no alias yet (its maker was killed before it set it).
func delBridge(h *netlink.Handle, a *Attachment) error {
	if a.BridgeMade {
		link, err := h.LinkByName(a.Bridge)
		if err == nil && link.Type() == "bridge" && link.Attrs().Alias == "" {
			if err := h.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
				return fmt.Errorf("delete %s: %w", a.Bridge, err)
			}
			return nil
		}
	}
	return delLink(h, a.Bridge, bridgeAlias(a.Network))
}

// delLink deletes the named link if it is there and carries bothy's alias.
func delLink(h *netlink.Handle, name, alias string) error {
	link, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	if link.Attrs().Alias != alias {
		return nil // not bothy's: never touched
	}
	if err := h.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// hostNameservers returns the host's IPv4 nameservers that a sandbox can
// reach through NAT: not those on the host's loopback (systemd-resolved's
// 127.0.0.53, a local dnsmasq), which a warning names.
func hostNameservers(warnings []string) ([]netip.Addr, []string) {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil, append(warnings, fmt.Sprintf("no DNS in the sandbox: %v", err))
	}
	defer f.Close()
	var out, skipped []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(fields[1])
		if err != nil || !a.Is4() {
			continue
		}
		if a.IsLoopback() {
			skipped = append(skipped, a)
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, append(warnings, fmt.Sprintf("no DNS in the sandbox: the host's nameservers %v are on its loopback, which sandboxes do not reach; give nameservers explicitly", skipped))
	}
	return out, warnings
}

// forwardingWarning names the uplink when IPv4 forwarding is off on it:
// bothy turns forwarding on for its bridges only, and outbound traffic
// then stops at the host.
func forwardingWarning(h *netlink.Handle) string {
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return ""
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP != nil && !r.Dst.IP.IsUnspecified() {
			continue
		}
		l, err := h.LinkByIndex(r.LinkIndex)
		if err != nil {
			continue
		}
		name := l.Attrs().Name
		data, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + name + "/forwarding")
		if err == nil && strings.TrimSpace(string(data)) == "0" {
			return fmt.Sprintf("IPv4 forwarding is off on the uplink %s: sandboxes reach no further than the host; enable it (sysctl net.ipv4.conf.%s.forwarding=1, or net.ipv4.ip_forward=1)", name, name)
		}
		return ""
	}
	return ""
}

// takenPorts indexes the host ports of every lease.
func takenPorts(leases []*Attachment) map[portKey]string {
	out := map[portKey]string{}
	for _, l := range leases {
		for _, p := range l.Ports {
			if p.HostPort != 0 {
				out[portKey{p.Proto, p.HostPort}] = l.ID
			}
		}
	}
	return out
}

// portStart is where a sandbox's search of the port range starts: spread
// by its ID, so that a port just released is rarely handed out at once.
func portStart(id string, r PortRange) int {
	h := sha256.Sum256([]byte(id))
	return int(uint32(h[0])<<16|uint32(h[1])<<8|uint32(h[2])) % r.size()
}
