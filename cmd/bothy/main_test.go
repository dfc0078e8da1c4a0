package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bothy-sandbox/bothy/internal/ipc"
	// The launcher, the container init and the helpers, for ipc.Dispatch.
	_ "github.com/bothy-sandbox/bothy/internal/launcher"
	"github.com/bothy-sandbox/bothy/internal/testenv"
	"github.com/bothy-sandbox/bothy/internal/testimage"
	"github.com/bothy-sandbox/bothy/internal/trace"
	"github.com/bothy-sandbox/bothy/sandbox"
)

// The test binary is also the launcher, the container init and, with
// BOTHY_TEST_CLI set, the bothy CLI itself.
func TestMain(m *testing.M) {
	trace.Configure(trace.FromEnv()) // as bothy-init's and bothy's mains do
	ipc.Dispatch()
	if os.Getenv("BOTHY_TEST_CLI") != "" {
		main()
		os.Exit(0)
	}
	os.Exit(testenv.Run(m))
}

type cli struct {
	t    *testing.T
	root string
}

func newCLI(t *testing.T) *cli {
	t.Setenv("BOTHY_EXECUTOR", testenv.Executor(t))
	t.Setenv("BOTHY_DEFAULT_IMAGE", testenv.BusyboxArchive(t))
	t.Setenv("BOTHY_IMAGES", testenv.ImagesHelper(t))
	// Bridge sandboxes (builds' among them) on a network of the test's own.
	for _, kv := range (&killEnv{t: t}).networkEnv() {
		name, val, _ := strings.Cut(kv, "=")
		t.Setenv(name, val)
	}
	c := &cli{t: t, root: testenv.ShortTempDir(t)}
	t.Cleanup(func() {
		out, _, _ := c.run("", "ps", "-a", "--format", "json")
		for _, sb := range psRecords(out) {
			c.run("", "rm", "-f", sb.ID)
		}
	})
	return c
}

// run runs bothy in-process and returns stdout, stderr and the exit code.
func (c *cli) run(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	root := newRoot()
	var stdout, stderr bytes.Buffer
	root.SetArgs(append([]string{"--root", c.root}, args...))
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.ExecuteContext(context.Background())
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.code
	case err != nil:
		return stdout.String(), stderr.String() + err.Error(), 1
	}
	return stdout.String(), stderr.String(), 0
}

func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run("", args...)
	if code != 0 {
		c.t.Fatalf("bothy %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func TestImages(t *testing.T) {
	c := newCLI(t)
	rootfs := filepath.Join(t.TempDir(), "rootfs.tar")
	f, err := os.Create(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	if err := testimage.BusyboxTar(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	digest := strings.TrimSpace(c.ok("import", rootfs, "mybox:1"))
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("import printed %q, want a digest", digest)
	}
	c.ok("pull", "-q", "oci-archive:"+testenv.BusyboxArchive(t))
	var imgs []struct {
		Names  []string
		Digest string
	}
	if err := json.Unmarshal([]byte(c.ok("images", "--format", "json")), &imgs); err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 2 {
		t.Fatalf("images: %+v, want 2", imgs)
	}
	if table := c.ok("images"); !strings.Contains(table, "localhost/mybox") || !strings.Contains(table, "IMAGE ID") {
		t.Errorf("images table:\n%s", table)
	}
	// The imported image runs.
	if out := c.ok("run", "--rm", "mybox:1", "--", "echo", "imported"); out != "imported\n" {
		t.Errorf("run on imported image: %q", out)
	}
	// Saved and loaded, as an OCI or a docker archive, it keeps its name
	// (the ref.name annotation, Docker's RepoTags).
	dir := t.TempDir()
	c.ok("save", "-q", "mybox:1", filepath.Join(dir, "oci.tar"))
	c.ok("save", "-q", "mybox:1", "docker-archive:"+filepath.Join(dir, "docker.tar"))
	for _, archive := range []string{"oci.tar", "docker.tar"} {
		other := newCLI(t)
		other.ok("load", filepath.Join(dir, archive))
		if out := other.ok("run", "--rm", "mybox:1", "--", "echo", "loaded"); out != "loaded\n" {
			t.Errorf("run on the image loaded from %s: %q", archive, out)
		}
	}
	c.ok("rmi", "mybox:1")
	// A local name is not to be pulled; a short one may be either.
	if _, errOut, code := c.run("", "run", "--rm", "localhost/mybox:1", "--", "true"); code == 0 || strings.Contains(errOut, "bothy pull") || !strings.Contains(errOut, "bothy images") {
		t.Errorf("run on a removed local image: exit %d, %q", code, errOut)
	}
	if _, errOut, code := c.run("", "run", "--rm", "mybox:1", "--", "true"); code == 0 || !strings.Contains(errOut, "no local image localhost/mybox:1") || !strings.Contains(errOut, "bothy pull mybox:1") {
		t.Errorf("run on a removed image: exit %d, %q", code, errOut)
	}
	// Its blobs (and its extracted layers, unless the pulled busybox has
	// the same ones) go: one line per layer, then the total.
	out := c.ok("image", "prune")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "freed ") || strings.HasPrefix(last, "freed 0 B") {
		t.Errorf("image prune: %q", out)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "deleted layer sha256:") {
			t.Errorf("image prune: %q", out)
		}
	}
}

