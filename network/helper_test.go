package network

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var helperDrivers = []Driver{DriverPasta, DriverSlirp4netns}

// helperOptions returns options to attach sb through driver.
func helperOptions(t *testing.T, driver Driver, sb *sandboxNS, dir string) AttachOptions {
	t.Helper()
	requireTools(t, string(driver), "nsenter")
	requireTun(t)
	// The stack's own port forwarding: the builtin driver needs an
	// executor (package sandbox tests it).
	return AttachOptions{ID: "s" + randHex(8), Pid: sb.Pid, Driver: driver, PortDriver: PortDriver(driver), StateDir: dir, PortRange: testPortRange}
}

func attachT(t testing.TB, o AttachOptions) *Attachment {
	t.Helper()
	a, err := Attach(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Detach(context.Background(), a) })
	return a
}

// assertGone fails if anything Attach made for a is left: the lease, the
// helper directory, the watcher or the helper process, the bound host
// ports.
func assertGone(t *testing.T, a *Attachment) {
	t.Helper()
	assertNoLeases(t, a.StateDir)
	if a.Helper != nil {
		for _, p := range []Process{a.Helper.Watcher, a.Helper.Process} {
			if p.Alive() {
				t.Errorf("process %d is still running", p.Pid)
			}
		}
	}
	if a.Forwarder != nil && a.Forwarder.Process.Alive() {
		t.Errorf("port forwarder %d is still running", a.Forwarder.Process.Pid)
	}
	for _, p := range a.Ports {
		if !portFree(p.Proto, p.HostIP, p.HostPort) {
			t.Errorf("host port %s is still bound", p)
		}
	}
}

// A sandbox on a helper reaches the host's services on the host's
// addresses (the helper connects from the host) and, with HostLoopback
// only, the host's loopback through the gateway address 10.0.2.2; a
// sandbox left on "none" reaches nothing.
func TestHelperOutbound(t *testing.T) {
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			hostIP := hostAddress(t)
			srv := hostServer(t, hostIP.String()+":0")
			loSrv := hostServer(t, "127.0.0.1:0")
			viaGateway := fmt.Sprintf("http://%s:%d/", helperGateway, loSrv.Port())

			sb := newSandboxNS(t)
			a := attachT(t, helperOptions(t, driver, sb, stateDir(t)))
			if a.Address != helperAddress || a.Gateway != helperGateway || a.ResolvConf() != "nameserver 10.0.2.3\n" {
				t.Errorf("attachment: %+v", a)
			}
			if err := Check(a); err != nil {
				t.Fatal(err)
			}
			out, err := sb.run("fetch", "http://"+srv.String()+"/")
			if err != nil || !strings.HasPrefix(out, "hello ") {
				t.Fatalf("fetch from the host's address: %q %v", out, err)
			}
			if out, err := sb.run("fetch", viaGateway); err == nil {
				t.Errorf("the host's loopback is reachable without HostLoopback: %q", out)
			}

			lo := newSandboxNS(t)
			o := helperOptions(t, driver, lo, stateDir(t))
			o.HostLoopback = true
			attachT(t, o)
			if out, err := lo.run("fetch", viaGateway); err != nil || !strings.HasPrefix(out, "hello 127.0.0.1:") {
				t.Errorf("with HostLoopback, the host's loopback through the gateway: %q %v", out, err)
			}

			none := newSandboxNS(t)
			if out, err := none.run("fetch", "http://"+srv.String()+"/"); err == nil {
				t.Errorf("a sandbox without network fetched %q", out)
			}
		})
	}
}

