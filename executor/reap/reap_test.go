package reap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "BOTHY_REAP_HELPER"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sh(script string) (string, []string, *os.ProcAttr) {
	return "/bin/sh", []string{"sh", "-c", script}, &os.ProcAttr{
		Files: []*os.File{nil, nil, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
}

// checkExitCodes starts n concurrent shells each exiting with its own code
// and checks every Proc gets its own status back.
func checkExitCodes(t *testing.T, r *Reaper, n int) {
	t.Helper()
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			code := i % 256
			p, err := r.StartProcess(sh("exit " + strconv.Itoa(code)))
			if err != nil {
				errs <- err
				return
			}
			st, err := p.Wait(ctx)
			if err != nil {
				errs <- err
				return
			}
			if !st.Exited || st.ExitCode != code || st.Pid != p.Pid {
				errs <- fmt.Errorf("process %d: got %+v, want exit %d", i, st, code)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestPerProcessExitCodes(t *testing.T) {
	r, err := New(Options{Mode: PerProcess})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Mode() != PerProcess {
		t.Fatalf("mode %v", r.Mode())
	}
	checkExitCodes(t, r, 100)
	if err := r.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestStartCmdAndSignals(t *testing.T) {
	r, err := New(Options{Mode: PerProcess})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := testCtx(t)

	var buf bytes.Buffer
	cmd := exec.Command("true")
	cmd.Stdout = &buf
	if _, err := r.Start(cmd); !errors.Is(err, ErrUnsupportedStdio) {
		t.Fatalf("Start with a bytes.Buffer stdout: %v, want ErrUnsupportedStdio", err)
	}

	cmd = exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := r.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.SignalAll(syscall.SIGTERM); n != 1 {
		t.Errorf("SignalAll reached %d processes, want 1", n)
	}
	st, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Signal != syscall.SIGTERM || st.Code() != 128+15 || st.Success() {
		t.Errorf("status %+v, want killed by SIGTERM", st)
	}
	if err := p.Signal(syscall.SIGKILL); !errors.Is(err, ErrDone) {
		t.Errorf("Signal after exit: %v, want ErrDone", err)
	}
	if _, err := r.StartProcess("/nonexistent/binary", []string{"x"}, &os.ProcAttr{}); err == nil {
		t.Error("StartProcess of a missing binary succeeded")
	}
}

// TestGlobalSubreaper runs TestGlobalHelper in a child process that becomes
// a child subreaper with a global wait4(-1) loop, so the loop cannot steal
// statuses from this test binary's other waits.
func TestGlobalSubreaper(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside the helper")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGlobalHelper$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestGlobalHelper")) {
		t.Fatalf("helper failed: %v\n%s", err, out)
	}
	t.Logf("helper:\n%s", out)
}

func TestGlobalHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		return // runs only as the child of TestGlobalSubreaper (os/exec's TestHelperProcess pattern)
	}
	r, err := New(Options{Subreaper: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Mode() != Global {
		t.Fatalf("mode %v, want global", r.Mode())
	}
	if _, err := New(Options{Mode: Global}); !errors.Is(err, ErrGlobalTaken) {
		t.Fatalf("second global reaper: %v, want ErrGlobalTaken", err)
	}

	// Orphans: each shell leaves a background subshell behind, which is
	// re-parented to us when the shell exits.
	const orphans = 10
	ctx := testCtx(t)
	for range orphans {
		p, err := r.StartProcess(sh("(sleep 0.05; exit 3) & exit 7"))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := p.Wait(ctx); err != nil || st.ExitCode != 7 {
			t.Fatalf("orphan maker: %+v %v", st, err)
		}
	}
	// A failed exec must not disturb the loop.
	if _, err := r.StartProcess("/nonexistent/binary", []string{"x"}, &os.ProcAttr{}); err == nil {
		t.Fatal("StartProcess of a missing binary succeeded")
	}
	checkExitCodes(t, r, 100)

	if err := r.WaitIdle(ctx); err != nil {
		t.Fatalf("wait for idle: %v", err)
	}
	if got := r.Orphans(); got < orphans {
		t.Errorf("reaped %d orphans, want at least %d", got, orphans)
	}
	if z := zombies(t); len(z) > 0 {
		t.Errorf("zombie children left: %v", z)
	}
	t.Logf("orphans reaped: %d", r.Orphans())
}

// zombies lists the zombie children of this process.
func zombies(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(self) {
			out = append(out, pid)
		}
	}
	return out
}
