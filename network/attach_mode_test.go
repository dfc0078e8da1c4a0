package network

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// TestPlanAttached: the attached modes plan a namespace of the sandbox's
// own with an Attach, pick the driver (root: the bridge; rootless: a
// helper), pin the allow-list's names in /etc/hosts, drop CAP_NET_RAW when
// a helper enforces a denying policy, and refuse what cannot work before
// anything is made, saying why.
func TestPlanAttached(t *testing.T) {
	requireTools(t, "pasta", "slirp4netns")
	ctx := context.Background()
	tg := Target{ID: "abc", Hostname: "box", Rootless: rootless()}
	p, err := NewPlan(ctx, Options{Mode: "bridge", Publish: []string{"8000", "127.0.0.1::9000/udp"}, EgressAllow: []string{"localhost:80"}}, tg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != Bridge || p.Attach == nil || p.Namespace == nil || p.Namespace.Type != specs.NetworkNamespace || p.Namespace.Path != "" {
		t.Errorf("bridge plan: %+v", p)
	}
	if !strings.Contains(p.Etc.Hosts, "127.0.1.1\tbox\n") || !strings.Contains(p.Etc.Hosts, "127.0.0.1\tlocalhost\n") || p.Etc.ResolvConf != "" {
		t.Errorf("bridge plan's /etc: %+v", p.Etc)
	}
	// A denying policy: rootless, UDP ports made the driver pasta, whose
	// policy is in the namespace: no raw sockets. As root the bridge
	// checks every frame on the host.
	if want := rootless(); slices.Contains(p.CapDrop, "CAP_NET_RAW") != want {
		t.Errorf("bridge plan with an allow-list drops %v (rootless %v)", p.CapDrop, want)
	}
	p, err = NewPlan(ctx, Options{Mode: "pasta"}, tg)
	if err != nil || p.Mode != Pasta || p.CapDrop != nil {
		t.Errorf("pasta plan: %+v %v", p, err)
	}
	p, err = NewPlan(ctx, Options{Mode: "slirp4netns", Egress: "deny"}, tg)
	if err != nil || p.Mode != Slirp4netns || !slices.Equal(p.CapDrop, []string{"CAP_NET_RAW"}) {
		t.Errorf("slirp4netns deny plan: %+v %v", p, err)
	}
	named, err := NewPlan(ctx, Options{Mode: "bridge:seg"}, tg)
	if rootless() {
		if err == nil || !strings.Contains(err.Error(), "named networks need the bridge driver (root)") {
			t.Errorf("bridge:seg rootless: %v", err)
		}
	} else if err != nil || named.Mode != "bridge:seg" {
		t.Errorf("bridge:seg as root: %+v %v", named, err)
	}
	for _, c := range []struct {
		opts Options
		why  string
	}{
		{Options{Mode: "pasta:x"}, "takes no argument"},
		{Options{Mode: "bridge:a/b"}, "invalid network name"},
		{Options{Mode: "bridge", Publish: []string{"80/sctp"}}, "is not tcp or udp"},
		{Options{Mode: "bridge", Publish: []string{"8080:80", "8080:81"}}, "host port 8080/tcp given twice"},
		{Options{Mode: "bridge", Egress: "maybe"}, "want allow or deny"},
		{Options{Mode: "bridge", Egress: "allow", EgressAllow: []string{"10.0.0.0/8"}}, "--egress allow admits everything"},
		{Options{Mode: "bridge", EgressAllow: []string{"no-such-host.invalid"}}, "resolve --egress-allow no-such-host.invalid"},
		{Options{Mode: "slirp4netns", Publish: []string{"53/udp"}}, "use --network pasta"},
		{Options{Mode: "host", Publish: []string{"80"}}, "--publish needs a network of the sandbox's own"},
		{Options{Mode: "none", Publish: []string{"80/udp"}}, "--network none publishes TCP ports only"},
		{Options{Mode: "none", Publish: []string{"80"}, PortDriver: "nftables"}, "--network none publishes through builtin only"},
		{Options{Mode: "bridge", Publish: []string{"80"}, PortDriver: "tcp"}, "unknown port driver \"tcp\""},
		{Options{Mode: "pasta", Publish: []string{"80"}, PortDriver: "slirp4netns"}, "--port-driver slirp4netns does not go with the pasta network driver"},
		{Options{Mode: "none", PortDriver: "builtin"}, "--port-driver needs published ports"},
		{Options{Mode: "host", Egress: "deny"}, "--egress and --egress-allow need --network bridge"},
		{Options{Mode: "none", EgressAllow: []string{"10.0.0.1"}}, "--egress and --egress-allow need --network bridge"},
	} {
		if _, err := NewPlan(ctx, c.opts, tg); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("NewPlan(%+v) = %v, want an error saying %q", c.opts, err, c.why)
		}
	}
	if !rootless() {
		// Root may ask for a helper; a rootless caller asking for the
		// bridge driver gets a helper (ChooseDriver), so the refusal of
		// the driver itself is the components' (TestBridgeDefaultOrRefused).
		return
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := NewPlan(ctx, Options{Mode: "bridge"}, tg); err == nil || !strings.Contains(err.Error(), "needs slirp4netns or pasta") {
		t.Errorf("bridge without helpers installed: %v", err)
	}
	if _, err := NewPlan(ctx, Options{Mode: "pasta"}, tg); err == nil || !strings.Contains(err.Error(), "Debian package passt") {
		t.Errorf("pasta not installed: %v", err)
	}
}

// TestPlanAttachTeardown: the plan's Attach connects a sandbox's namespace
// (root: the bridge, in a test instance; rootless: the default helper),
// and the teardown every removal runs removes it all, from the recorded
// attachment or, without one, from the lease on disk; Prune reclaims what a
// sandbox that is gone left.
func TestPlanAttachTeardown(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	var cfg Config
	var e *bridgeEnv
	if !rootless() {
		e = newBridgeEnv(t)
		cfg = Config{Instance: e.instance, Subnet: e.subnet, NetworkPool: e.pool, PortRange: testPortRange, DNS: []netip.Addr{e.upAddr}}
	} else {
		requireTools(t, "slirp4netns", "nsenter")
		requireTun(t)
		cfg = Config{PortRange: testPortRange}
	}
	attach := func(id string, sb *sandboxNS) *Attachment {
		t.Helper()
		// The stack's port forwarding (rootless): the builtin driver
		// needs an executor (package sandbox tests it).
		pd := ""
		if rootless() {
			pd = "slirp4netns"
		}
		p, err := NewPlan(ctx, Options{Mode: "bridge", Publish: []string{"8080"}, PortDriver: pd}, Target{ID: id, Hostname: "box", Rootless: rootless()})
		if err != nil {
			t.Fatal(err)
		}
		a, err := p.Attach(ctx, Sandbox{ID: id, StateRoot: root, Pid: sb.Pid, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if len(a.Ports) != 1 || a.Ports[0].HostPort < testPortRange.First || a.Ports[0].HostPort > testPortRange.Last || a.StateDir != StateDir(root) {
			t.Errorf("attachment: %+v", a)
		}
		return a
	}
	// From the record, and from the lease alone.
	for _, recorded := range []bool{true, false} {
		sb := newSandboxNS(t)
		sb.serve("serve-http", "0.0.0.0:8080")
		id := "s" + randHex(8)
		a := attach(id, sb)
		if out, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", a.Ports[0].HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
			t.Errorf("published port: %q %v", out, err)
		}
		tsb := Sandbox{ID: id, StateRoot: root}
		if recorded {
			tsb.Attachment = a
		}
		if err := Teardown(ctx, tsb); err != nil {
			t.Fatal(err)
		}
		assertGone(t, a)
		if !rootless() && a.HostVeth != "" {
			if _, err := net.InterfaceByName(a.HostVeth); err == nil {
				t.Errorf("veth %s left", a.HostVeth)
			}
		}
	}
	// A sandbox that is gone: Prune.
	sb := newSandboxNS(t)
	id := "s" + randHex(8)
	a := attach(id, sb)
	sb.Stop()
	ids, err := Prune(ctx, root)
	if err != nil || !slices.Equal(ids, []string{id}) {
		t.Fatalf("Prune: %v %v", ids, err)
	}
	assertGone(t, a)
	if _, err := Prune(ctx, t.TempDir()); err != nil {
		t.Errorf("Prune without network state: %v", err)
	}
	if e != nil {
		e.dir = StateDir(root)
		e.assertClean()
	}
}