// Published ports, TCP and UDP, on the host's loopback by default and on
// every address when asked; allocated and explicit host ports.
func TestHelperPublish(t *testing.T) {
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			sb := newSandboxNS(t)
			sb.serve("serve-http", "0.0.0.0:8080")
			sb.serve("udp-echo", "0.0.0.0:5353")
			o := helperOptions(t, driver, sb, stateDir(t))
			explicit := testPortRange.Last - uint16(len(driver))
			o.Publish = []Port{
				{HostIP: DefaultHostIP, ContainerPort: 8080, Proto: "tcp"},
				{HostIP: DefaultHostIP, ContainerPort: 5353, Proto: "udp"},
				{HostIP: netip.IPv4Unspecified(), HostPort: explicit, ContainerPort: 8080, Proto: "tcp"},
			}
			if driver == DriverSlirp4netns {
				// libslirp answers published UDP only through the
				// gateway, the host's loopback.
				if _, err := Attach(context.Background(), o); err == nil || !strings.Contains(err.Error(), "cannot publish UDP ports unless") {
					t.Fatalf("slirp4netns publishing UDP without HostLoopback: %v", err)
				}
				o.HostLoopback = true
			}
			a := attachT(t, o)
			tcp, udp, all := a.Ports[0], a.Ports[1], a.Ports[2]
			if tcp.HostPort == 0 || udp.HostPort == 0 || all.HostPort != explicit {
				t.Fatalf("ports: %v", a.Ports)
			}
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
			if err := Detach(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			assertGone(t, a)
		})
	}
}

// deny: nothing leaves, DNS included, but published ports answer; an
// allow-list admits its destination and nothing else.
func TestHelperEgress(t *testing.T) {
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			hostIP := hostAddress(t)
			allowed := hostServer(t, hostIP.String()+":0")
			other := hostServer(t, hostIP.String()+":0")
			dns := helperDNS.String() + ":53"

			sb := newSandboxNS(t)
			sb.serve("serve-http", "0.0.0.0:8080")
			o := helperOptions(t, driver, sb, stateDir(t))
			o.Egress = Egress{Deny: true}
			o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 8080, Proto: "tcp"}}
			a := attachT(t, o)
			if out, err := sb.run("fetch", "http://"+allowed.String()+"/"); err == nil {
				t.Errorf("deny: fetched %q", out)
			}
			if _, err := sb.run("udp-ask", dns, "query"); err == nil || !strings.Contains(err.Error(), "operation not permitted") {
				t.Errorf("deny: DNS to %s: %v, want the send refused", dns, err)
			}
			if out, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", a.Ports[0].HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
				t.Errorf("deny: published port: %q %v", out, err)
			}

			list := newSandboxNS(t)
			o = helperOptions(t, driver, list, stateDir(t))
			e, err := ParseEgress("", []string{allowed.String()})
			if err != nil {
				t.Fatal(err)
			}
			o.Egress = e
			attachT(t, o)
			if out, err := list.run("fetch", "http://"+allowed.String()+"/"); err != nil || !strings.HasPrefix(out, "hello ") {
				t.Errorf("allow-list: the allowed server: %q %v", out, err)
			}
			if out, err := list.run("fetch", "http://"+other.String()+"/"); err == nil {
				t.Errorf("allow-list: another port of the same host: %q", out)
			}
			if _, err := list.run("udp-ask", dns, "query"); err == nil || !strings.Contains(err.Error(), "operation not permitted") {
				t.Errorf("allow-list: DNS: %v, want the send refused", err)
			}
		})
	}
}

// The policy is out of the sandbox's reach: a process in its namespaces
// without CAP_NET_ADMIN cannot flush it, not even from a user namespace it
// creates, and the policy holds after the attempts.
func TestHelperEgressCannotBeChanged(t *testing.T) {
	requireTools(t, "nft", "setpriv", "unshare")
	hostIP := hostAddress(t)
	srv := hostServer(t, hostIP.String()+":0")
	sb := newSandboxNS(t)
	o := helperOptions(t, DriverPasta, sb, stateDir(t))
	o.Egress = Egress{Deny: true}
	attachT(t, o)
	for _, args := range [][]string{
		{"setpriv", "--bounding-set=-all", "--inh-caps=-all", "nft", "flush", "ruleset"},
		{"setpriv", "--bounding-set=-all", "--inh-caps=-all", "nft", "delete", "table", "inet", "bothy"},
		{"setpriv", "--bounding-set=-all", "--inh-caps=-all", "unshare", "--user", "--map-root-user", "nft", "flush", "ruleset"},
	} {
		out, err := sb.command(nil, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Operation not permitted") {
			t.Errorf("%v in the sandbox: %v: %s; want it refused", args, err, out)
		}
	}
	if out, err := sb.command(nil, "nft", "list", "table", "inet", "bothy").CombinedOutput(); err != nil || !strings.Contains(string(out), "drop") {
		t.Errorf("the policy's table, listed by its owner: %v: %s", err, out)
	}
	if out, err := sb.run("fetch", "http://"+srv.String()+"/"); err == nil {
		t.Errorf("deny after the attempts: fetched %q", out)
	}
}

