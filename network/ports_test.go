package network

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestParsePublish(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		in   string
		want Port
	}{
		{"8000", Port{HostIP: lo, ContainerPort: 8000, Proto: "tcp"}},
		{"8000/udp", Port{HostIP: lo, ContainerPort: 8000, Proto: "udp"}},
		{"9000:8000", Port{HostIP: lo, HostPort: 9000, ContainerPort: 8000, Proto: "tcp"}},
		{"0:8000", Port{HostIP: lo, ContainerPort: 8000, Proto: "tcp"}},
		{":8000", Port{HostIP: lo, ContainerPort: 8000, Proto: "tcp"}},
		{"0.0.0.0:9000:8000/tcp", Port{HostIP: netip.IPv4Unspecified(), HostPort: 9000, ContainerPort: 8000, Proto: "tcp"}},
		{"192.0.2.7::53/udp", Port{HostIP: netip.MustParseAddr("192.0.2.7"), ContainerPort: 53, Proto: "udp"}},
	} {
		got, err := ParsePublish(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParsePublish(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, why string }{
		{"", "no container port"},
		{"/tcp", "no container port"},
		{"8000/sctp", `protocol "sctp" is not tcp or udp`},
		{"0", "0 is not a port"},
		{"70000", "is not a port (1-65535)"},
		{"80-90", "port ranges are not supported"},
		{"127.0.0.1:80", `"127.0.0.1" is not a number`},
		{"a:b:c:80", "too many ':'"},
		{"[::1]:80:80", "IPv6 host addresses are not supported"},
		{"::80", "empty host address"},
		{"host:80:80", `"host" is not an IP address`},
		{"224.0.0.1:80:80", "cannot be bound"},
		{"8000/", `protocol "" is not tcp or udp`},
		{"-1", "port ranges are not supported"},
		{"+80", "is not a number"},
	} {
		_, err := ParsePublish(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "[IP:][HOSTPORT:]CONTAINERPORT") {
			t.Errorf("ParsePublish(%q) = %v; want an error saying %q and the syntax", tc.in, err, tc.why)
		}
	}
}

// FuzzParsePublish: any input gives a valid port or an error, never a
// panic, and a valid port prints back to itself.
func FuzzParsePublish(f *testing.F) {
	for _, s := range []string{"8000", "0.0.0.0:9000:8000/udp", "127.0.0.1::80", "[::1]:1:2", "1:2:3:4", "65536", "80/tcp/udp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePublish(s)
		if err != nil {
			return
		}
		if p.ContainerPort == 0 || !p.HostIP.Is4() || (p.Proto != "tcp" && p.Proto != "udp") {
			t.Fatalf("ParsePublish(%q) = %+v: invalid", s, p)
		}
		again, err := ParsePublish(p.String())
		if err != nil || again != p {
			t.Fatalf("ParsePublish(%q) = %+v, which prints as %q and parses as %+v, %v", s, p, p, again, err)
		}
	})
}

func TestParsePortRange(t *testing.T) {
	if r, err := ParsePortRange("20000-20010"); err != nil || r != (PortRange{20000, 20010}) {
		t.Errorf("ParsePortRange = %v, %v", r, err)
	}
	for _, s := range []string{"", "1", "0-10", "10-5", "1-70000", "a-b"} {
		if _, err := ParsePortRange(s); err == nil {
			t.Errorf("ParsePortRange(%q) accepted", s)
		}
	}
}

// reserveOne reserves one published port for sandbox id in dir.
func reserveOne(t *testing.T, dir, id string, owner Process, p Port) (uint16, error) {
	s, err := openStore(dir)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	a := &Attachment{ID: id, StateDir: dir, Owner: owner}
	if err := reserve(context.Background(), s, a, []Port{p}, testPortRange); err != nil {
		return 0, err
	}
	return a.Ports[0].HostPort, nil
}

