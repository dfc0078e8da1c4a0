package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Egress is a sandbox's outbound policy. The zero value allows everything.
// With Deny, nothing leaves but replies (published ports keep working) and
// connections to the Allow list. DNS is outbound traffic like any other: a
// denied sandbox resolves nothing unless its resolver is on the list; the
// names of the list are resolved on the host when the policy is resolved
// and pinned (Hosts gives the sandbox's /etc/hosts lines).
type Egress struct {
	Deny  bool          `json:"deny,omitempty"`
	Allow []Destination `json:"allow,omitempty"`
}

// Destination is one entry of an allow-list: a CIDR or a host name, and a
// port (0: every port). A port admits both TCP and UDP.
type Destination struct {
	// Host is the name as given, when a name was given.
	Host string `json:"host,omitempty"`
	// Prefix is the CIDR or address given, or one pinned address of Host
	// after Resolve.
	Prefixes []netip.Prefix `json:"prefixes,omitempty"`
	Port     uint16         `json:"port,omitempty"`
}

func (d Destination) String() string {
	s := d.Host
	if s == "" && len(d.Prefixes) > 0 {
		s = d.Prefixes[0].String()
		if d.Prefixes[0].IsSingleIP() {
			s = d.Prefixes[0].Addr().String()
		}
	}
	if d.Port != 0 {
		s += ":" + strconv.Itoa(int(d.Port))
	}
	return s
}

// ParseEgress builds a policy from --egress (allow, deny, or empty) and the
// --egress-allow entries. An allow-list implies deny; "allow" with a list
// is a contradiction and refused.
func ParseEgress(policy string, allow []string) (Egress, error) {
	var e Egress
	switch policy {
	case "", "allow":
		if policy == "allow" && len(allow) > 0 {
			return Egress{}, errors.New("--egress allow admits everything: drop it to use --egress-allow, which denies the rest")
		}
	case "deny":
		e.Deny = true
	default:
		return Egress{}, fmt.Errorf("invalid --egress %q: want allow or deny", policy)
	}
	for _, a := range allow {
		d, err := ParseDestination(a)
		if err != nil {
			return Egress{}, err
		}
		e.Allow = append(e.Allow, d)
	}
	if len(e.Allow) > 0 {
		e.Deny = true
	}
	return e, nil
}

// ParseDestination parses --egress-allow's CIDR[:PORT] or HOST[:PORT].
func ParseDestination(s string) (Destination, error) {
	bad := func(why string) (Destination, error) {
		return Destination{}, fmt.Errorf("invalid --egress-allow %q: %s; want CIDR[:PORT] or HOST[:PORT]", s, why)
	}
	if s == "" {
		return bad("empty")
	}
	if strings.Count(s, ":") > 1 || strings.HasPrefix(s, "[") {
		return bad("IPv6 is not supported (the sandbox network is IPv4)")
	}
	host, portStr, hasPort := strings.Cut(s, ":")
	var d Destination
	if hasPort {
		p, err := parsePort(portStr, false)
		if err != nil {
			return bad("port: " + err.Error())
		}
		d.Port = p
	}
	if pfx, err := netip.ParsePrefix(host); err == nil {
		if !pfx.Addr().Is4() {
			return bad("IPv6 is not supported (the sandbox network is IPv4)")
		}
		if pfx != pfx.Masked() {
			return bad(fmt.Sprintf("%s has host bits set (did you mean %s?)", pfx, pfx.Masked()))
		}
		d.Prefixes = []netip.Prefix{pfx}
		return d, nil
	}
	if strings.Contains(host, "/") {
		return bad(fmt.Sprintf("%q is not a CIDR", host))
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return bad("IPv6 is not supported (the sandbox network is IPv4)")
		}
		d.Prefixes = []netip.Prefix{netip.PrefixFrom(a, 32)}
		return d, nil
	}
	if !validHostname(host) {
		return bad(fmt.Sprintf("%q is neither an IPv4 address, a CIDR nor a host name", host))
	}
	d.Host = strings.ToLower(strings.TrimSuffix(host, "."))
	return d, nil
}

// validHostname accepts RFC 1123 names (letters, digits, '-', '_' and dots).
func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Resolver looks a host name up; net.DefaultResolver's LookupNetIP is the
// default.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// DefaultResolver resolves with the host's resolver (/etc/hosts, DNS).
func DefaultResolver(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
}

// Resolve pins the names of the allow-list to the IPv4 addresses they
// resolve to now (with lookup, or DefaultResolver if nil). A name without
// an IPv4 address is an error: an entry that admits nothing is a mistake.
func (e Egress) Resolve(ctx context.Context, lookup Resolver) (Egress, error) {
	if lookup == nil {
		lookup = DefaultResolver
	}
	out := Egress{Deny: e.Deny}
	for _, d := range e.Allow {
		if d.Host != "" && len(d.Prefixes) == 0 {
			addrs, err := lookup(ctx, d.Host)
			if err != nil {
				return Egress{}, fmt.Errorf("resolve --egress-allow %s: %w", d, err)
			}
			for _, a := range addrs {
				a = a.Unmap()
				if a.Is4() {
					d.Prefixes = append(d.Prefixes, netip.PrefixFrom(a, 32))
				}
			}
			slices.SortFunc(d.Prefixes, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
			d.Prefixes = slices.Compact(d.Prefixes)
			if len(d.Prefixes) == 0 {
				return Egress{}, fmt.Errorf("resolve --egress-allow %s: no IPv4 address", d)
			}
		}
		out.Allow = append(out.Allow, d)
	}
	return out, nil
}

// resolved reports whether every name of the list is pinned.
func (e Egress) resolved() bool {
	for _, d := range e.Allow {
		if len(d.Prefixes) == 0 {
			return false
		}
	}
	return true
}

// Hosts returns /etc/hosts lines for the pinned names: inside, a name on
// the list resolves to what the host resolved when the policy was set,
// whatever DNS says (or does not say) later.
func (e Egress) Hosts() string {
	var b strings.Builder
	for _, d := range e.Allow {
		if d.Host == "" {
			continue
		}
		for _, p := range d.Prefixes {
			fmt.Fprintf(&b, "%s\t%s\n", p.Addr(), d.Host)
		}
	}
	return b.String()
}

// String describes the policy: allow, deny, or deny except the list.
func (e Egress) String() string {
	if !e.Deny {
		return "allow"
	}
	if len(e.Allow) == 0 {
		return "deny"
	}
	var s []string
	for _, d := range e.Allow {
		s = append(s, d.String())
	}
	return "allow only " + strings.Join(s, ", ")
}