// No helper outlives its sandbox: when the sandbox's process exits, the
// watcher kills the helper and says why; Detach then leaves nothing.
func TestHelperEndsWithSandbox(t *testing.T) {
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			sb := newSandboxNS(t)
			o := helperOptions(t, driver, sb, stateDir(t))
			o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 80, Proto: "tcp"}}
			a := attachT(t, o)
			sb.Stop()
			waitDead(t, a.Helper.Process)
			waitDead(t, a.Helper.Watcher)
			if err := Check(a); !errors.Is(err, ErrHelperExited) || !strings.Contains(err.Error(), "its sandbox exited") {
				t.Errorf("Check after the sandbox exited: %v", err)
			}
			if err := Detach(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			assertGone(t, a)
		})
	}
}

// slirp4netns given the sandbox's end (AttachOptions.End: the read end of
// a pipe whose write end only the sandbox's process holds) runs without a
// watcher: it serves the sandbox, and it ends by itself once that process
// has (slirp4netns's --exit-fd), or is reported when killed; Detach leaves
// nothing either way. With a port to publish, a watcher forwards it.
func TestHelperWithoutWatcher(t *testing.T) {
	hostIP := hostAddress(t)
	srv := hostServer(t, hostIP.String()+":0")
	for _, end := range []string{"sandbox exits", "helper killed", "port published"} {
		t.Run(end, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			sb := newSandboxNS(t, w)
			w.Close()
			defer r.Close()
			o := helperOptions(t, DriverSlirp4netns, sb, stateDir(t))
			o.End = r
			if end == "port published" {
				o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 80, Proto: "tcp"}}
			}
			worked := 0
			o.Working = func() {
				worked++
				if out, err := sb.run("fetch", "http://"+srv.String()+"/"); err != nil {
					t.Errorf("Working called before the network works: %q %v", out, err)
				}
			}
			a := attachT(t, o)
			if worked != 1 {
				t.Errorf("Working called %d times, want once", worked)
			}
			if end == "port published" {
				if !a.Helper.Watcher.Alive() {
					t.Errorf("no watcher with a port to publish: %+v", a.Helper)
				}
				return
			}
			if a.Helper.Watcher.Pid != 0 || !a.Helper.Process.Alive() {
				t.Fatalf("helper %+v, want slirp4netns running without a watcher", a.Helper)
			}
			if out, err := sb.run("fetch", "http://"+srv.String()+"/"); err != nil || !strings.HasPrefix(out, "hello ") {
				t.Fatalf("fetch from the host's address: %q %v", out, err)
			}
			if end == "helper killed" {
				if err := syscall.Kill(a.Helper.Process.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			} else {
				sb.Stop()
			}
			waitDead(t, a.Helper.Process)
			if err := Check(a); !errors.Is(err, ErrHelperExited) || !strings.Contains(err.Error(), "without a watcher") {
				t.Errorf("Check after the end: %v", err)
			}
			if err := Detach(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			assertGone(t, a)
		})
	}
}

