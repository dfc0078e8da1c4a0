package main

import (
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
