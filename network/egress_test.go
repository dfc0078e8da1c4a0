package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestParseEgress(t *testing.T) {
	for _, tc := range []struct {
		policy string
		allow  []string
		want   string
	}{
		{"", nil, "allow"},
		{"allow", nil, "allow"},
		{"deny", nil, "deny"},
		{"", []string{"10.0.0.0/8", "192.0.2.1:443", "Mirror.Example.org.:80"}, "allow only 10.0.0.0/8, 192.0.2.1:443, mirror.example.org:80"},
		{"deny", []string{"deb.debian.org"}, "allow only deb.debian.org"},
	} {
		e, err := ParseEgress(tc.policy, tc.allow)
		if err != nil || e.String() != tc.want {
			t.Errorf("ParseEgress(%q, %q) = %q, %v; want %q", tc.policy, tc.allow, e, err, tc.want)
		}
	}
	for _, tc := range []struct {
		policy string
		allow  []string
		why    string
	}{
		{"maybe", nil, `invalid --egress "maybe"`},
		{"allow", []string{"10.0.0.0/8"}, "drop it to use --egress-allow"},
		{"", []string{""}, "empty"},
		{"", []string{"10.0.0.1/8"}, "host bits set (did you mean 10.0.0.0/8?)"},
		{"", []string{"::1"}, "IPv6 is not supported"},
		{"", []string{"[::1]:80"}, "IPv6 is not supported"},
		{"", []string{"fd00::/8"}, "IPv6 is not supported"},
		{"", []string{"host:0"}, "0 is not a port"},
		{"", []string{"host:http"}, "is not a number"},
		{"", []string{"exa mple.org"}, "neither an IPv4 address, a CIDR nor a host name"},
		{"", []string{"-bad-.org"}, "neither an IPv4 address"},
		{"", []string{"host/24"}, "is not a CIDR"},
	} {
		_, err := ParseEgress(tc.policy, tc.allow)
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("ParseEgress(%q, %q) = %v; want an error saying %q", tc.policy, tc.allow, err, tc.why)
		}
	}
}

func FuzzParseDestination(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "1.2.3.4:80", "deb.debian.org:443", "a..b", "[::]:1", "x:y:z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDestination(s)
		if err != nil {
			return
		}
		if (d.Host == "") == (len(d.Prefixes) == 0) {
			t.Fatalf("ParseDestination(%q) = %+v: want a host or a prefix", s, d)
		}
		for _, p := range d.Prefixes {
			if !p.Addr().Is4() || p != p.Masked() {
				t.Fatalf("ParseDestination(%q) = %+v: bad prefix", s, d)
			}
		}
		again, err := ParseDestination(d.String())
		if err != nil || again.String() != d.String() {
			t.Fatalf("ParseDestination(%q) = %q, which parses as %q, %v", s, d, again, err)
		}
	})
}

// Names are pinned when the policy is resolved, with the host's resolver
// (here /etc/hosts' localhost) or a given one; a name without an IPv4
// address, or that does not resolve, is refused; Hosts gives the pinned
// names for the sandbox's /etc/hosts.
func TestEgressResolve(t *testing.T) {
	e, err := ParseEgress("", []string{"localhost:8080", "192.0.2.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	if e.resolved() {
		t.Fatal("names resolved before Resolve")
	}
	r, err := e.Resolve(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.resolved() || r.Allow[0].Prefixes[0] != netip.MustParsePrefix("127.0.0.1/32") || r.Allow[1].Prefixes[0] != netip.MustParsePrefix("192.0.2.0/24") {
		t.Fatalf("resolved: %+v", r)
	}
	if !strings.Contains(r.Hosts(), "127.0.0.1\tlocalhost\n") {
		t.Errorf("hosts: %q", r.Hosts())
	}
	fake := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "mirror.test":
			return []netip.Addr{netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("198.51.100.8")}, nil
		case "v6only.test":
			return []netip.Addr{netip.MustParseAddr("2001:db8::1")}, nil
		}
		return nil, errors.New("no such host")
	}
	e, _ = ParseEgress("", []string{"mirror.test:443"})
	r, err = e.Resolve(context.Background(), fake)
	if err != nil || len(r.Allow[0].Prefixes) != 2 || r.Hosts() != "198.51.100.8\tmirror.test\n198.51.100.9\tmirror.test\n" {
		t.Fatalf("mirror.test: %+v %q %v", r, r.Hosts(), err)
	}
	for _, name := range []string{"v6only.test", "nowhere.test"} {
		e, _ = ParseEgress("", []string{name})
		if _, err := e.Resolve(context.Background(), fake); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Resolve(%s) = %v", name, err)
		}
	}
}

func TestCapDrop(t *testing.T) {
	deny := Egress{Deny: true}
	for _, tc := range []struct {
		d    Driver
		e    Egress
		want string
	}{
		{DriverPasta, deny, "[CAP_NET_RAW]"},
		{DriverSlirp4netns, deny, "[CAP_NET_RAW]"},
		{DriverPasta, Egress{}, "[]"},
		{DriverBridge, deny, "[]"},
	} {
		if got := fmt.Sprint(CapDrop(tc.d, tc.e)); got != tc.want {
			t.Errorf("CapDrop(%s, %s) = %s, want %s", tc.d, tc.e, got, tc.want)
		}
	}
}