func TestRunExecLifecycle(t *testing.T) {
	c := newCLI(t)
	// Without an image: the default image. Output streams and the exit code is the command's.
	out, errOut, code := c.run("", "run", "--rm", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if out != "out\n" || errOut != "err\n" || code != 3 {
		t.Errorf("run: stdout %q stderr %q code %d", out, errOut, code)
	}
	id := strings.TrimSpace(c.ok("run", "-d", "--name", "box", "-e", "A=1", "-w", "/tmp"))
	if len(id) != 32 {
		t.Fatalf("run -d printed %q, want an ID", id)
	}
	if out := c.ok("exec", "box", "--", "sh", "-c", "echo $A; pwd"); out != "1\n/tmp\n" {
		t.Errorf("exec: %q", out)
	}
	if out, _, code := c.run("ping\n", "exec", "-i", "box", "--", "cat"); out != "ping\n" || code != 0 {
		t.Errorf("exec -i cat: %q %d", out, code)
	}
	if list := psList(t, c.ok("ps", "--format", "json")); len(list) != 1 || len(list[0].Names) != 1 || list[0].Names[0] != "box" || list[0].State != "running" || list[0].Id != id {
		t.Fatalf("ps: %+v", list)
	}
	var inspected []inspectView
	if err := json.Unmarshal([]byte(c.ok("inspect", id[:8])), &inspected); err != nil || inspected[0].Socket == "" || inspected[0].Id != id {
		t.Fatalf("inspect: %+v %v", inspected, err)
	}
	if _, err := os.Stat(inspected[0].Socket); err != nil {
		t.Errorf("inspect's socket path: %v", err)
	}
	if _, errOut, code := c.run("", "rm", "box"); code == 0 || !strings.Contains(errOut, "--force") {
		t.Errorf("rm of a running sandbox: exit %d %q", code, errOut)
	}
	c.ok("stop", "box")
	if out := c.ok("ps"); strings.Contains(out, "box") {
		t.Errorf("ps lists a stopped sandbox:\n%s", out)
	}
	if out := c.ok("ps", "-a"); !strings.Contains(out, "exited") {
		t.Errorf("ps -a:\n%s", out)
	}
	if _, errOut, code := c.run("", "exec", "box", "--", "true"); code == 0 || !strings.Contains(errOut, "exited") {
		t.Errorf("exec in a stopped sandbox: exit %d %q", code, errOut)
	}
	c.ok("rm", "box")
	if out := c.ok("ps", "-a", "--format", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("ps -a after rm: %s", out)
	}
}

func TestErrors(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "nosuch", "--", "true"}, "no such sandbox"},
		{[]string{"run", "--rm", "no/such:image", "--", "true"}, "not found"},
		{[]string{"run", "--network", "bridged", "--", "true"}, "unknown network mode"},
		{[]string{"ps", "--format", "yaml"}, "unknown format"},
		// An image's command runs in the foreground as with docker run
		// (the default image's is bash); with none, there is nothing to run.
		{[]string{"run", "--entrypoint", ""}, "nothing to run"},
		{[]string{"pull", "nosuchtransport:foo"}, "transport"},
	} {
		_, errOut, code := c.run("", tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bothy %s: exit %d, stderr %q, want %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

// A bothy killed while its launcher runs leaves a record that prune removes.
func TestKilledMidCreate(t *testing.T) {
	c := newCLI(t)
	// A fake launcher that blocks on a FIFO without another execve: an
	// execve after newuidmap has mapped it to root in its namespace gains
	// capabilities, and the kernel then clears its parent-death signal (a
	// real launcher waits for the mapping and never execs).
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	hang := filepath.Join(dir, "hang")
	// On a descriptor of its own: fd 3 is the launch channel, and closing
	// it could make the CLI's send of the launch request fail first.
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec 9<>"+fifo+"\nread x <&9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, "--root", c.root, "run", "-d", "--name", "half")
	cmd.Env = append(os.Environ(), "BOTHY_TEST_CLI=1", "BOTHY_INIT="+hang)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the launcher is recorded (the first run imports the default
	// image: slow on a loaded machine), then kill the CLI outright.
	deadline := time.Now().Add(time.Minute)
	for {
		if list := c.records(); len(list) == 1 && list[0].LauncherPid != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the launcher never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	var list []sandbox.Sandbox
	deadline = time.Now().Add(10 * time.Second)
	for {
		list = psRecords(c.ok("ps", "-a", "--format", "json"))
		if len(list) == 1 && list[0].Status == sandbox.StatusDead {
			break // the launcher died with its parent
		}
		if time.Now().After(deadline) {
			t.Fatalf("half-created sandbox: %+v", list)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if out := c.ok("prune"); !strings.Contains(out, list[0].ID) {
		t.Errorf("prune: %q", out)
	}
	entries, _ := os.ReadDir(filepath.Join(c.root, "run", "sb"))
	uppers, _ := os.ReadDir(filepath.Join(c.root, "data", "sandboxes"))
	if len(entries)+len(uppers) != 0 {
		t.Errorf("left behind: %d state dirs, %d upper dirs", len(entries), len(uppers))
	}
	// The name is free again.
	c.ok("run", "--rm", "--name", "half", "--", "true")
}

// Twenty bothy processes at once, as on an evaluation farm: pulls of the same
// archive, runs, removals. None may fail, share an overlay or corrupt the
// store or the state.
func TestParallelProcesses(t *testing.T) {
	c := newCLI(t)
	self, _ := os.Executable()
	archive := testenv.BusyboxArchive(t)
	bothy := func(args ...string) *exec.Cmd {
		cmd := exec.Command(self, append([]string{"--root", c.root}, args...)...)
		cmd.Env = append(os.Environ(), "BOTHY_TEST_CLI=1")
		return cmd
	}
	const n = 20
	type result struct {
		i   int
		out []byte
		err error
	}
	results := make(chan result, 2*n)
	for i := range n {
		go func() {
			// Every process pulls the same image, then runs a sandbox that
			// writes its own number and reads it back.
			out, err := bothy("pull", "-q", "oci-archive:"+archive).CombinedOutput()
			if err == nil {
				out, err = bothy("run", "--rm", "--name", fmt.Sprintf("p%d", i), "busybox", "--",
					"sh", "-c", fmt.Sprintf("echo %d > /mine && sleep 0.2 && cat /mine", i)).CombinedOutput()
			}
			results <- result{i, out, err}
		}()
	}
	for range n {
		r := <-results
		if r.err != nil || strings.TrimSpace(string(r.out)) != fmt.Sprint(r.i) {
			t.Errorf("process %d: %v: %q", r.i, r.err, r.out)
		}
	}
	// Detached sandboxes started and removed by separate processes at once.
	ids := make(chan string, n)
	for range n {
		go func() {
			out, err := bothy("run", "-d", "busybox").Output()
			if err != nil {
				ids <- "error: " + err.Error()
				return
			}
			ids <- strings.TrimSpace(string(out))
		}()
	}
	var started []string
	for range n {
		id := <-ids
		if strings.HasPrefix(id, "error") {
			t.Error(id)
			continue
		}
		started = append(started, id)
	}
	done := make(chan error, len(started))
	for _, id := range started {
		go func() { done <- bothy("rm", "-f", id).Run() }()
	}
	for range started {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	if out := c.ok("ps", "-a", "--format", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("sandboxes left: %s", out)
	}
	var imgs []json.RawMessage
	if err := json.Unmarshal([]byte(c.ok("images", "--format", "json")), &imgs); err != nil || len(imgs) != 1 {
		t.Errorf("store after %d parallel pulls: %d images (%v)", n, len(imgs), err)
	}
}

// TestPodmanFlags: what bothy shares with podman means what podman's does:
// tag; save -o with --format; load -i and -q; rmi -f and -i; stop -t in
// whole seconds (or a duration) and -i; rm -i.
func TestPodmanFlags(t *testing.T) {
	c := newCLI(t)
	c.ok("pull", "-q", "oci-archive:"+testenv.BusyboxArchive(t))
	c.ok("tag", "busybox:latest", "mine:1", "example.org/team/mine:2")
	if table := c.ok("images"); !strings.Contains(table, "localhost/mine") || !strings.Contains(table, "example.org/team/mine") {
		t.Errorf("images after tag:\n%s", table)
	}
	archive := filepath.Join(t.TempDir(), "d.tar")
	c.ok("save", "-q", "-o", archive, "--format", "docker-archive", "mine:1")
	if out, err := exec.Command("tar", "-tf", archive).Output(); err != nil || !strings.Contains(string(out), "manifest.json") {
		t.Errorf("save --format docker-archive: %v %q", err, out)
	}
	other := newCLI(t)
	if out := other.ok("load", "-q", "-i", archive); out != "" {
		t.Errorf("load -q printed %q", out)
	}
	other.ok("run", "--rm", "mine:1", "--", "true")
	c.ok("rmi", "-f", "example.org/team/mine:2")
	if _, _, code := c.run("", "rmi", "nosuch:1"); code == 0 {
		t.Error("rmi of a missing image succeeded")
	}
	if out, errOut, code := c.run("", "rmi", "-i", "nosuch:1", "mine:1"); code != 0 || out != "mine:1\n" || errOut != "" {
		t.Errorf("rmi -i: exit %d %q %q", code, out, errOut)
	}
	c.ok("run", "-d", "--name", "s1")
	if _, errOut, code := c.run("", "stop", "-t", "soon", "s1"); code == 0 || !strings.Contains(errOut, "whole seconds") {
		t.Errorf("stop -t soon: exit %d %q", code, errOut)
	}
	c.ok("stop", "-t", "1", "s1")
	if out, errOut, code := c.run("", "stop", "-i", "-t", "500ms", "nosuch", "s1"); code != 0 || out != "s1\n" || errOut != "" {
		t.Errorf("stop -i: exit %d %q %q", code, out, errOut)
	}
	if out, errOut, code := c.run("", "rm", "-i", "nosuch", "s1"); code != 0 || out != "s1\n" || errOut != "" {
		t.Errorf("rm -i: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := c.run("", "rm", "nosuch"); code == 0 || !strings.Contains(errOut, "no such sandbox") {
		t.Errorf("rm of a missing sandbox: exit %d %q", code, errOut)
	}
}

// TestAllLatest: podman's --all and --latest on the commands that act on
// sandboxes. --latest is the sandbox created last; stop, kill, pause
// --all take the running ones, unpause --all the paused ones, restart
// --all every one (--running the running ones), rm --all every one (the
// running ones with -f); SANDBOX with either, or neither, is refused.
// (TestPoolCLI: a pool's unclaimed sandboxes are never taken.)
func TestAllLatest(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "a")
	time.Sleep(10 * time.Millisecond)
	c.ok("run", "-d", "--name", "b")
	id := func(name string) string { return c.inspectView(name).Id[:12] }
	states := func() string {
		return c.ok("ps", "-a", "--format", "{{.Names}}={{.State}}")
	}
	lines := func(ids ...string) string { return strings.Join(ids, "\n") + "\n" }
	for _, args := range [][]string{{"stop"}, {"stop", "-a", "-l"}, {"stop", "-a", "a"}, {"rm", "-l", "b"}} {
		if _, errOut, code := c.run("", args...); code == 0 || !strings.Contains(errOut, "--all") {
			t.Errorf("bothy %s: exit %d %q", strings.Join(args, " "), code, errOut)
		}
	}
	if out := c.ok("stop", "--latest", "-t", "1"); out != lines(id("b")) {
		t.Errorf("stop --latest printed %q, want b's ID", out)
	}
	if out := c.ok("pause", "-a"); out != lines(id("a")) {
		t.Errorf("pause -a printed %q, want a's ID (b is stopped)", out)
	}
	if out := c.ok("unpause", "--all"); out != lines(id("a")) {
		t.Errorf("unpause --all printed %q", out)
	}
	if out := c.ok("restart", "-a", "--running", "-t", "1"); out != lines(id("a")) {
		t.Errorf("restart -a --running printed %q", out)
	}
	if out := c.ok("kill", "-a"); out != lines(id("a")) {
		t.Errorf("kill -a printed %q", out)
	}
	if got := states(); !strings.Contains(got, "a=exited") || !strings.Contains(got, "b=exited") {
		t.Errorf("after stop --latest and kill -a:\n%s", got)
	}
	if out := c.ok("restart", "--all", "-t", "1"); strings.Count(out, "\n") != 2 {
		t.Errorf("restart --all printed %q, want both", out)
	}
	if _, _, code := c.run("", "rm", "-a"); code == 0 {
		t.Error("rm -a of running sandboxes without -f succeeded")
	}
	c.ok("rm", "-af")
	if got := c.ok("ps", "-a", "--format", "{{.Names}}"); got != "" {
		t.Errorf("after rm -af, ps -a lists:\n%s", got)
	}
}

// TestPsFilter: ps --filter by name, label, status (exited ones listed
// without -a), id, ancestor and network, one key's values any, several
// keys all; --last, --latest, --no-trunc; a bad filter names the keys.
func TestPsFilter(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "web-1", "--label", "team=ml")
	time.Sleep(10 * time.Millisecond)
	c.ok("run", "-d", "--name", "web-2", "--label", "team=ops", "--network", "host")
	time.Sleep(10 * time.Millisecond)
	c.ok("run", "-d", "--name", "db", "--label", "team=ml")
	c.ok("stop", "-t", "1", "db")
	names := func(args ...string) string {
		return strings.TrimSpace(c.ok(append([]string{"ps", "--format", "{{.Names}}"}, args...)...))
	}
	id := c.inspectView("web-2").Id
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", "name=web"}, "web-1\nweb-2"},
		{[]string{"-f", "label=team=ml"}, "web-1"},
		{[]string{"-a", "--filter", "label=team=ml"}, "web-1\ndb"},
		{[]string{"-f", "label=team"}, "web-1\nweb-2"},
		{[]string{"-f", "status=exited"}, "db"},
		{[]string{"-f", "status=exited", "-f", "status=running"}, "web-1\nweb-2\ndb"},
		{[]string{"-f", "status=running", "-f", "label=team=ops"}, "web-2"},
		{[]string{"-f", "id=" + id[:8]}, "web-2"},
		{[]string{"-f", "network=host"}, "web-2"},
		{[]string{"-f", "ancestor=nosuch"}, ""},
		{[]string{"--last", "2"}, "db\nweb-2"},
		{[]string{"-l"}, "db"},
	} {
		if got := names(tc.args...); !sameLines(got, tc.want) {
			t.Errorf("ps %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	if got := names("--last", "2"); got != "db\nweb-2" {
		t.Errorf("ps --last 2: %q, want the newest first", got)
	}
	if out := strings.TrimSpace(c.ok("ps", "-q", "--no-trunc", "-f", "name=web-2")); out != id {
		t.Errorf("ps -q --no-trunc: %q, want %q", out, id)
	}
	if _, errOut, code := c.run("", "ps", "-f", "colour=red"); code == 0 || !strings.Contains(errOut, "ancestor (") || !strings.Contains(errOut, "status (") {
		t.Errorf("ps -f colour=red: exit %d %q", code, errOut)
	}
	if _, errOut, code := c.run("", "ps", "-f", "status=sleeping"); code == 0 || !strings.Contains(errOut, "exited or dead") {
		t.Errorf("ps -f status=sleeping: exit %d %q", code, errOut)
	}
}

// sameLines: a and b hold the same lines, in any order.
func sameLines(a, b string) bool {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestLatestAndMoreFlags: --latest on the commands that take one sandbox
// (inspect, top, diff, port, stats; logs and wait too); start --all and
// --latest; ps and images --noheading, images --no-trunc; commit
// --iidfile; rm -f -t; rmi --all.
func TestLatestAndMoreFlags(t *testing.T) {
	c := newCLI(t)
	c.ok("run", "-d", "--name", "older")
	time.Sleep(10 * time.Millisecond)
	c.ok("run", "-d", "--name", "newer")
	if out := c.ok("inspect", "-l", "--format", "{{.Name}}"); out != "newer\n" {
		t.Errorf("inspect -l: %q", out)
	}
	if out := c.ok("top", "--latest"); !strings.Contains(out, "bothy-executor") && !strings.Contains(out, "PID") {
		t.Errorf("top --latest: %q", out)
	}
	c.ok("exec", "newer", "--", "touch", "/marked")
	if out := c.ok("diff", "-l"); !strings.Contains(out, "/marked") {
		t.Errorf("diff -l: %q", out)
	}
	if _, errOut, code := c.run("", "inspect", "-l", "older"); code == 0 || !strings.Contains(errOut, "--latest") {
		t.Errorf("inspect -l older: exit %d %q", code, errOut)
	}
	if out := c.ok("stats", "-l", "--interval", "0", "--format", "json"); !strings.Contains(out, c.inspectView("newer").Id[:12]) {
		t.Errorf("stats -l: %q", out)
	}
	c.ok("stop", "-a", "-t", "1")
	if out := c.ok("start", "--latest"); out != c.inspectView("newer").Id[:12]+"\n" {
		t.Errorf("start --latest: %q", out)
	}
	if out := c.ok("start", "--all"); out != c.inspectView("older").Id[:12]+"\n" {
		t.Errorf("start --all (older only: newer runs): %q", out)
	}
	if out := c.ok("ps", "--noheading", "--format", "table"); strings.Contains(out, "SANDBOX ID") || strings.Count(out, "\n") != 2 {
		t.Errorf("ps --noheading:\n%s", out)
	}
	iid := filepath.Join(t.TempDir(), "iid")
	c.ok("commit", "-q", "--iidfile", iid, "newer", "marked:v1")
	if b, err := os.ReadFile(iid); err != nil || !strings.HasPrefix(string(b), "sha256:") || len(b) != 71 {
		t.Errorf("commit --iidfile: %q %v", b, err)
	}
	if out := c.ok("images", "--noheading", "--no-trunc"); strings.Contains(out, "IMAGE ID") || !strings.Contains(out, "sha256:") {
		t.Errorf("images --noheading --no-trunc:\n%s", out)
	}
	start := time.Now()
	c.ok("rm", "-f", "-t", "1", "older")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("rm -f -t 1 took %v", d)
	}
	c.ok("rm", "-f", "newer")
	c.ok("rmi", "--all")
	if out := c.ok("images", "-q"); out != "" {
		t.Errorf("images after rmi --all: %q", out)
	}
	if _, errOut, code := c.run("", "rmi"); code == 0 || !strings.Contains(errOut, "--all") {
		t.Errorf("rmi without IMAGE: exit %d %q", code, errOut)
	}
}

// TestFilterCidfile: run --cidfile writes the new sandbox's ID (a file
// that exists is refused before anything starts); stop, kill, rm... take
// --cidfile and --filter (ps's keys); port --all lists every running
// sandbox's ports after its ID.
func TestFilterCidfile(t *testing.T) {
	c := newCLI(t)
	cid := filepath.Join(t.TempDir(), "cid")
	c.ok("run", "-d", "--cidfile", cid, "--name", "a", "--label", "team=x", "-p", "8000")
	b, err := os.ReadFile(cid)
	if err != nil || string(b) != c.inspectView("a").Id {
		t.Fatalf("--cidfile holds %q (%v), want a's ID", b, err)
	}
	if _, errOut, code := c.run("", "run", "-d", "--cidfile", cid, "--name", "again"); code == 0 || !strings.Contains(errOut, "--cidfile") || !strings.Contains(errOut, "exists") {
		t.Errorf("run --cidfile of an existing file: exit %d %q", code, errOut)
	}
	c.ok("run", "-d", "--name", "b")
	if out := c.ok("ps", "-a", "--format", "{{.Names}}"); !sameLines(strings.TrimSpace(out), "a\nb") {
		t.Errorf("the refused run left a sandbox: %q", out)
	}
	if out := c.ok("port", "--all"); !regexp.MustCompile(`^` + c.inspectView("a").Id[:12] + `\t8000/tcp -> 127\.0\.0\.1:\d+\n$`).MatchString(out) {
		t.Errorf("port --all: %q", out)
	}
	if out := c.ok("stop", "-t", "1", "--cidfile", cid); out != string(b)+"\n" {
		t.Errorf("stop --cidfile: %q", out)
	}
	if out := c.ok("kill", "--filter", "name=b"); out != c.inspectView("b").Id[:12]+"\n" {
		t.Errorf("kill --filter name=b: %q", out)
	}
	if out := c.ok("rm", "--filter", "label=team=x"); out != string(b)[:12]+"\n" {
		t.Errorf("rm --filter label=team=x: %q", out)
	}
	if out := strings.TrimSpace(c.ok("ps", "-a", "--format", "{{.Names}}")); out != "b" {
		t.Errorf("after rm --filter: %q", out)
	}
	if _, errOut, code := c.run("", "rm", "--filter", "colour=red"); code == 0 || !strings.Contains(errOut, "unknown key") {
		t.Errorf("rm --filter colour=red: exit %d %q", code, errOut)
	}
}

// TestRunPodmanFlags: run's --hostname (the UTS name and $HOSTNAME, kept
// by start), --label-file (--label wins), --pidfile (PID 1's host pid) and
// --init (always so) as podman's; a bad host name is refused.
func TestRunPodmanFlags(t *testing.T) {
	c := newCLI(t)
	labels := filepath.Join(t.TempDir(), "labels")
	if err := os.WriteFile(labels, []byte("# team\nteam=ml\nowner=ana\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pidfile := filepath.Join(t.TempDir(), "pid")
	c.ok("run", "-d", "--init", "--name", "h", "--hostname", "worker-1.lab", "--label-file", labels, "--label", "owner=bo", "--pidfile", pidfile)
	if out := c.ok("exec", "h", "--", "sh", "-c", "hostname; echo $HOSTNAME"); out != "worker-1.lab\nworker-1.lab\n" {
		t.Errorf("--hostname: %q", out)
	}
	v := c.inspectView("h")
	if v.Config.Labels["team"] != "ml" || v.Config.Labels["owner"] != "bo" {
		t.Errorf("--label-file and --label: %v", v.Config.Labels)
	}
	if b, err := os.ReadFile(pidfile); err != nil || string(b) != strconv.Itoa(v.State.Pid) {
		t.Errorf("--pidfile: %q %v, want %d", b, err, v.State.Pid)
	}
	c.ok("restart", "-t", "1", "h")
	if out := c.ok("exec", "h", "--", "hostname"); out != "worker-1.lab\n" {
		t.Errorf("--hostname after restart: %q", out)
	}
	for _, bad := range []string{"-lead", "a..b", strings.Repeat("x", 64)} {
		if _, errOut, code := c.run("", "run", "--rm", "--hostname", bad, "--", "true"); code == 0 || !strings.Contains(errOut, "hostname") {
			t.Errorf("--hostname %q: exit %d %q", bad, code, errOut)
		}
	}
}
