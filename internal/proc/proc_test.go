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