// A helper that dies is reported, with its exit, and its sandbox is
// reported without network; killing the watcher kills the helper.
func TestHelperDeathReported(t *testing.T) {
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			sb := newSandboxNS(t)
			a := attachT(t, helperOptions(t, driver, sb, stateDir(t)))
			if err := syscall.Kill(a.Helper.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitDead(t, a.Helper.Watcher)
			if err := Check(a); !errors.Is(err, ErrHelperExited) || !strings.Contains(err.Error(), "signal: killed") {
				t.Errorf("Check after the helper was killed: %v", err)
			}
			if err := Detach(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			assertGone(t, a)

			sb2 := newSandboxNS(t)
			b := attachT(t, helperOptions(t, driver, sb2, stateDir(t)))
			if err := syscall.Kill(b.Helper.Watcher.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitDead(t, b.Helper.Process)
			if err := Check(b); !errors.Is(err, ErrHelperExited) {
				t.Errorf("Check after the watcher was killed: %v", err)
			}
			if err := Detach(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			assertGone(t, b)
		})
	}
}

// A helper that does not start in time is an error naming why, and leaves
// nothing; a host port something else holds is refused before.
func TestHelperStartFailure(t *testing.T) {
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			sb := newSandboxNS(t)
			o := helperOptions(t, driver, sb, stateDir(t))
			o.ReadyTimeout = time.Millisecond
			_, err := Attach(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), "start "+string(driver)) || !strings.Contains(err.Error(), "not ready after 1ms") {
				t.Fatalf("Attach with a 1 ms ready timeout: %v", err)
			}
			assertNoLeases(t, o.StateDir)

			busy := hostServer(t, "127.0.0.1:0")
			o = helperOptions(t, driver, sb, o.StateDir)
			o.Publish = []Port{{HostIP: DefaultHostIP, HostPort: busy.Port(), ContainerPort: 80, Proto: "tcp"}}
			if _, err := Attach(context.Background(), o); err == nil || !strings.Contains(err.Error(), "is in use on the host") {
				t.Fatalf("Attach with a taken port: %v", err)
			}
			o.Publish = []Port{{HostIP: netip.MustParseAddr("192.0.2.222"), ContainerPort: 80, Proto: "tcp"}}
			if _, err := Attach(context.Background(), o); err == nil || !strings.Contains(err.Error(), "192.0.2.222 is not an address of this host") {
				t.Fatalf("Attach publishing on a foreign address: %v", err)
			}
			assertNoLeases(t, o.StateDir)
		})
	}
}

// The CLI that attached is killed with SIGKILL; a later process detaches
// from the recorded attachment alone and nothing is left; the helper kept
// serving the sandbox meanwhile.
func TestHelperDetachAfterKill(t *testing.T) {
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			sb := newSandboxNS(t)
			sb.serve("serve-http", "0.0.0.0:8080")
			o := helperOptions(t, driver, sb, stateDir(t))
			o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 8080, Proto: "tcp"}}
			a := attachInChild(t, o)
			if out, err := fetch(fmt.Sprintf("http://127.0.0.1:%d/", a.Ports[0].HostPort)); err != nil || !strings.HasPrefix(out, "hello ") {
				t.Errorf("published port after the CLI was killed: %q %v", out, err)
			}
			if err := Detach(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			assertGone(t, a)
		})
	}
}

// attachInChild attaches in a child process (the CLI), reads the
// attachment it prints, and kills it with SIGKILL.
func attachInChild(t *testing.T, o AttachOptions) *Attachment {
	t.Helper()
	return inChild(t, "attach", o)
}

// inChild runs Attach ("attach") or Prepare ("prepare") in a child process
// that is killed once it has printed the attachment.
func inChild(t *testing.T, mode string, o AttachOptions) *Attachment {
	t.Helper()
	opts, _ := json.Marshal(o)
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "BOTHY_NETTEST="+mode, "BOTHY_NETTEST_OPTIONS="+string(opts))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var a Attachment
	derr := json.NewDecoder(bufio.NewReader(out)).Decode(&a)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if derr != nil {
		t.Fatalf("%s in a child: %v", mode, derr)
	}
	t.Cleanup(func() { _ = Detach(context.Background(), &a) })
	return &a
}

