package network

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/proc"
)

// kill waits for every thread of a process, not only for its leader: a
// process whose leader is a zombie while its other threads still run holds
// its files, and a killed forwarder's ports must be free once kill returns
// (TestForwarderRefusesNonTCP failed now and then on that, a Go program's
// leader exiting before the rest of it).
func TestKillWaitsForAllThreads(t *testing.T) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "BOTHY_NETTEST=leader-exits")
	addr, err := netip.ParseAddrPort(startServer(t, cmd))
	if err != nil {
		t.Fatal(err)
	}
	var p Process
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		start, zombie, err := proc.Start(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if zombie {
			p = Process{Pid: cmd.Process.Pid, Start: start}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leader thread never exited")
		}
	}
	if p.Alive() {
		t.Fatalf("process %d reads as running with its leader a zombie", p.Pid)
	}
	if portFree("tcp", addr.Addr(), addr.Port()) {
		t.Fatalf("port %s is free while the process's other threads run", addr)
	}
	// On its way out (its leader has exited), it is waited for no longer
	// with exiting (a helper that holds no port), though it still holds
	// its files; without, it is.
	if !proc.Exiting(p.Pid) {
		t.Fatalf("process %d with its leader exited is not exiting", p.Pid)
	}
	fd, ok, err := p.pidfd()
	if err != nil || !ok {
		t.Fatalf("pidfd: %v %v", ok, err)
	}
	for _, exiting := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := waitPidfd(ctx, fd, p, exiting)
		cancel()
		if exiting != (err == nil) {
			t.Errorf("wait with exiting %v: %v", exiting, err)
		}
	}
	syscall.Close(fd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.kill(ctx, false); err != nil {
		t.Fatal(err)
	}
	if !portFree("tcp", addr.Addr(), addr.Port()) {
		t.Errorf("port %s is still bound once kill returned", addr)
	}
}
