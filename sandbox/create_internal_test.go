package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/network"
)

// leftovers lists what a sandbox creation can leave in m's trees: state
// directories (temporary ones included), upper directories, names, and
// disk images.
func leftovers(t *testing.T, m *Manager) []string {
	t.Helper()
	var left []string
	for _, dir := range []string{m.paths.sandboxes(), m.paths.uppers(), m.paths.names(), filepath.Join(m.paths.Data, "disks")} {
		entries, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range entries {
			left = append(left, filepath.Join(dir, e.Name()))
		}
	}
	return left
}

// volumesFree reports whether nothing holds the volumes' lock.
func volumesFree(t *testing.T, m *Manager) bool {
	t.Helper()
	f, err := os.Open(filepath.Join(m.paths.Volumes(), volumeLock))
	if os.IsNotExist(err) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// fullOptions asks for what makes the most on the host: a name, a named
// volume, an overlay volume, a tmpfs, a main command.
func fullOptions(t *testing.T) CreateOptions {
	return CreateOptions{Image: "busybox", Name: "full", Cmd: []string{"sleep", "1"},
		Volumes: []string{"volume:cache:/cache", t.TempDir() + ":/src:overlay"}, Tmpfs: []string{"/scratch"}}
}

// TestCreateFailureUndoes: whatever step of a creation fails — the
// launcher's start, its run, the bundle after the launcher started, a
// context cancelled while the launcher runs — everything the creation made
// is removed before Create returns (state and upper directories, name,
// volume directories), what it held is let go (image store, volume lock),
// and a launcher that was never told to run is aborted.
func TestCreateFailureUndoes(t *testing.T) {
	launcherFails := errors.New("launcher failed: no such thing")
	for _, tc := range []struct {
		name   string
		fake   func(*fakeLauncher)
		opts   func(*CreateOptions)
		cancel bool
		want   string
		// started, ran, aborted: the launcher's.
		started, ran, aborted int
	}{
		{name: "launcher does not start", fake: func(l *fakeLauncher) { l.startErr = launcherFails },
			want: "no such thing", started: 1},
		{name: "launcher fails", fake: func(l *fakeLauncher) { l.runErr = launcherFails },
			want: "no such thing", started: 1, ran: 1},
		{name: "bundle refused", opts: func(o *CreateOptions) { o.Workdir = "relative" },
			want: "must be absolute", started: 1, aborted: 1},
		{name: "cancelled while the launcher runs", fake: func(l *fakeLauncher) { l.block = true }, cancel: true,
			want: "context deadline exceeded", started: 1, ran: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, store, l := fakeManager(t)
			if tc.fake != nil {
				tc.fake(l)
			}
			opts := fullOptions(t)
			if tc.opts != nil {
				tc.opts(&opts)
			}
			ctx := context.Background()
			if tc.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
			}
			sb, err := m.Create(ctx, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create = %v, %v; want an error saying %q", sb, err, tc.want)
			}
			if left := leftovers(t, m); len(left) != 0 {
				t.Errorf("a failed creation left %v", left)
			}
			if list, err := m.List(context.Background()); err != nil || len(list) != 0 {
				t.Errorf("ps -a after a failed creation: %v %v", list, err)
			}
			if store.holds != 1 || store.releases != 1 {
				t.Errorf("image store held %d times, released %d", store.holds, store.releases)
			}
			if !volumesFree(t, m) {
				t.Error("the volumes' lock is still held")
			}
			if l.started != tc.started || l.ran != tc.ran || l.aborted != tc.aborted {
				t.Errorf("launcher started %d, ran %d, aborted %d; want %d %d %d", l.started, l.ran, l.aborted, tc.started, tc.ran, tc.aborted)
			}
			// The name is free again.
			l.runErr, l.startErr, l.block = nil, nil, false
			opts.Workdir = ""
			sb, err = m.Create(context.Background(), opts)
			if err != nil {
				t.Fatalf("the same creation after the failure: %v", err)
			}
			if err := m.Remove(context.Background(), sb.ID, true); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCreateRefusedMakesNothing: a creation refused while it decides (a bad
// name, network, volume, limit, capability, image) makes nothing on the
// host, starts no launcher and holds nothing.
func TestCreateRefusedMakesNothing(t *testing.T) {
	for _, tc := range []struct {
		opts CreateOptions
		want string
	}{
		{CreateOptions{Image: "busybox", Name: "bad name/.."}, "invalid sandbox name"},
		{CreateOptions{Image: "busybox", APIKey: "with space"}, "invalid API key"},
		{CreateOptions{Image: "busybox", Network: network.Options{Mode: "nosuch"}}, "unknown network mode"},
		{CreateOptions{Image: "busybox", Volumes: []string{"/nonexistent/dir:/x"}}, "host path /nonexistent/dir"},
		{CreateOptions{Image: "busybox", Volumes: []string{"volume:v:/proc"}}, "/proc"},
		{CreateOptions{Image: "busybox", Limits: Limits{Memory: 1 << 20}}, "minimum is 6MiB"},
		{CreateOptions{Image: "busybox", Security: Security{CapAdd: []string{"CAP_NOPE"}}}, "unknown capability"},
		{CreateOptions{Image: "nosuch:image"}, "not found"},
	} {
		m, store, l := fakeManager(t)
		if _, err := m.Create(context.Background(), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Create(%+v) = %v, want an error saying %q", tc.opts, err, tc.want)
		}
		if left := leftovers(t, m); len(left) != 0 {
			t.Errorf("%q: made %v", tc.want, left)
		}
		if l.started != 0 || store.holds != store.releases || !volumesFree(t, m) {
			t.Errorf("%q: launcher started %d, store held %d released %d, volumes free %v", tc.want, l.started, store.holds, store.releases, volumesFree(t, m))
		}
	}
}

// TestCreateSteps: a creation whose launcher starts a process of the
// test's own as PID 1 runs every step in order: the record, launch request
// and bundle are written before the launcher is told to run, the /etc files
// are the network plan's, the record names PID 1 and no launcher, and
// removal leaves nothing (PID 1 killed and reaped).
func TestCreateSteps(t *testing.T) {
	m, store, l := fakeManager(t)
	sb, err := m.Create(context.Background(), fullOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if !l.state || !l.launchReq || !l.bundle || l.aborted != 0 {
		t.Errorf("at run: state %v, launch request %v, bundle %v; aborted %d", l.state, l.launchReq, l.bundle, l.aborted)
	}
	if sb.Status != StatusRunning || sb.Pid == 0 || sb.LauncherPid != 0 || sb.Name != "full" || sb.Network != "none" || sb.ImageDigest != busyboxLike().Digest.String() {
		t.Errorf("record: %+v", sb)
	}
	if host, err := os.ReadFile(filepath.Join(sb.Dir, "etc", "hostname")); err != nil || string(host) != "full\n" {
		t.Errorf("/etc/hostname: %q %v", host, err)
	}
	if store.holds != 1 || store.releases != 1 || !volumesFree(t, m) {
		t.Errorf("after create: store held %d released %d, volumes free %v", store.holds, store.releases, volumesFree(t, m))
	}
	if got, err := m.Get(context.Background(), "full"); err != nil || got.ID != sb.ID {
		t.Errorf("Get by name: %v %v", got, err)
	}
	if err := m.Remove(context.Background(), sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, m); len(left) != 0 {
		t.Errorf("removal left %v", left)
	}
	if alive(sb.Pid, sb.PidStart) {
		t.Errorf("PID 1 (%d) survived the removal", sb.Pid)
	}
}

// TestSetupNetworkStep: a network plan with a setup has it run with the
// sandbox as the mode sees it (its directories, the launcher to join), and
// its failure fails the creation naming the mode; a plan without one (none,
// host) runs nothing.
func TestSetupNetworkStep(t *testing.T) {
	m, _, _ := fakeManager(t)
	c := &creation{m: m, id: newID(), sb: &Sandbox{LauncherPid: 4242}}
	var got network.Sandbox
	c.net = &network.Plan{Mode: "test", Setup: func(ctx context.Context, sb network.Sandbox) error {
		got = sb
		return errors.New("no veth today")
	}}
	err := c.setupNetwork(context.Background())
	if err == nil || !strings.Contains(err.Error(), "set up network test: no veth today") {
		t.Errorf("setup error: %v", err)
	}
	want := network.Sandbox{ID: c.id, Dir: m.paths.dir(c.id), StateRoot: m.paths.State, Init: m.opts.Init, LauncherPid: 4242}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("setup saw %+v, want %+v", got, want)
	}
	c.net = &network.Plan{Mode: network.None}
	if err := c.setupNetwork(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestAttachNetworkStep: a plan that attaches a network has its Attach run
// with the sandbox's container init and the host's network settings; the
// attachment is in the sandbox's record (written with its PID 1, by launch)
// and its nameservers in resolv.conf before the init may go on; a failing
// Attach fails the launch with its error, recording nothing.
func TestAttachNetworkStep(t *testing.T) {
	m, _, _ := fakeManager(t)
	m.opts.Network = network.Config{Instance: "tst", PortRange: network.PortRange{First: 40000, Last: 40010}}
	c := &creation{m: m, id: newID()}
	c.dir = m.paths.dir(c.id)
	if err := os.MkdirAll(filepath.Join(c.dir, "etc"), 0o700); err != nil {
		t.Fatal(err)
	}
	c.sb = &Sandbox{ID: c.id}
	var got network.Sandbox
	port := network.Port{HostIP: network.DefaultHostIP, HostPort: 40003, ContainerPort: 8000, Proto: "tcp"}
	c.net = &network.Plan{Mode: "test", Attach: func(ctx context.Context, sb network.Sandbox) (*network.Attachment, error) {
		got = sb
		return &network.Attachment{ID: sb.ID, DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3")}, Ports: []network.Port{port}}, nil
	}}
	if err := c.attachNetwork(context.Background(), 4242); err != nil {
		t.Fatal(err)
	}
	if got.Pid != 4242 || got.ID != c.id || got.StateRoot != m.paths.State || got.Config.Instance != "tst" {
		t.Errorf("attach saw %+v", got)
	}
	if ports := c.sb.Ports(); len(ports) != 1 || ports[0] != port || c.attached != c.sb.NetworkAttachment {
		t.Errorf("recorded ports: %v", ports)
	}
	if data, err := os.ReadFile(filepath.Join(c.dir, "etc", "resolv.conf")); err != nil || string(data) != "nameserver 10.0.2.3\n" {
		t.Errorf("resolv.conf: %q %v", data, err)
	}

	c2 := &creation{m: m, id: newID(), dir: c.dir, sb: &Sandbox{}}
	c2.net = &network.Plan{Mode: "test", Attach: func(context.Context, network.Sandbox) (*network.Attachment, error) {
		return nil, errors.New("attach network of sandbox x: no free port")
	}}
	if err := c2.attachNetwork(context.Background(), 4242); err == nil || err.Error() != "attach network of sandbox x: no free port" {
		t.Errorf("failing attach: %v", err)
	}
	if c2.attached != nil || c2.sb.NetworkAttachment != nil {
		t.Error("a failed attach was recorded")
	}
}

// TestPrepareNetworkStep: a plan that prepares its attachment has Prepare
// run before the container exists, with the sandbox as the mode sees it;
// the prepared attachment's nameservers and network information are in the
// sandbox's /etc then, and Attach gets it (sb.Prepared) and writes them no
// more; a failing Prepare fails the creation with its error.
func TestPrepareNetworkStep(t *testing.T) {
	m, _, _ := fakeManager(t)
	c := &creation{m: m, id: newID(), sb: &Sandbox{}}
	c.dir = m.paths.dir(c.id)
	if err := os.MkdirAll(filepath.Join(c.dir, "etc"), 0o700); err != nil {
		t.Fatal(err)
	}
	prepared := &network.Attachment{ID: c.id, Driver: network.DriverBridge, Address: netip.MustParsePrefix("10.77.0.9/16"),
		DNS: []netip.Addr{netip.MustParseAddr("192.0.2.53")}}
	var attachSaw *network.Attachment
	c.net = &network.Plan{Mode: "test",
		Prepare: func(ctx context.Context, sb network.Sandbox) (*network.Attachment, error) {
			if sb.ID != c.id || sb.StateRoot != m.paths.State || sb.Pid != 0 {
				t.Errorf("prepare saw %+v", sb)
			}
			return prepared, nil
		},
		Attach: func(ctx context.Context, sb network.Sandbox) (*network.Attachment, error) {
			attachSaw = sb.Prepared
			a := *sb.Prepared
			a.DNS = []netip.Addr{netip.MustParseAddr("192.0.2.99")} // not written: Prepare's are
			return &a, nil
		}}
	if err := c.prepareNetwork(context.Background()); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(c.dir, "etc", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if got := read("resolv.conf"); got != "nameserver 192.0.2.53\n" {
		t.Errorf("resolv.conf after prepare: %q", got)
	}
	if got := read(networkInfoFile); !strings.Contains(got, `"address":"10.77.0.9/16"`) || !strings.Contains(got, `"driver":"bridge"`) {
		t.Errorf("network information after prepare: %s", got)
	}
	if err := c.attachNetwork(context.Background(), 4242); err != nil {
		t.Fatal(err)
	}
	if attachSaw != prepared || c.prepared != nil || c.attached == nil {
		t.Errorf("attach saw %p, want the prepared %p; prepared after attach %v", attachSaw, prepared, c.prepared)
	}
	if got := read("resolv.conf"); got != "nameserver 192.0.2.53\n" {
		t.Errorf("resolv.conf after attach: %q", got)
	}

	c2 := &creation{m: m, id: newID(), dir: c.dir, sb: &Sandbox{}}
	c2.net = &network.Plan{Mode: "test", Prepare: func(context.Context, network.Sandbox) (*network.Attachment, error) {
		return nil, errors.New("prepare network of sandbox x: no free address")
	}}
	if err := c2.prepareNetwork(context.Background()); err == nil || err.Error() != "prepare network of sandbox x: no free address" {
		t.Errorf("failing prepare: %v", err)
	}
	if c2.prepared != nil {
		t.Error("a failed prepare was kept")
	}
}

// TestPreparedBridgeUndone (root: the bridge driver's lease, bridge and
// nftables rules are real): a creation whose launch fails after the
// network was prepared, or whose context ends meanwhile, leaves nothing of
// it: no lease, no bridge, no nftables table.
func TestPreparedBridgeUndone(t *testing.T) {
	if os.Geteuid() != 0 {
		// Unprivileged, the bridge driver (which needs CAP_NET_ADMIN on
		// the host) is refused before it makes anything.
		_, err := network.Prepare(context.Background(), network.AttachOptions{ID: "s" + newID()[:8], Driver: network.DriverBridge, StateDir: t.TempDir()})
		if !errors.Is(err, network.ErrBridgeNeedsRoot) {
			t.Errorf("Prepare of the bridge driver, unprivileged: %v, want %v", err, network.ErrBridgeNeedsRoot)
		}
		return
	}
	for _, tc := range []struct {
		name string
		fake func(*fakeLauncher)
	}{
		{"launcher fails", func(l *fakeLauncher) { l.runErr = errors.New("launcher failed: no such thing") }},
		{"cancelled", func(l *fakeLauncher) { l.block = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _, l := fakeManager(t)
			instance := fmt.Sprintf("c%04x", rand.IntN(1<<16))
			m.opts.Network = network.Config{Instance: instance, Subnet: netip.MustParsePrefix(fmt.Sprintf("10.191.%d.0/24", rand.IntN(250))),
				PortRange: network.PortRange{First: 39000, Last: 39099}}
			tc.fake(l)
			var prepared bool
			l.atRun = func() {
				// Prepare has run: its lease and bridge are there.
				leases, _ := os.ReadDir(filepath.Join(network.StateDir(m.paths.State), "leases"))
				_, err := net.InterfaceByName(instance + "0")
				prepared = len(leases) == 1 && err == nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			opts := CreateOptions{Image: "busybox", Network: network.Options{Mode: "bridge", Publish: []string{"8000"}}}
			if _, err := m.Create(ctx, opts); err == nil {
				t.Fatal("Create succeeded")
			}
			if !prepared {
				t.Error("the network was not prepared when the launcher ran")
			}
			leases, _ := os.ReadDir(filepath.Join(network.StateDir(m.paths.State), "leases"))
			if len(leases) > 0 {
				t.Errorf("leases left: %v", leases)
			}
			if _, err := net.InterfaceByName(instance + "0"); err == nil {
				t.Errorf("bridge %s0 left", instance)
			}
			if out, err := exec.Command("nft", "list", "tables").Output(); err != nil || strings.Contains(string(out), " "+instance+"\n") {
				t.Errorf("nftables table %s left (or nft failed: %v): %s", instance, err, out)
			}
		})
	}
}
