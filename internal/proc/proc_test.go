package proc

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestStart(t *testing.T) {
	a, zombie, err := Start(os.Getpid())
	if err != nil || zombie || a == 0 {
		t.Fatalf("Start(self) = %d, %v, %v", a, zombie, err)
	}
	if b, _, _ := Start(os.Getpid()); b != a {
		t.Fatalf("start time changed: %d then %d", a, b)
	}
	if Exiting(os.Getpid()) {
		t.Fatal("this process reads as exiting")
	}
	if _, running, err := Running(os.Getpid()); !running || err != nil {
		t.Fatalf("Running(self) = %v, %v", running, err)
	}
	// A single-threaded child has one; this Go program has several.
	sleep := exec.Command("sleep", "10")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	if n, err := Threads(sleep.Process.Pid); n != 1 || err != nil {
		t.Errorf("Threads(sleep) = %d, %v", n, err)
	}
	if n, err := Threads(os.Getpid()); n < 2 || err != nil {
		t.Errorf("Threads(self) = %d, %v", n, err)
	}
	// A child that has exited and is not yet reaped is a zombie.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for {
		if _, z, err := Start(pid); err != nil {
			t.Fatal(err)
		} else if z {
			break
		}
	}
	_ = cmd.Wait()
	if _, _, err := Start(pid); err == nil {
		t.Fatalf("Start of a reaped pid %d: no error", pid)
	}
}

func TestRSS(t *testing.T) {
	buf := make([]byte, 32<<20)
	for i := range buf {
		buf[i] = 1
	}
	n, err := RSS(os.Getpid())
	if err != nil || n < 32<<20 {
		t.Errorf("RSS of this process with 32 MiB touched: %d %v", n, err)
	}
	if _, err := RSS(-1); err == nil {
		t.Error("RSS of pid -1")
	}
	_ = buf[len(buf)-1]
}

// TestTree: a shell's child and grandchild, in a process group of their
// own or not, are its tree; an ended process has none.
func TestTree(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & setsid sh -c 'sleep 60' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range Tree(cmd.Process.Pid) {
			if p != cmd.Process.Pid {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var tree []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if tree = Tree(cmd.Process.Pid); len(tree) == 4 {
			break
		}
	}
	if len(tree) != 4 || tree[0] != cmd.Process.Pid {
		t.Fatalf("tree of sh with a sleep and a setsid sh with a sleep: %v", tree)
	}
	if slices.Contains(tree, os.Getpid()) {
		t.Errorf("the tree holds the parent: %v", tree)
	}
	if got := Tree(1 << 30); got != nil {
		t.Errorf("tree of no process: %v", got)
	}
}
