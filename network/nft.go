package network

// Expressions for the nftables rules bothy writes, in the terms nft(8)
// prints them, built with github.com/google/nftables: bothy speaks netlink
// to the kernel itself (one batch per change, applied atomically) instead of
// running nft, so that attaching costs no process start.

import (
	"encoding/binary"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

const reg1, reg2 = 1, 2

var (
	loopbackNet  = netip.MustParsePrefix("127.0.0.0/8")
	loopbackAddr = netip.MustParseAddr("127.0.0.1")
)

// ifname pads an interface name as the kernel stores it (IFNAMSIZ).
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func port16(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }

// metaIs: meta KEY == data.
func metaIs(key expr.MetaKey, data []byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: data},
	}
}

// ifIs: iifname/oifname == name (the trailing NUL makes it exact).
func ifIs(key expr.MetaKey, name string) []expr.Any {
	return metaIs(key, append([]byte(name), 0))
}

// ifIn: iifname/oifname @set (or != @set).
func ifIn(key expr.MetaKey, set *nftables.Set, invert bool) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: reg1},
		&expr.Lookup{SourceRegister: reg1, SetName: set.Name, SetID: set.ID, Invert: invert},
	}
}

// vmap: KEY-loading expressions, then a jump through the verdict map.
func vmap(load []expr.Any, set *nftables.Set) []expr.Any {
	return append(load, &expr.Lookup{SourceRegister: reg1, DestRegister: 0, IsDestRegSet: true, SetName: set.Name, SetID: set.ID})
}

func loadMeta(key expr.MetaKey) []expr.Any { return []expr.Any{&expr.Meta{Key: key, Register: reg1}} }

// ipv4: meta nfproto ipv4 (in the inet family).
func ipv4() []expr.Any { return metaIs(expr.MetaKeyNFPROTO, []byte{unix.NFPROTO_IPV4}) }

// l4proto: meta l4proto tcp|udp.
func l4proto(proto string) []expr.Any {
	p := byte(unix.IPPROTO_TCP)
	if proto == "udp" {
		p = unix.IPPROTO_UDP
	}
	return metaIs(expr.MetaKeyL4PROTO, []byte{p})
}

// loadAddr loads ip saddr (offset 12) or ip daddr (16).
func loadAddr(offset uint32) []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}}
}

const saddr, daddr = 12, 16

// addrIn: ip saddr/daddr within prefix.
func addrIn(offset uint32, p netip.Prefix) []expr.Any {
	out := loadAddr(offset)
	if p.Bits() < 32 {
		m := uint32(0)
		if p.Bits() > 0 {
			m = uint32(0xffffffff) << (32 - p.Bits())
		}
		out = append(out, &expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binary.BigEndian.AppendUint32(nil, m), Xor: []byte{0, 0, 0, 0}})
	}
	a := p.Masked().Addr().As4()
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: a[:]})
}

// addrIsNot: ip saddr != a.
func addrIsNot(offset uint32, a netip.Addr) []expr.Any {
	b := a.As4()
	return append(loadAddr(offset), &expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: b[:]})
}

// loadDport loads th dport (the packet's l4proto must be tested first).
func loadDport() []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}}
}

func dportIs(p uint16) []expr.Any {
	return append(loadDport(), &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: port16(p)})
}

// ctState: ct state & bits != 0.
func ctState(bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: reg1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func established() []expr.Any {
	return ctState(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
}

// ipsDstNAT is conntrack's IPS_DST_NAT status bit.
const ipsDstNAT = 1 << 5

// ctDNAT: ct status dnat.
func ctDNAT() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: reg1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// fibDaddrLocal: fib daddr type local.
func fibDaddrLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: reg1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
}

// dnat: dnat ip to addr:port.
func dnat(a netip.Addr, port uint16) []expr.Any {
	b := a.As4()
	return []expr.Any{
		&expr.Immediate{Register: reg1, Data: b[:]},
		&expr.Immediate{Register: reg2, Data: port16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg1, RegProtoMin: reg2, Specified: true},
	}
}

// redirect: redirect to :port.
func redirect(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: reg1, Data: port16(port)},
		&expr.Redir{RegisterProtoMin: reg1},
	}
}

// etherType: ether type == t (bridge family).
func etherType(t uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseLLHeader, Offset: 12, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binary.BigEndian.AppendUint16(nil, t)},
	}
}

// arpSenderIs: arp saddr ip == a (Ethernet/IPv4 ARP: after htype, ptype,
// hlen, plen, op and the sender's hardware address).
func arpSenderIs(a netip.Addr) []expr.Any {
	b := a.As4()
	return []expr.Any{
		&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: 14, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: b[:]},
	}
}

func addrIs(offset uint32, a netip.Addr) []expr.Any {
	b := a.As4()
	return append(loadAddr(offset), &expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: b[:]})
}

func verdict(k expr.VerdictKind) expr.Any { return &expr.Verdict{Kind: k} }

func accept() expr.Any { return verdict(expr.VerdictAccept) }
func drop() expr.Any   { return verdict(expr.VerdictDrop) }

// refuse: reject with icmpx admin-prohibited: what a sandbox may not
// reach fails at once (connection refused, host unreachable), instead of
// hanging a package manager until it times out.
func refuse() expr.Any {
	return &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}
}

func jump(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain} }

func masq() expr.Any { return &expr.Masq{} }

// rule concatenates expression lists into a rule's expressions.
func rule(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(e expr.Any) []expr.Any { return []expr.Any{e} }

// egressRules returns the allow-list's rules for an egress chain, ending
// with last (the refusal): replies of connections made to the sandbox
// (published ports) and to allowed destinations pass; so do the allowed
// destinations.
func egressRules(e Egress, last expr.Any) [][]expr.Any {
	rules := [][]expr.Any{rule(established(), one(accept()))}
	for _, d := range e.Allow {
		for _, p := range d.Prefixes {
			if d.Port == 0 {
				rules = append(rules, rule(ipv4(), addrIn(daddr, p), one(accept())))
				continue
			}
			for _, proto := range []string{"tcp", "udp"} {
				rules = append(rules, rule(ipv4(), addrIn(daddr, p), l4proto(proto), dportIs(d.Port), one(accept())))
			}
		}
	}
	return append(rules, one(last))
}
