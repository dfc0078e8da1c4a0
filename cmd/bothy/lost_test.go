package main

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestExecExecutorLost: an exec whose sandbox's executor dies under it says
// so, with the end of the executor's log, instead of a bare "unexpected
// EOF".
func TestExecExecutorLost(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "lost")
	pid := c.inspectView("lost").State.Pid
	if pid <= 0 {
		t.Fatalf("inspect: no PID 1")
	}
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, code := c.run("", "exec", "lost", "--", "sh", "-c", "touch /tmp/started; exec sleep 100")
		done <- result{errOut, code}
	}()
	for i := 0; ; i++ {
		if _, _, code := c.run("", "exec", "lost", "--", "test", "-e", "/tmp/started"); code == 0 {
			break
		}
		if i == 400 {
			t.Fatal("the exec'd command did not start")
		}
		time.Sleep(25 * time.Millisecond)
	}
	// The sandbox's PID 1 is this test's: killed, as a crash would end it.
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("exec did not return after its sandbox's PID 1 was killed")
	}
	t.Logf("exec: exit %d: %s", r.code, r.errOut)
	if r.code == 0 {
		t.Fatalf("exec exited 0 after its executor was killed")
	}
	for _, want := range []string{"unexpected EOF", "its PID 1 (the executor) has exited", "executor log: ", "serving"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("exec's error lacks %q:\n%s", want, r.errOut)
		}
	}
}
