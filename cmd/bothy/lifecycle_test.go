package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/testenv"
)

// TestDockerHabits: what a Docker user types first works: run -d of a
// server image starts its command as its user, exec runs as that user (or
// root with -u root), logs shows the server's output (--tail,
// --timestamps, --since), ps shows the exit code once the server has
// ended, wait prints it, rename renames; and a foreground run without --
// runs the image's command.
func TestDockerHabits(t *testing.T) {
	c := newCLI(t)
	c.ok("pull", "-q", "oci-archive:"+testenv.HttpdArchive(t))
	c.ok("run", "-d", "--name", "web", "httpd:latest")
	if out := c.ok("exec", "web", "--", "sh", "-c", "id -un; pwd"); out != "www\n/var/www\n" {
		t.Errorf("exec: %q, want the image's user and directory", out)
	}
	if out := c.ok("exec", "-u", "root", "web", "--", "id", "-u"); out != "0\n" {
		t.Errorf("exec -u root: %q", out)
	}
	var page string
	for range 100 {
		out, _, code := c.run("", "exec", "web", "--", "wget", "-q", "-O", "-", "http://127.0.0.1:8080/")
		if code == 0 {
			page = out
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if page != "hello from httpd\n" {
		t.Fatalf("server: %q", page)
	}
	_, errOut, _ := c.run("", "logs", "--tail", "1", "--timestamps", "web")
	if ts, line, _ := strings.Cut(strings.TrimSpace(errOut), " "); strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(line, "response:200") || !validTime(ts) {
		t.Errorf("logs --tail 1 --timestamps: %q", errOut)
	}
	if _, errOut, _ := c.run("", "logs", "--since", "2000-01-01T00:00:00Z", "web"); !strings.Contains(errOut, "url:/") {
		t.Errorf("logs --since: %q", errOut)
	}
	c.ok("rename", "web", "site")
	// (The sandbox's end may end pkill too.)
	c.run("", "exec", "-u", "root", "site", "--", "killall", "httpd")
	if out := c.ok("wait", "site"); out != "143\n" {
		t.Errorf("wait: %q, want 143", out)
	}
	if out := c.ok("ps", "-a"); !strings.Contains(out, "exited (143)") || !strings.Contains(out, "site") {
		t.Errorf("ps -a:\n%s", out)
	}
	// The scripting habit: IDs only.
	if out := c.ok("ps", "-aq"); len(strings.TrimSpace(out)) != 12 {
		t.Errorf("ps -aq: %q, want one short ID", out)
	}
	if out := c.ok("images", "-q"); len(strings.Fields(out)) != 1 || len(strings.TrimSpace(out)) != 12 {
		t.Errorf("images -q: %q, want httpd's short ID", out)
	}
	// Foreground, without --: the image's command; with --entrypoint and
	// arguments: Docker's composition.
	if out := c.ok("run", "--rm", "--entrypoint", "/bin/sh", "httpd:latest", "--", "-c", "echo $GREETING; id -u"); out != "from the image\n101\n" {
		t.Errorf("run --entrypoint: %q", out)
	}
	if _, errOut, code := c.run("", "run", "--rm", "--restart", "on-failure", "httpd:latest"); code == 0 || !strings.Contains(errOut, "-d") {
		t.Errorf("--restart without -d: %d %q", code, errOut)
	}
	if _, errOut, code := c.run("", "logs", "--tail", "x", "site"); code == 0 || !strings.Contains(errOut, "--tail") {
		t.Errorf("logs --tail x: %d %q", code, errOut)
	}
	// run -d -- CMD: its output is the main process's, in bothy logs
	// (stdout on stdout, stderr on stderr), after it has exited too.
	c.ok("run", "-d", "--name", "job", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3")
	if out := c.ok("wait", "job"); out != "3\n" {
		t.Errorf("wait job: %q", out)
	}
	if out, errOut, code := c.run("", "logs", "job"); code != 0 || out != "to-stdout\n" || errOut != "to-stderr\n" {
		t.Errorf("logs of run -d -- CMD: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func validTime(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// TestDockerFlags: run and exec read --env-file (comments and blank lines
// skipped, KEY alone from bothy's environment, -e wins); exec -d starts
// the command in the background and returns at once; logs --until shows
// only what came before.
func TestDockerFlags(t *testing.T) {
	c := newCLI(t)
	envFile := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(envFile, []byte("# settings\nA=from-file\n\n  B=two words\nFROM_HOST\nUNSET_HERE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FROM_HOST", "host-value")
	os.Unsetenv("UNSET_HERE")
	show := "echo $A/$B/$FROM_HOST/${UNSET_HERE-unset}"
	if out := c.ok("run", "--rm", "--env-file", envFile, "-e", "B=flag", "--", "sh", "-c", show); out != "from-file/flag/host-value/unset\n" {
		t.Errorf("run --env-file: %q", out)
	}
	c.ok("run", "-d", "--name", "box")
	if out := c.ok("exec", "--env-file", envFile, "box", "--", "sh", "-c", show); out != "from-file/two words/host-value/unset\n" {
		t.Errorf("exec --env-file: %q", out)
	}
	if _, errOut, code := c.run("", "run", "--rm", "--env-file", "/nonexistent/env", "--", "true"); code == 0 || !strings.Contains(errOut, "--env-file") {
		t.Errorf("a missing --env-file: exit %d %q", code, errOut)
	}
	badFile := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(badFile, []byte("# ok\nA=1\n\n=no-name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := c.run("", "run", "--rm", "--env-file", badFile, "--", "true"); code == 0 || !strings.Contains(errOut, "line 4: invalid variable name") {
		t.Errorf("a bad --env-file line: exit %d %q", code, errOut)
	}
	// exec -d: back at once, the command runs on.
	start := time.Now()
	if out := c.ok("exec", "-d", "box", "--", "sh", "-c", "sleep 2; echo late > /late"); out != "" {
		t.Errorf("exec -d printed %q", out)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("exec -d took %v: it waited for the command", d)
	}
	if out := c.ok("exec", "box", "--", "sh", "-c", "test -e /late && echo early || echo not-yet"); out != "not-yet\n" {
		t.Errorf("right after exec -d: %q", out)
	}
	if out := c.ok("exec", "box", "--", "sh", "-c", "for i in $(seq 100); do test -e /late && cat /late && exit; sleep 0.1; done"); out != "late\n" {
		t.Errorf("the detached command's file: %q", out)
	}
	if _, errOut, code := c.run("", "exec", "-d", "-i", "box", "--", "true"); code == 0 || !strings.Contains(errOut, "-d") {
		t.Errorf("exec -d -i: exit %d %q", code, errOut)
	}
	// logs --until: only the lines before.
	c.ok("run", "-d", "--name", "ticker", "--", "sh", "-c", "echo first; sleep 1.5; echo second; sleep 1000")
	for i := 0; ; i++ {
		if out, _, _ := c.run("", "logs", "ticker"); out == "first\nsecond\n" {
			break
		} else if i == 100 {
			t.Fatalf("logs: %q", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := c.ok("logs", "--until", "0s", "ticker"); out != "first\nsecond\n" {
		t.Errorf("logs --until 0s (now: both lines before): %q", out)
	}
	if out := c.ok("logs", "--since", "10m", "--until", strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10), "ticker"); out != "" {
		t.Errorf("logs --until an hour ago: %q", out)
	}
	var ts []string
	out := c.ok("logs", "--timestamps", "ticker")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		stamp, _, _ := strings.Cut(l, " ")
		ts = append(ts, stamp)
	}
	if len(ts) != 2 {
		t.Fatalf("logs --timestamps: %q", out)
	}
	if out := c.ok("logs", "--until", ts[1], "ticker"); out != "first\n" {
		t.Errorf("logs --until the second line's time: %q", out)
	}
	if _, errOut, code := c.run("", "logs", "--until", "soon", "ticker"); code == 0 || !strings.Contains(errOut, "--until") {
		t.Errorf("logs --until soon: exit %d %q", code, errOut)
	}
}
