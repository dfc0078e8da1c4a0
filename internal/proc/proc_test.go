package proc

import (
	"os"
	"os/exec"
	"testing"
)

func TestStart(t *testing.T) {
	a, zombie, err := Start(os.Getpid())
	if err != nil || zombie || a == 0 {
		t.Fatalf("Start(self) = %d, %v, %v", a, zombie, err)
	}
	if b, _, _ := Start(os.Getpid()); b != a {
		t.Fatalf("start time changed: %d then %d", a, b)
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
