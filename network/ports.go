package network

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// Port is a published port: the host's HostIP:HostPort forwards to the
// sandbox's ContainerPort.
type Port struct {
	// HostIP is the host address bound: 127.0.0.1 unless asked, 0.0.0.0
	// for every address.
	HostIP netip.Addr `json:"host_ip"`
	// HostPort 0 means "allocate one from the port range".
	HostPort      uint16 `json:"host_port"`
	ContainerPort uint16 `json:"container_port"`
	// Proto is "tcp" or "udp".
	Proto string `json:"proto"`
}

// String gives the port in -p syntax, with the host part resolved.
func (p Port) String() string {
	return fmt.Sprintf("%s:%d:%d/%s", p.HostIP, p.HostPort, p.ContainerPort, p.Proto)
}

// DefaultHostIP is where a published port is bound unless the user names
// an address: the host's loopback, so publishing never exposes a sandbox
// to the network by accident.
var DefaultHostIP = netip.MustParseAddr("127.0.0.1")

// ParsePublish parses -p/--publish's [IP:][HOSTPORT:]CONTAINERPORT[/tcp|udp]
// (as podman's, without ranges). IP defaults to 127.0.0.1, HOSTPORT to 0
// (allocated at attach), the protocol to tcp. IP:CONTAINERPORT is not a
// form: "127.0.0.1:80" is HOSTPORT 127.0.0.1, refused.
func ParsePublish(s string) (Port, error) {
	bad := func(format string, args ...any) (Port, error) {
		return Port{}, fmt.Errorf("invalid --publish %q: %s; want [IP:][HOSTPORT:]CONTAINERPORT[/tcp|udp]", s, fmt.Sprintf(format, args...))
	}
	p := Port{HostIP: DefaultHostIP, Proto: "tcp"}
	spec, proto, hasProto := strings.Cut(s, "/")
	if hasProto {
		switch proto {
		case "tcp", "udp":
			p.Proto = proto
		default:
			return bad("protocol %q is not tcp or udp", proto)
		}
	}
	if spec == "" {
		return bad("no container port")
	}
	if strings.HasPrefix(spec, "[") {
		return bad("IPv6 host addresses are not supported (the sandbox network is IPv4)")
	}
	parts := strings.Split(spec, ":")
	if len(parts) > 3 {
		return bad("too many ':' (IPv6 host addresses are not supported)")
	}
	var err error
	if p.ContainerPort, err = parsePort(parts[len(parts)-1], false); err != nil {
		return bad("container port: %v", err)
	}
	if len(parts) >= 2 {
		if p.HostPort, err = parsePort(parts[len(parts)-2], true); err != nil {
			return bad("host port: %v", err)
		}
	}
	if len(parts) == 3 {
		ip, err := netip.ParseAddr(parts[0])
		switch {
		case parts[0] == "":
			return bad("empty host address")
		case err != nil:
			return bad("host address %q is not an IP address", parts[0])
		case !ip.Is4() || ip.Zone() != "":
			return bad("host address %s is not IPv4 (the sandbox network is IPv4)", ip)
		case ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return bad("host address %s cannot be bound", ip)
		}
		p.HostIP = ip
	}
	return p, nil
}

// parsePort parses a port number; empty and 0 are "any" when allowed.
func parsePort(s string, zeroOK bool) (uint16, error) {
	if s == "" {
		if zeroOK {
			return 0, nil
		}
		return 0, errors.New("empty")
	}
	if strings.Contains(s, "-") {
		return 0, fmt.Errorf("%q: port ranges are not supported", s)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q is not a port (1-65535)", s)
	}
	if n == 0 && !zeroOK {
		return 0, errors.New("0 is not a port")
	}
	return uint16(n), nil
}

// PortRange is the range host ports are allocated from, both ends included.
type PortRange struct {
	First uint16 `json:"first"`
	Last  uint16 `json:"last"`
}

