package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostTerm is a pseudo-terminal on the host standing for the user's
// terminal: bothy runs on its slave, the test types into its master.
type hostTerm struct {
	t             *testing.T
	master, slave *os.File
	mu            sync.Mutex
	out           strings.Builder
	more          chan struct{}
}

func newHostTerm(t *testing.T, rows, cols int) *hostTerm {
	t.Helper()
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		t.Fatalf("open the pty's peer: %v", errno)
	}
	h := &hostTerm{t: t, master: os.NewFile(uintptr(mfd), "ptmx"), slave: os.NewFile(sfd, "pts"), more: make(chan struct{}, 1)}
	h.resize(rows, cols)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := h.master.Read(buf)
			h.mu.Lock()
			h.out.Write(buf[:n])
			h.mu.Unlock()
			select {
			case h.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { h.master.Close(); h.slave.Close() })
	return h
}

func (h *hostTerm) resize(rows, cols int) {
	if err := unix.IoctlSetWinsize(int(h.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *hostTerm) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.String()
}

func (h *hostTerm) waitFor(want string) {
	h.t.Helper()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(h.String(), want) {
		select {
		case <-h.more:
		case <-deadline:
			h.t.Fatalf("no %q on the terminal: %q", want, h.String())
		}
	}
}

func (h *hostTerm) typ(s string) {
	if _, err := h.master.WriteString(s); err != nil {
		h.t.Fatal(err)
	}
}

// start runs cmd on the terminal, as the leader of a session of its own
// whose controlling terminal it is (a login shell's child).
func (h *hostTerm) start(cmd *exec.Cmd) {
	h.t.Helper()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = h.slave, h.slave, h.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// waitCode waits for cmd and returns its exit code.
func waitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

// cooked reports whether the terminal is back in the mode a shell leaves
// it in (echo, lines, signals).
func (h *hostTerm) cooked() bool {
	tio, err := unix.IoctlGetTermios(int(h.slave.Fd()), unix.TCGETS)
	if err != nil {
		h.t.Fatal(err)
	}
	const want = unix.ECHO | unix.ICANON | unix.ISIG
	return tio.Lflag&want == want
}

// keysScript answers lines and ends at end of file, with code 5.
const keysScript = `echo "size $(stty size)"; echo ready; while IFS= read -r line; do echo "line $line"; done; echo eof; exit 5`

// winchScript reports resizes until interrupted.
const winchScript = `trap 'echo "winch $(stty size)"' WINCH; echo "size $(stty size)"; echo ready; while :; do sleep 0.1; done`

// stoppedScript prints "stopped" for each stopped sleep in the sandbox.
const stoppedScript = `for p in /proc/[0-9]*; do s=$(cat $p/stat 2>/dev/null) || continue; case "$s" in *"(sleep) T"*) echo stopped;; esac; done`

// TestExecTTY drives bothy exec -it from a terminal, as a user would: the
// program sees the terminal's size and every resize, keys reach it as
// typed (Ctrl-D is end of file, Ctrl-C interrupts it), its exit code is
// bothy's, and the user's terminal is left as it was found.
func TestExecTTY(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "tbox")

	t.Run("keys and EOF", func(t *testing.T) {
		h := newHostTerm(t, 33, 101)
		cmd := c.child("exec", "-it", "tbox", "--", "sh", "-c", keysScript)
		h.start(cmd)
		h.waitFor("size 33 101")
		h.waitFor("ready")
		h.typ("hello\r")
		h.waitFor("line hello")
		h.typ("\x04")
		h.waitFor("eof")
		if code := waitCode(t, cmd); code != 5 {
			t.Fatalf("exit code %d, want 5; terminal: %q", code, h.String())
		}
		if !h.cooked() {
			t.Fatal("the terminal was left in raw mode")
		}
	})
	t.Run("resize and Ctrl-C", func(t *testing.T) {
		h := newHostTerm(t, 24, 80)
		cmd := c.child("exec", "-it", "tbox", "--", "sh", "-c", winchScript)
		h.start(cmd)
		h.waitFor("size 24 80")
		h.waitFor("ready")
		h.resize(40, 120)
		h.waitFor("winch 40 120")
		h.typ("\x03")
		if code := waitCode(t, cmd); code != 130 {
			t.Fatalf("exit code %d, want 130 (SIGINT); terminal: %q", code, h.String())
		}
		if !h.cooked() {
			t.Fatal("the terminal was left in raw mode")
		}
	})
	t.Run("job control", func(t *testing.T) {
		// An interactive shell: Ctrl-Z stops its foreground job, fg
		// resumes it, Ctrl-C ends it, the shell lives on.
		h := newHostTerm(t, 24, 80)
		cmd := c.child("exec", "-it", "tbox", "--", "sh")
		h.start(cmd)
		h.waitFor("# ")
		h.typ("sleep 1000\r")
		c.in(t).waitSleeps("tbox", 1)
		h.typ("\x1a")
		h.waitFor("Stopped")
		h.typ("fg\r")
		// The shell gives the job the terminal, then SIGCONT: once it
		// runs, it is in the foreground.
		deadline := time.Now().Add(30 * time.Second)
		for strings.Contains(c.in(t).ok("exec", "tbox", "--", "sh", "-c", stoppedScript), "stopped") {
			if time.Now().After(deadline) {
				t.Fatalf("fg did not resume the job: %q", h.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		h.typ("\x03")
		c.in(t).waitNoSleep("tbox") // typed before, the next line could be flushed with the interrupt
		h.typ("echo rc=$?\r")
		h.waitFor("rc=130")
		h.typ("exit 3\r")
		if code := waitCode(t, cmd); code != 3 {
			t.Fatalf("exit code %d, want 3; terminal: %q", code, h.String())
		}
	})
	t.Run("SIGTERM restores the terminal", func(t *testing.T) {
		h := newHostTerm(t, 24, 80)
		cmd := c.child("exec", "-it", "tbox", "--", "sh", "-c", winchScript)
		h.start(cmd)
		h.waitFor("ready")
		if h.cooked() {
			t.Fatal("the terminal is not in raw mode while the program runs")
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if code := waitCode(t, cmd); code != 143 {
			t.Fatalf("exit code %d, want 143; terminal: %q", code, h.String())
		}
		if !h.cooked() {
			t.Fatal("the terminal was left in raw mode")
		}
	})
	t.Run("not a terminal", func(t *testing.T) {
		_, errOut, code := c.run("", "exec", "-it", "tbox", "--", "true")
		if code == 0 || !strings.Contains(errOut, "not a TTY") {
			t.Fatalf("exec -it without a terminal: exit %d %q", code, errOut)
		}
		// -t alone: a terminal in the sandbox, the keyboard not forwarded.
		if out, _, code := c.run("", "exec", "-t", "tbox", "--", "sh", "-c", "stty size; tty; exit 4"); !strings.Contains(out, "24 80\r\n/dev/pts/") || code != 4 {
			t.Fatalf("exec -t without a terminal: %q %d", out, code)
		}
		if _, errOut, code := c.run("", "run", "-d", "-t"); code == 0 || !strings.Contains(errOut, "exec -it") {
			t.Fatalf("run -d -t: exit %d %q", code, errOut)
		}
		// -i alone pipes stdin as before.
		if out, _, code := c.run("ping\n", "exec", "-i", "tbox", "--", "cat"); out != "ping\n" || code != 0 {
			t.Fatalf("exec -i cat: %q %d", out, code)
		}
	})
}

// TestRunTTY: bothy run -it starts a sandbox for the terminal's program
// (the image's shell without a command) and --rm removes it after.
func TestRunTTY(t *testing.T) {
	c := newCLI(t)
	h := newHostTerm(t, 24, 80)
	cmd := c.child("run", "--rm", "-it")
	h.start(cmd)
	h.waitFor("# ") // the shell's prompt
	h.typ("echo in-$((6*7))-box; exit 6\r")
	h.waitFor("in-42-box")
	if code := waitCode(t, cmd); code != 6 {
		t.Fatalf("exit code %d, want 6; terminal: %q", code, h.String())
	}
	if out := c.ok("ps", "-a", "--format", "json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("run --rm -it left a sandbox: %q", out)
	}
	if _, errOut, code := c.run("", "run", "--rm", "-it", "--", "true"); code == 0 || !strings.Contains(errOut, "not a TTY") {
		t.Fatalf("run -it without a terminal: exit %d %q", code, errOut)
	}
}
