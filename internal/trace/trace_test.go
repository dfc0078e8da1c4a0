package trace

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// A process reaches the marks "t:one" and "t:two" when this test binary is
// run with TRACE_TEST_CHILD set; with KillEnv naming one, it dies of SIGKILL
// there and prints nothing after it.
func TestMain(m *testing.M) {
	if os.Getenv("TRACE_TEST_CHILD") != "" {
		os.Stdout.WriteString("before\n")
		Mark("t", "one")
		os.Stdout.WriteString("one\n")
		Mark("t", "two")
		os.Stdout.WriteString("two\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestKillAt(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		killAt, out string
		killed      bool
	}{
		{"", "before\none\ntwo\n", false},
		{"t:one", "before\n", true},
		{"t:two", "before\none\n", true},
		{"t:on", "before\none\ntwo\n", false},
		{"x:one", "before\none\ntwo\n", false},
	} {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), "TRACE_TEST_CHILD=1", KillEnv+"="+tc.killAt)
		out, err := cmd.Output()
		var ee *exec.ExitError
		killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if string(out) != tc.out || killed != tc.killed || (err != nil && !killed) {
			t.Errorf("%s=%q: output %q, err %v; want %q, killed %v", KillEnv, tc.killAt, out, err, tc.out, tc.killed)
		}
	}
}
