package network

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// With a helper, the egress policy is a table of the sandbox's own network
// namespace, installed before the helper starts and so before anything in
// the sandbox runs:
//
//	table inet bothy {
//	  chain output { type filter hook output priority filter; policy accept;
//	    oifname "lo" accept
//	    ct state established,related accept
//	    ip daddr ALLOWED [meta l4proto tcp|udp th dport PORT] accept …
//	    drop (a local packet dropped: the sending call fails with EPERM)
//	  }
//	  chain udp-in  { type nat hook prerouting priority dstnat; iifname eth0 udp dport HOSTPORT redirect to :PORT … }
//	  chain udp-out { type nat hook output priority dstnat; ip daddr 127.0.0.1 udp dport HOSTPORT redirect to :PORT … }
//	}
//
// The two nat chains publish UDP ports through pasta, whose UDP port
// translation is broken in Debian 12's version (a datagram to HOSTPORT
// never reaches PORT): pasta forwards HOSTPORT to the same port inside,
// where the rule takes it to PORT.
//
// The sandbox cannot change it: that takes CAP_NET_ADMIN in the user
// namespace owning the network namespace, which its processes do not have
// (a user namespace they create gives them capabilities over namespaces
// they create, not this one). Nor can it go around it as long as it lacks
// CAP_NET_RAW: a packet socket's frames skip the output hook and reach the
// helper directly. The plan must therefore drop CAP_NET_RAW from a
// rootless sandbox with a deny or allow-list policy (the bridge enforces
// the policy on the host instead, where raw frames are checked too).

// CapDrop returns the capabilities a sandbox must not have for its egress
// policy to hold: with a helper the policy is in the sandbox's namespace,
// and a packet socket (CAP_NET_RAW, in Docker's default set) sends frames
// that no output hook sees, straight to the helper; the bridge checks
// every frame on the host. The plan removes them from the sandbox's
// capability set, and refuses --cap-add of them with a denying policy.
func CapDrop(driver Driver, e Egress) []string {
	if e.Deny && driver != DriverBridge {
		return []string{"CAP_NET_RAW"}
	}
	return nil
}

// netnsRules is what the sandbox's own table holds.
type netnsRules struct {
	// Egress is installed when it denies.
	Egress Egress `json:"egress"`
	// Redirects maps a published UDP port's host port to its port.
	Redirects []Port `json:"redirects,omitempty"`
}

func (r netnsRules) empty() bool { return !r.Egress.Deny && len(r.Redirects) == 0 }

// helperRules are the rules a helper's sandbox gets in its namespace: its
// egress policy and, with pasta, the redirects of its published UDP ports
// (for ports whose host port is not chosen yet, as at plan time, the
// redirect a chosen one may need).
func helperRules(driver Driver, e Egress, ports []Port) netnsRules {
	r := netnsRules{Egress: e}
	if driver == DriverPasta {
		r.Redirects = pastaRedirects(ports)
	}
	return r
}

// installNetnsRules installs r in the network namespace nsfd. As root it
// talks netlink in that namespace itself; rootless it cannot enter the
// namespace (a user namespace can only be joined by a single-threaded
// process), so it runs exe's rule installer there under nsenter(1), which
// joins the owning user namespace first.
func installNetnsRules(ctx context.Context, exe string, nsfd, userns *os.File, r netnsRules) error {
	if os.Geteuid() == 0 {
		c, err := nftables.New(nftables.WithNetNSFd(int(nsfd.Fd())))
		if err != nil {
			return fmt.Errorf("nftables in the sandbox's namespace: %w", err)
		}
		return writeNetnsRules(c, r)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("rules in the sandbox's namespace: rootless they need nsenter (util-linux): %w", err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if exe == "/proc/self/exe" { // nsenter's would be nsenter
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("rules in the sandbox's namespace: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, nsenter, "--user="+procFD(3), "--net="+procFD(4), "--preserve-credentials", "--", exe, rulesArg)
	cmd.ExtraFiles = []*os.File{userns, nsfd}
	cmd.Stdin = bytes.NewReader(data)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("install rules in the sandbox's namespace: %v: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// rulesMain is the rule installer, run in the sandbox's user and network
// namespaces; the policy is on stdin.
func rulesMain() int {
	var r netnsRules
	if err := json.NewDecoder(os.Stdin).Decode(&r); err != nil {
		fmt.Fprintln(os.Stderr, "read rules:", err)
		return 2
	}
	c, err := nftables.New()
	if err == nil {
		err = writeNetnsRules(c, r)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// writeNetnsRules writes the table, replacing one of the same name.
func writeNetnsRules(c *nftables.Conn, r netnsRules) error {
	t := &nftables.Table{Name: DefaultInstance, Family: nftables.TableFamilyINet}
	if tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet); err == nil {
		for _, x := range tables {
			if x.Name == t.Name {
				c.DelTable(t)
			}
		}
	}
	c.AddTable(t)
	policy := nftables.ChainPolicyAccept
	if r.Egress.Deny {
		ch := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &policy})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: rule(ifIs(expr.MetaKeyOIFNAME, "lo"), one(accept()))})
		for _, e := range egressRules(r.Egress, drop()) {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e})
		}
	}
	if len(r.Redirects) > 0 {
		in := c.AddChain(&nftables.Chain{Name: "udp-in", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &policy})
		out := c.AddChain(&nftables.Chain{Name: "udp-out", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &policy})
		for _, p := range r.Redirects {
			to := redirect(p.ContainerPort)
			c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: rule(ipv4(), ifIs(expr.MetaKeyIIFNAME, helperIfname), l4proto(p.Proto), dportIs(p.HostPort), to)})
			c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: rule(ipv4(), addrIs(daddr, loopbackAddr), l4proto(p.Proto), dportIs(p.HostPort), to)})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install rules in the sandbox's namespace: %w", err)
	}
	return nil
}
