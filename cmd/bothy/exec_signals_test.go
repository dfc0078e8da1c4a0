package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/executor/api"
)

// in returns c for the subtest t.
func (c *cli) in(t *testing.T) *cli { return &cli{t: t, root: c.root} }

// child returns the bothy CLI as a child process: the binary make test
// built (BOTHY_BIN), or else this test binary acting as the CLI.
func (c *cli) child(args ...string) *exec.Cmd {
	bin, env := os.Getenv("BOTHY_BIN"), os.Environ()
	if bin == "" {
		bin, _ = os.Executable()
		env = append(env, "BOTHY_TEST_CLI=1")
	}
	cmd := exec.Command(bin, append([]string{"--root", c.root}, args...)...)
	cmd.Env = env
	return cmd
}

// sleepScript prints the command line of every live sleep in the sandbox,
// one a line, from /proc inside it.
const sleepScript = `for p in /proc/[0-9]*; do s=$(cat $p/stat 2>/dev/null) || continue; ` +
	`case "$s" in *"(sleep) Z"*) ;; *"(sleep) "*) tr '\0' ' ' < $p/cmdline; echo;; esac; done`

// sleeps lists the live sleeps in the sandbox ("sleep 300").
func (c *cli) sleeps(box string) []string {
	c.t.Helper()
	var out []string
	for _, l := range strings.Split(c.ok("exec", box, "--", "sh", "-c", sleepScript), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// waitNoSleep waits until no sleep is left in the sandbox but the ones
// kept.
func (c *cli) waitNoSleep(box string, keep ...string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := c.sleeps(box)
		for _, k := range keep {
			if i := slices.Index(left, k); i >= 0 {
				left = slices.Delete(left, i, i+1)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("sleeps left in the sandbox: %q", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitSleeps waits until n sleeps run in the sandbox.
func (c *cli) waitSleeps(box string, n int) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(c.sleeps(box)) < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("sleeps in the sandbox: %q, want %d", c.sleeps(box), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startExec starts `bothy exec box -- sh -c script` and waits for the
// script's first line, "ready".
func (c *cli) startExec(box, script string) (*exec.Cmd, *bufio.Reader, *strings.Builder) {
	c.t.Helper()
	cmd := c.child("exec", box, "--", "sh", "-c", script)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	br := bufio.NewReader(stdout)
	if line, err := br.ReadString('\n'); line != "ready\n" {
		c.t.Fatalf("first line %q %v; stderr %s", line, err, stderr.String())
	}
	return cmd, br, &stderr
}

// exitCode waits for cmd and returns its exit code.
func exitCode(t *testing.T, cmd *exec.Cmd, out *bufio.Reader) int {
	t.Helper()
	io.Copy(io.Discard, out)
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// Ctrl-C on `bothy exec SB -- sh -c 'sleep 300 & sleep 300'`: once, the
// command is interrupted and nothing of it is left, not even the
// background sleep that sh made ignore SIGINT; twice, the process group is
// killed; a killed CLI, and a Go client that gives up, leave nothing
// either. A process that left the group (setsid) is not reached.
func TestExecInterruptLeavesNothing(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "intbox")
	c.waitNoSleep("intbox")

	t.Run("once", func(t *testing.T) {
		c := c.in(t)
		cmd, out, stderr := c.startExec("intbox", `sleep 300 & setsid sleep 301 & echo ready; sleep 300`)
		c.waitSleeps("intbox", 3) // the last starts after "ready"
		cmd.Process.Signal(syscall.SIGINT)
		if code := exitCode(t, cmd, out); code != 130 {
			t.Fatalf("exit %d after one Ctrl-C, want 130 (stderr %q)", code, stderr)
		}
		// The session leader that left the group runs on.
		c.waitNoSleep("intbox", "sleep 301")
		c.ok("exec", "intbox", "--", "sh", "-c", `for p in /proc/[0-9]*; do case "$(cat $p/stat)" in *"(sleep) "*) kill -9 ${p#/proc/};; esac; done`)
		c.waitNoSleep("intbox")
	})

	t.Run("twice", func(t *testing.T) {
		c := c.in(t)
		cmd, out, stderr := c.startExec("intbox", `trap "echo got INT" INT; sleep 300 & echo ready; while :; do sleep 1; done`)
		cmd.Process.Signal(syscall.SIGINT)
		if line, err := out.ReadString('\n'); line != "got INT\n" {
			t.Fatalf("after the first Ctrl-C: %q %v", line, err)
		}
		// The trapping script goes on, and its background sleep lives.
		if got := c.sleeps("intbox"); !slices.Contains(got, "sleep 300") {
			t.Fatalf("after the first Ctrl-C: sleeps %q", got)
		}
		cmd.Process.Signal(syscall.SIGINT)
		if code := exitCode(t, cmd, out); code != 130 || !strings.Contains(stderr.String(), "interrupted: the command was killed") {
			t.Fatalf("exit %d after two Ctrl-C, stderr %q; want 130 and the kill reported", code, stderr)
		}
		c.waitNoSleep("intbox")
	})

	t.Run("CLI killed", func(t *testing.T) {
		c := c.in(t)
		cmd, _, _ := c.startExec("intbox", `sleep 300 & echo ready; sleep 300`)
		cmd.Process.Kill()
		cmd.Wait()
		c.waitNoSleep("intbox")
	})

	gc := c.record("intbox").Client()
	defer gc.Close()

	t.Run("Go client stream cancelled", func(t *testing.T) {
		c := c.in(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pr, pw := io.Pipe()
		errc := make(chan error, 1)
		go func() {
			_, err := gc.Stream(ctx, api.RunRequest{Cmd: "sleep 300 & echo ready; sleep 300"}, pw, nil, nil)
			pw.Close()
			errc <- err
		}()
		if line, err := bufio.NewReader(pr).ReadString('\n'); line != "ready\n" {
			t.Fatalf("first line %q %v", line, err)
		}
		go io.Copy(io.Discard, pr)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("stream after cancel: %v", err)
		}
		c.waitNoSleep("intbox")
	})

	t.Run("Go client wait cancelled", func(t *testing.T) {
		c := c.in(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := gc.Run(ctx, api.RunRequest{Cmd: "sleep 300 & touch /tmp/waiting; sleep 300", Wait: true})
			errc <- err
		}()
		deadline := time.Now().Add(30 * time.Second)
		for c.sleepsStarted("intbox", "/tmp/waiting") < 2 {
			if time.Now().After(deadline) {
				t.Fatal("the command never started")
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("run after cancel: %v", err)
		}
		c.waitNoSleep("intbox")
	})

	t.Run("background interrupted", func(t *testing.T) {
		c := c.in(t)
		ctx := context.Background()
		p, err := gc.Start(ctx, api.RunRequest{Cmd: "sleep 300 & echo ready; sleep 300"})
		if err != nil {
			t.Fatal(err)
		}
		c.waitSleeps("intbox", 2)
		if err := gc.Signal(ctx, p.ID, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if st, err := gc.Wait(ctx, p.ID); err != nil || st.ExitCode == nil || *st.ExitCode != 130 {
			t.Fatalf("wait: %+v %v", st, err)
		}
		c.waitNoSleep("intbox")
	})
}

// sleepsStarted returns how many sleeps run once the marker file exists
// (0 before).
func (c *cli) sleepsStarted(box, marker string) int {
	if _, _, code := c.run("", "exec", box, "--", "test", "-e", marker); code != 0 {
		return 0
	}
	return len(c.sleeps(box))
}