func self(t *testing.T) Process {
	p, err := identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// 50 goroutines reserving a port each in one state directory get 50
// different ports, each of the range and free; detaching releases them.
func TestPortsParallelGoroutines(t *testing.T) {
	dir := stateDir(t)
	me := self(t)
	ports := make([]uint16, 50)
	errs := make([]error, 50)
	var wg sync.WaitGroup
	for i := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ports[i], errs[i] = reserveOne(t, dir, fmt.Sprintf("g%d", i), me, Port{HostIP: DefaultHostIP, ContainerPort: 8000, Proto: "tcp"})
		}()
	}
	wg.Wait()
	checkDistinct(t, ports, errs)
	for i := range ports {
		if err := Detach(context.Background(), &Attachment{ID: fmt.Sprintf("g%d", i), StateDir: dir}); err != nil {
			t.Fatal(err)
		}
	}
	assertNoLeases(t, dir)
}

// 50 processes reserving at once get 50 different ports: the lock is the
// file's, not the process's.
func TestPortsParallelProcesses(t *testing.T) {
	dir := stateDir(t)
	owner, _ := json.Marshal(self(t))
	exe, _ := os.Executable()
	ports := make([]uint16, 50)
	errs := make([]error, 50)
	var wg sync.WaitGroup
	for i := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(exe, dir, fmt.Sprintf("p%d", i))
			cmd.Env = append(os.Environ(), "BOTHY_NETTEST=reserve", "BOTHY_NETTEST_OWNER="+string(owner))
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
				return
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(out)))
			ports[i], errs[i] = uint16(n), err
		}()
	}
	wg.Wait()
	checkDistinct(t, ports, errs)
	for i := range ports {
		if err := DetachID(context.Background(), dir, fmt.Sprintf("p%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	assertNoLeases(t, dir)
}

func checkDistinct(t *testing.T, ports []uint16, errs []error) {
	t.Helper()
	seen := map[uint16]int{}
	for i, p := range ports {
		if errs[i] != nil {
			t.Fatalf("reservation %d: %v", i, errs[i])
		}
		if p < testPortRange.First || p > testPortRange.Last {
			t.Errorf("reservation %d: port %d outside %v", i, p, testPortRange)
		}
		if j, ok := seen[p]; ok {
			t.Errorf("reservations %d and %d both got port %d", j, i, p)
		}
		seen[p] = i
	}
}

// A port something else has bound is skipped; an explicit port another
// lease holds is refused with its holder's name; a lease whose owner is
// gone is reclaimed and its port handed out again.
func TestPortsTakenAndReclaimed(t *testing.T) {
	dir := stateDir(t)
	me := self(t)
	busy, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(int(testPortRange.First)))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	small := PortRange{First: testPortRange.First, Last: testPortRange.First + 1}
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := &Attachment{ID: "a", StateDir: dir, Owner: me}
	p := Port{HostIP: DefaultHostIP, ContainerPort: 80, Proto: "tcp"}
	if err := reserve(context.Background(), s, a, []Port{p}, small); err != nil {
		t.Fatal(err)
	}
	if a.Ports[0].HostPort != small.Last {
		t.Fatalf("got port %d, want %d (%d is bound)", a.Ports[0].HostPort, small.Last, small.First)
	}
	b := &Attachment{ID: "b", StateDir: dir, Owner: me}
	explicit := p
	explicit.HostPort = small.Last
	if err := reserve(context.Background(), s, b, []Port{explicit}, small); err == nil || !strings.Contains(err.Error(), "published by sandbox a") {
		t.Fatalf("explicit port held by a: %v", err)
	}
	if err := reserve(context.Background(), s, b, []Port{p}, small); err == nil || !strings.Contains(err.Error(), "no free port") {
		t.Fatalf("full range: %v", err)
	}
	// a's owner is gone (a process that has exited): its lease goes.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	a.Owner = Process{Pid: dead.Process.Pid, Start: 1}
	if err := s.writeLease(a); err != nil {
		t.Fatal(err)
	}
	if err := reserve(context.Background(), s, b, []Port{p}, small); err != nil || b.Ports[0].HostPort != small.Last {
		t.Fatalf("after a's owner exited: %v %v", b.Ports, err)
	}
	if err := Detach(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	assertNoLeases(t, dir)
}

// assertNoLeases fails if the state directory holds a lease or a helper
// directory.
func assertNoLeases(t testing.TB, dir string) {
	t.Helper()
	for _, sub := range []string{"leases", "helpers"} {
		ents, err := os.ReadDir(dir + "/" + sub)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range ents {
			t.Errorf("left in %s/%s: %s", dir, sub, e.Name())
		}
	}
}