func waitDead(t testing.TB, p Process) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Alive() {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after 10 s", p.Pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Async: Attach returns with the helper starting; Wait completes it (the
// network then works) or, when the helper fails, undoes it all.
func TestHelperAsync(t *testing.T) {
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			hostIP := hostAddress(t)
			srv := hostServer(t, hostIP.String()+":0")
			sb := newSandboxNS(t)
			o := helperOptions(t, driver, sb, stateDir(t))
			o.Async = true
			a := attachT(t, o)
			if a.Helper.Watcher.Pid == 0 {
				t.Fatalf("no watcher recorded: %+v", a.Helper)
			}
			if err := a.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !a.Helper.Process.Alive() {
				t.Fatalf("helper after Wait: %+v", a.Helper)
			}
			if out, err := sb.run("fetch", "http://"+srv.String()+"/"); err != nil || !strings.HasPrefix(out, "hello ") {
				t.Errorf("fetch after Wait: %q %v", out, err)
			}

			sb2 := newSandboxNS(t)
			o = helperOptions(t, driver, sb2, stateDir(t))
			o.Async = true
			o.ReadyTimeout = time.Millisecond
			o.Publish = []Port{{HostIP: DefaultHostIP, ContainerPort: 80, Proto: "tcp"}}
			b, err := Attach(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Wait(context.Background()); err == nil || !strings.Contains(err.Error(), "start "+string(driver)) {
				t.Fatalf("Wait for a helper that is not ready in time: %v", err)
			}
			assertGone(t, b)
			if b.Helper.Watcher.Alive() {
				t.Error("the watcher runs on after the failed Wait")
			}
		})
	}
}

// udpSink records what arrives on addr (HOST:0).
func udpSink(t testing.TB, addr string) (netip.AddrPort, func() []string) {
	t.Helper()
	c, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var mu sync.Mutex
	var got []string
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, string(buf[:n]))
			mu.Unlock()
		}
	}()
	return c.LocalAddr().(*net.UDPAddr).AddrPort(), func() []string {
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// With a helper, the policy lives in the sandbox's namespace, where a
// packet socket's frames pass no output hook: CapDrop names CAP_NET_RAW,
// and without it the sandbox cannot open one. (With it, the frame reaches
// the host: logged, the reason for CapDrop.)
func TestHelperEgressRawFrames(t *testing.T) {
	requireTools(t, "setpriv")
	for _, driver := range helperDrivers {
		t.Run(string(driver), func(t *testing.T) {
			sink, got := udpSink(t, hostAddress(t).String()+":0")
			sb := newSandboxNS(t)
			o := helperOptions(t, driver, sb, stateDir(t))
			o.Egress = Egress{Deny: true}
			a := attachT(t, o)
			if d := CapDrop(driver, a.Egress); !slices.Equal(d, []string{"CAP_NET_RAW"}) {
				t.Fatalf("CapDrop = %v", d)
			}
			exe, _ := os.Executable()
			args := []string{a.Address.Addr().String(), sink.String(), "ff:ff:ff:ff:ff:ff"}
			out, err := sb.command([]string{"BOTHY_NETTEST=raw-udp"}, append([]string{"setpriv", "--bounding-set=-net_raw", "--inh-caps=-net_raw", exe}, args...)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "operation not permitted") {
				t.Errorf("packet socket without CAP_NET_RAW: %v: %s", err, out)
			}
			if g := got(); len(g) != 0 {
				t.Errorf("without CAP_NET_RAW, the host received %q", g)
			}
			_, _ = sb.run("raw-udp", args...)
			t.Logf("with CAP_NET_RAW, a raw frame through %s's deny policy: the host received %q", driver, got())
		})
	}
}

// A process in the caller's own network namespace is refused: a wrong pid
// never gets the host's namespace a tap, a veth or a policy.
func TestAttachRefusesOwnNamespace(t *testing.T) {
	dir := stateDir(t)
	for _, d := range benchDrivers() {
		_, err := Attach(context.Background(), AttachOptions{ID: "own", Pid: os.Getpid(), Driver: d, StateDir: dir, Egress: Egress{Deny: true}})
		if err == nil || !strings.Contains(err.Error(), "in this process's network namespace") {
			t.Errorf("%s on the caller's namespace: %v", d, err)
		}
	}
	assertNoLeases(t, dir)
}
