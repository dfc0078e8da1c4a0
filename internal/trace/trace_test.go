package trace

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A process reaches the marks "t:one" and "t:two" when this test binary is
// run with TRACE_TEST_CHILD set; with KillEnv naming one, it dies of SIGKILL
// there and prints nothing after it.
func TestMain(m *testing.M) {
	if os.Getenv("TRACE_TEST_CHILD") != "" {
		Configure(FromEnv())
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

// TestFromEnv: the settings come from the environment only through
// FromEnv; a traced process with no origin handed down is the origin of
// the processes it starts.
func TestFromEnv(t *testing.T) {
	t.Setenv(PrintEnv, "")
	t.Setenv(KillEnv, "bothy:ready")
	if c := FromEnv(); c.Print || c.KillAt != "bothy:ready" || !c.Origin.IsZero() {
		t.Errorf("untraced: %+v", c)
	}
	t.Setenv(PrintEnv, "1")
	t.Setenv(OriginEnv, "1000000000000000000")
	if c := FromEnv(); !c.Print || !c.Origin.Equal(time.Unix(1e9, 0)) {
		t.Errorf("origin handed down: %+v", c)
	}
	t.Setenv(OriginEnv, "")
	c := FromEnv()
	if got := os.Getenv(OriginEnv); c.Origin.IsZero() || got != strconv.FormatInt(c.Origin.UnixNano(), 10) {
		t.Errorf("first traced process: origin %v, %s=%q", c.Origin, OriginEnv, got)
	}
	// Unconfigured, or configured off, Mark does nothing.
	Configure(Config{})
	Mark("bothy", "ready")
	if Enabled() {
		t.Error("enabled")
	}
}