// DefaultPortRange is where HOSTPORT 0 is allocated from: below Linux's
// default ephemeral range (32768-60999), so an outgoing connection's source
// port rarely holds one, and split between root and rootless bothy, which
// keep separate leases: root's published ports are nftables rules, not
// sockets, so an unprivileged allocator could not tell they are taken.
func DefaultPortRange(rootless bool) PortRange {
	if rootless {
		return PortRange{First: 26000, Last: 32767}
	}
	return PortRange{First: 20000, Last: 25999}
}

// ParsePortRange parses "FIRST-LAST".
func ParsePortRange(s string) (PortRange, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.ParseUint(a, 10, 16)
	last, err2 := strconv.ParseUint(b, 10, 16)
	if !ok || err1 != nil || err2 != nil || first == 0 || last < first {
		return PortRange{}, fmt.Errorf("invalid port range %q: want FIRST-LAST, 1 <= FIRST <= LAST <= 65535", s)
	}
	return PortRange{First: uint16(first), Last: uint16(last)}, nil
}

func (r PortRange) size() int { return int(r.Last) - int(r.First) + 1 }

// ErrNoFreePort is returned when every port of the range is leased or in use.
var ErrNoFreePort = errors.New("no free port")

// allocatePorts fills in the host port of every port that has none, from
// r, skipping ports that other leases hold (taken) and ports that something
// on the host has bound. Ports given explicitly are checked against the
// leases. It runs under the store's lock. start spreads allocations over
// the range so that a just-released port is not handed out again at once.
func allocatePorts(ports []Port, r PortRange, taken map[portKey]string, start int) ([]Port, error) {
	out := make([]Port, len(ports))
	mine := map[portKey]bool{}
	for i, p := range ports {
		if err := hostAddressUsable(p.HostIP); err != nil {
			return nil, fmt.Errorf("publish %s: %w", p, err)
		}
		if p.HostPort != 0 {
			k := portKey{p.Proto, p.HostPort}
			if owner, ok := taken[k]; ok {
				return nil, fmt.Errorf("publish %s: host port %d/%s is published by sandbox %s", p, p.HostPort, p.Proto, owner)
			}
			if mine[k] {
				return nil, fmt.Errorf("publish %s: host port %d/%s given twice", p, p.HostPort, p.Proto)
			}
			// A program that has it would be shadowed by a DNAT rule, or
			// make the helper fail: say so now.
			if !portFree(p.Proto, p.HostIP, p.HostPort) {
				return nil, fmt.Errorf("publish %s: host port %d/%s is in use on the host", p, p.HostPort, p.Proto)
			}
			mine[k] = true
		}
		out[i] = p
	}
	n := r.size()
	for i, p := range out {
		if p.HostPort != 0 {
			continue
		}
		found := false
		for j := range n {
			port := uint16(int(r.First) + (start+j)%n)
			k := portKey{p.Proto, port}
			if _, ok := taken[k]; ok || mine[k] {
				continue
			}
			if !portFree(p.Proto, p.HostIP, port) {
				continue
			}
			out[i].HostPort, mine[k], found = port, true, true
			break
		}
		if !found {
			return nil, fmt.Errorf("publish %s: %w in %d-%d", p, ErrNoFreePort, r.First, r.Last)
		}
	}
	return out, nil
}

// hostAddressUsable checks that ip is an address of this host (or
// 0.0.0.0), by binding it.
func hostAddressUsable(ip netip.Addr) error {
	l, err := net.ListenPacket("udp4", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return fmt.Errorf("%s is not an address of this host", ip)
		}
		return err
	}
	return l.Close()
}

type portKey struct {
	proto string
	port  uint16
}

// portFree reports whether the port can be bound on ip now (and on every
// address, so that a later 0.0.0.0 binding cannot collide either).
func portFree(proto string, ip netip.Addr, port uint16) bool {
	for _, a := range []netip.Addr{ip, netip.IPv4Unspecified()} {
		addr := netip.AddrPortFrom(a, port).String()
		switch proto {
		case "udp":
			c, err := net.ListenPacket("udp4", addr)
			if err != nil {
				return false
			}
			c.Close()
		default:
			l, err := net.Listen("tcp4", addr)
			if err != nil {
				return false
			}
			l.Close()
		}
	}
	return true
}
