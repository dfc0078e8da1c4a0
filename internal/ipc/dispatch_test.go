package ipc

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testEcho is a helper of this test binary: it answers the Data frame on its
// stdin with the same bytes, upper-cased, and Done.
const testEcho = ReexecPrefix + "test_echo"

func TestMain(m *testing.M) {
	Handle(testEcho, func() int {
		var in Data
		if _, err := Receive(os.Stdin, &in); err != nil {
			Send(os.Stdout, DoneWith(err))
			return 0
		}
		if err := Send(os.Stdout, Data(bytes.ToUpper(in))); err != nil {
			return 1
		}
		if err := Send(os.Stdout, Done{}); err != nil {
			return 1
		}
		return 3 // the exit code is the handler's
	})
	Dispatch()
	os.Exit(m.Run())
}

// TestDispatch: the binary re-executed under a registered name runs that
// handler and exits with its code; its frames are its reply.
func TestDispatch(t *testing.T) {
	in, _ := Encode(Data("hello"))
	cmd := exec.Command(os.Args[0], testEcho)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3", err)
	}
	r := bytes.NewReader(out)
	var data Data
	if _, err := Receive(r, &data); err != nil || string(data) != "HELLO" {
		t.Fatalf("reply %q, %v", data, err)
	}
	var done Done
	if _, err := Receive(r, &done); err != nil || done.Err() != nil {
		t.Fatalf("done: %+v, %v", done, err)
	}
}

// TestDispatchUnknown: a bothy re-exec name the binary does not provide exits
// 2 saying so and what it provides, without running anything.
func TestDispatchUnknown(t *testing.T) {
	cmd := exec.Command(os.Args[0], ReexecPrefix+"nonesuch")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2", err)
	}
	msg := stderr.String()
	if !strings.Contains(msg, `"__bothy_nonesuch", which this binary does not provide (it provides: `+testEcho+")") {
		t.Errorf("message: %q", msg)
	}
	if len(out) != 0 {
		t.Errorf("stdout: %q", out)
	}
}

// TestDispatchOther: any other first argument is the binary's own command
// line: Dispatch returns.
func TestDispatchOther(t *testing.T) {
	var r registry
	ran := 0
	r.handle(ReexecInit, func() int { ran++; return 5 })
	for _, args := range [][]string{{"bothy-init"}, {"bothy-init", "run"}, {"bothy-init", "-test.v"}, {"bothy-init", "_bothy_launch"}} {
		if code, ok := r.dispatch(args, io.Discard); ok || ran != 0 {
			t.Errorf("%q: dispatched, code %d", args, code)
		}
	}
	if code, ok := r.dispatch([]string{"bothy-init", ReexecInit}, io.Discard); !ok || code != 5 || ran != 1 {
		t.Errorf("init: %d %v, ran %d times", code, ok, ran)
	}
}

// TestHandleRefuses: a name registered twice or outside bothy's namespace
// is a programming error.
func TestHandleRefuses(t *testing.T) {
	for _, name := range []string{"launch", ReexecPrefix, "", "__bothy"} {
		var r registry
		if !panics(func() { r.handle(name, func() int { return 0 }) }) {
			t.Errorf("Handle(%q) did not panic", name)
		}
	}
	var r registry
	r.handle(ReexecRemove, func() int { return 0 })
	if !panics(func() { r.handle(ReexecRemove, func() int { return 0 }) }) {
		t.Error("a second Handle of the same name did not panic")
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}
