package network

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bothy-sandbox/bothy/executor/client"
)

// TestForwarderRefusesNonTCP: bothy's forwarder, given an executor that
// answers every connection request with a pipe instead of a TCP socket
// (as a hostile one could), closes the host's connection without a byte,
// says why in its log, and keeps serving; its listening socket goes with
// its sandbox's process, and Detach leaves nothing.
func TestForwarderRefusesNonTCP(t *testing.T) {
	dir := stateDir(t)
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	asked := make(chan string, 10)
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			n, _ := c.Read(buf)
			asked <- string(buf[:n])
			var p [2]int
			_ = unix.Pipe2(p[:], unix.O_CLOEXEC)
			_, _, _ = c.WriteMsgUnix([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: fd\r\n\r\n"), unix.UnixRights(p[0]), nil)
			unix.Close(p[0])
			unix.Close(p[1])
			c.Close()
		}
	}()
	id, err := client.StatSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	// The "sandbox": a process of the test's.
	owner := exec.Command("sleep", "60")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer owner.Process.Kill()
	ownerP, err := identify(owner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := &AttachOptions{ID: "fwd" + randHex(6), Exe: exe, Executor: Executor{Socket: sock, Identity: id, APIKey: "k"}}
	a := &Attachment{ID: o.ID, StateDir: dir, Owner: ownerP, PortDriver: PortDriverBuiltin, Driver: DriverNone}
	if err := reserve(context.Background(), s, a, []Port{{HostIP: DefaultHostIP, ContainerPort: 80, Proto: "tcp"}}, testPortRange); err != nil {
		t.Fatal(err)
	}
	hdir, err := s.helperDir(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := startForwarder(o, a, hdir); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	defer Detach(context.Background(), a)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(a.Ports[0].HostPort)))
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		c.Close()
		if len(b) != 0 || err != nil {
			t.Errorf("through a forwarder handed a pipe: %q %v, want the connection closed", b, err)
		}
		select {
		case req := <-asked:
			if !strings.HasPrefix(req, "GET /v1/ports/80/fd ") || !strings.Contains(req, "X-Session-Api-Key: k\r\n") && !strings.Contains(req, "X-Session-API-Key: k\r\n") {
				t.Errorf("the forwarder asked %q", req)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the forwarder never asked the executor")
		}
	}
	if log := readFile(filepath.Join(hdir, forwarderLog)); !strings.Contains(log, "the executor passed back no TCP socket: not a socket") {
		t.Errorf("forwarder's log: %q", log)
	}
	// The sandbox ends: so does the forwarder, and its port is free.
	_ = owner.Process.Kill()
	_ = owner.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for a.Forwarder.Process.Alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if a.Forwarder.Process.Alive() {
		t.Fatalf("forwarder %d outlived its sandbox", a.Forwarder.Process.Pid)
	}
	if err := checkForwarder(a); err == nil || !strings.Contains(err.Error(), "stopped: its sandbox exited") {
		t.Errorf("checkForwarder: %v", err)
	}
	if err := Detach(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	assertGone(t, a)
}
