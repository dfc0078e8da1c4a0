package main

import (
	"strings"
	"testing"
	"time"
)

// TestPausedStatus: a paused sandbox is paused in ps (State and Status, the
// table too) and in inspect (State.Status, Paused, not Running); unpaused,
// it runs again.
func TestPausedStatus(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "frozen")
	if out := c.ok("pause", "frozen"); out != "frozen\n" {
		t.Errorf("pause printed %q", out)
	}
	if out := c.ok("ps", "--format", "{{.Names}} {{.State}} {{.Status}}"); out != "frozen paused paused\n" {
		t.Errorf("ps of a paused sandbox: %q", out)
	}
	if out := c.ok("ps"); !strings.Contains(out, " paused ") {
		t.Errorf("ps table of a paused sandbox:\n%s", out)
	}
	if v := c.inspectView("frozen"); v.State.Status != "paused" || !v.State.Paused || v.State.Running || v.State.Pid <= 0 {
		t.Errorf("inspect of a paused sandbox: %+v", v.State)
	}
	c.ok("unpause", "frozen")
	if out := c.ok("ps", "--format", "{{.State}}"); out != "running\n" {
		t.Errorf("ps after unpause: %q", out)
	}
	if v := c.inspectView("frozen"); v.State.Status != "running" || v.State.Paused || !v.State.Running {
		t.Errorf("inspect after unpause: %+v", v.State)
	}
	if out := c.ok("exec", "frozen", "--", "echo", "thawed"); out != "thawed\n" {
		t.Errorf("exec after unpause: %q", out)
	}
}

// TestKill: kill sends its signal to the main process (by name or
// number), whose exit ends the sandbox with its code; KILL (the default)
// ends a sandbox at once, paused or not; without a main process TERM stops
// the sandbox and any other signal is refused, leaving it running.
func TestKill(t *testing.T) {
	c := newCLI(t)
	state := func(ref string) string {
		return strings.TrimSpace(c.ok("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", ref))
	}

	// A signal by name to the main process, which traps it.
	c.ok("run", "-d", "--name", "trap", "--", "sh", "-c", `trap "exit 7" HUP; echo ready; while :; do sleep 0.05; done`)
	for range 200 {
		if _, errOut, _ := c.run("", "logs", "trap"); strings.Contains(errOut, "ready") {
			break
		}
		if out, _, _ := c.run("", "logs", "trap"); strings.Contains(out, "ready") {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if out := c.ok("kill", "-s", "HUP", "trap"); out != "trap\n" {
		t.Errorf("kill printed %q", out)
	}
	if out := c.ok("wait", "trap"); out != "7\n" {
		t.Errorf("wait after kill -s HUP: %q, want the trap's 7", out)
	}
	if got := state("trap"); got != "exited 7" {
		t.Errorf("after kill -s HUP: %q", got)
	}

	// A number (15), as podman's; the main process dies of it: 143.
	c.ok("run", "-d", "--name", "num", "--", "sleep", "1000")
	c.ok("kill", "--signal", "15", "num")
	if out := c.ok("wait", "num"); out != "143\n" {
		t.Errorf("wait after kill -s 15: %q", out)
	}

	// --keep: the main process ends, the sandbox (its executor) stays.
	c.ok("run", "-d", "--keep", "--name", "kept", "--", "sleep", "1000")
	c.ok("kill", "-s", "SIGTERM", "kept")
	for range 200 {
		if v := c.inspectView("kept"); !v.State.MainRunning {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	// Running, with its main process's code (SIGTERM: 143) known.
	if v := c.inspectView("kept"); v.State.Status != "running" || v.State.MainRunning || v.State.ExitCode != 143 || v.State.MainSignal != "SIGTERM" {
		t.Errorf("after kill -s TERM of a --keep sandbox's main process: %+v", v.State)
	}
	if out := c.ok("exec", "kept", "--", "echo", "alive"); out != "alive\n" {
		t.Errorf("exec after its main process was killed: %q", out)
	}
	// The default, KILL, ends it at once.
	c.ok("kill", "kept")
	if got := state("kept"); !strings.HasPrefix(got, "exited") {
		t.Errorf("after kill: %q", got)
	}

	// No main process: HUP is refused (the sandbox runs on), TERM stops it.
	c.ok("run", "-d", "--name", "idle")
	if out, errOut, code := c.run("", "kill", "-s", "HUP", "idle"); code != 1 || out != "" ||
		!strings.Contains(errOut, "sandbox has no main process running: only its executor (PID 1) would get SIGHUP, and it ignores it") {
		t.Errorf("kill -s HUP without a main process: exit %d %q %q", code, out, errOut)
	}
	if got := state("idle"); got != "running 0" {
		t.Errorf("after a refused kill: %q", got)
	}
	c.ok("kill", "-s", "TERM", "idle")
	deadline := time.Now().Add(time.Minute)
	for state("idle") == "running 0" && time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond)
	}
	if got := state("idle"); !strings.HasPrefix(got, "exited") {
		t.Errorf("after kill -s TERM without a main process: %q", got)
	}

	// A paused sandbox dies of KILL too.
	c.ok("run", "-d", "--name", "paused", "--", "sleep", "1000")
	c.ok("pause", "paused")
	c.ok("kill", "paused")
	if got := state("paused"); !strings.HasPrefix(got, "exited") {
		t.Errorf("after kill of a paused sandbox: %q", got)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"kill", "-s", "NOPE", "paused"}, `invalid --signal "NOPE": use a name (TERM, SIGHUP) or a number (15)`},
		{[]string{"kill", "paused"}, "is exited, not running: nothing to signal"},
		{[]string{"kill", "missing"}, "no such sandbox: missing"},
	} {
		if out, errOut, code := c.run("", bad.args...); code != 1 || out != "" || !strings.Contains(errOut, bad.want) {
			t.Errorf("%v: exit %d %q %q, want %q", bad.args, code, out, errOut, bad.want)
		}
	}
}
